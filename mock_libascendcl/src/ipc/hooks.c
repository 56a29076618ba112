/*
 * hooks.c - the IPC subsystem's descriptor (core/core.h "subsystem.c"): what
 * aclFinalize does to sharing between processes. Level 500, the top layer: it calls
 * the stream (events), mem (memory, VMM) and notify subsystems. Its release runs before
 * theirs: the memory imported by key is unmapped (the exporters are told), the
 * connections to other processes end (the exporters release what this process held),
 * and the broker stops (what other processes imported from here stays mapped in them).
 * Events, notifies and VMM handles opened from other processes go with their own
 * subsystems afterwards.
 */
#include "core/core.h"
#include "ipc/ipc.h"
#include "ipc/ipc_private.h"

static void ipc_release(void)
{
    ipc_mem_finalize();
    ipc_client_finalize();
    ipc_broker_finalize();
}

static const core_subsystem k_ipc_subsystem = {
    .name = "ipc",
    .level = 500,
    .release = ipc_release,
};
MOCK_REGISTER_SUBSYSTEM(k_ipc_subsystem)
