/*
 * ipc/ipc.h - what the IPC subsystem (src/ipc/: sharing device memory, VMM physical
 * memory, events and notifies between processes, acl_next_semantics.md §3) offers to
 * other subsystems: nothing; it is the top layer and plugs into aclFinalize through
 * ipc/hooks.c. Helpers shared inside src/ipc/ are in ipc/ipc_private.h; a function
 * declared here would start with ipc_.
 */
#ifndef MOCK_IPC_H
#define MOCK_IPC_H

#include "core/core.h"

#endif /* MOCK_IPC_H */
