/*
 * notify/notify.h - what the notify subsystem (src/notify/: notifies and count
 * notifies, acl_next_semantics.md §3.4-3.5) offers to higher subsystems: the IPC side
 * of a notify, for src/ipc/ (aclrtNotifyGetExportKey / aclrtNotifyImportByKey). Its
 * hooks (aclFinalize) are registered in notify/hooks.c. Every function declared here
 * starts with notify_. Helpers shared inside src/notify/ are in notify/notify_private.h.
 */
#ifndef MOCK_NOTIFY_H
#define MOCK_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* Export: `notify` is a live notify created in this process; *id = its id, the
 * generation an acquire checks. Records and returns 107000 (not live, imported from
 * another process) or 207000 (no shareable memory). */
MOCK_HIDDEN aclError notify_ipc_export(const char *fn, aclrtNotify notify, uint32_t *id);
/* Broker side: the notify `notify` with id `id` is still alive (not destroyed): takes
 * a reference (*obj, dropped by notify_ipc_put) and gives where its word is (*fd,
 * *offset) and its device (user id in this process). ACL_SUCCESS or
 * ACL_ERROR_RT_IPC_ERROR; records no error. */
MOCK_HIDDEN aclError notify_ipc_acquire(aclrtNotify notify, uint32_t id, void **obj, int *fd, uint64_t *offset,
                                        int32_t *device);
MOCK_HIDDEN void notify_ipc_put(void *obj);
/* Importer: a new notify of the current context on the shared word `word` (mapped by
 * the caller) that may only be recorded (only the creator waits, §3.4); release(arg)
 * runs when it is freed. On failure nothing is kept. */
MOCK_HIDDEN aclError notify_ipc_open(const char *fn, void *word, void (*release)(void *arg), void *arg,
                                     aclrtNotify *out);

#endif /* MOCK_NOTIFY_H */
