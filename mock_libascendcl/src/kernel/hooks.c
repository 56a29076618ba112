/*
 * hooks.c - the kernel subsystem's descriptor (core/core.h "subsystem.c"): at
 * aclFinalize, after the contexts (and so every stream and queued launch) are gone, the
 * binaries still loaded are unloaded and the block worker pool stops (it restarts at
 * the next launch). Twins registered with aclmockRegisterKernel stay registered: they
 * belong to the process, not to an aclInit/aclFinalize cycle.
 */
#include "core/core.h"
#include "kernel/kernel.h"
#include "kernel/kernel_private.h"

static void kernel_release(void)
{
    kernel_binaries_finalize();
    kernel_pool_finalize();
}

static const core_subsystem k_kernel_subsystem = {
    .name = "kernel",
    .level = CORE_LEVEL_KERNEL,
    .release = kernel_release,
};
MOCK_REGISTER_SUBSYSTEM(k_kernel_subsystem)
