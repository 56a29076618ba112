/*
 * hooks.c - the memory subsystem's descriptor (core/core.h "subsystem.c"): what
 * aclFinalize and the destruction of a stream do to memory.
 */
#include "core/core.h"
#include "mem/mem.h"
#include "mem/mem_private.h"

static const core_subsystem k_mem_subsystem = {
    .name = "mem",
    .level = CORE_LEVEL_MEM,
    .release = mem_finalize,                           /* every allocation, VMM range, peer pair */
    .stream_destroyed = mem_allocator_stream_destroyed, /* the allocator registered on it */
};
MOCK_REGISTER_SUBSYSTEM(k_mem_subsystem)
