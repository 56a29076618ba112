/*
 * misc/misc.h - what the misc subsystem (src/misc/: overflow, dump, exception,
 * other, util, the generated unsupported stubs) offers to the other
 * subsystems: the dump session hooks of aclInit/aclFinalize and the exception
 * reports of failed tasks. Every function declared here starts with misc_.
 * Helpers used only inside src/misc/ are in misc/misc_private.h.
 */
#ifndef MOCK_MISC_H
#define MOCK_MISC_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

/* dump.c: ends an aclmdlInitDump session; aclFinalize calls it (CANN stops
 * dumping at finalize, so a later aclInit + aclmdlInitDump succeeds). */
MOCK_HIDDEN void misc_dump_finalize(void);
/* dump.c: applies the "dump" section of an aclInit config file (CANN lets
 * acl.json configure dumping at init). `text` is the file content. No "dump"
 * key -> ACL_SUCCESS and nothing changes; an invalid section -> the error
 * (ACL_ERROR_INVALID_DUMP_CONFIG ..., recorded under `fn`, message naming the
 * key). Meant to be called by aclInit after its own validation. */
MOCK_HIDDEN aclError misc_dump_configure_from_init(const char *fn, const char *path, const char *text, size_t len);
/* exception.c: runs the exception-info callbacks registered with
 * aclrtSetExceptionInfoCallback / aclrtExceptionInfoCallbackRegister for a
 * failed task (call without holding locks, e.g. from the stream worker after
 * a task returned nonzero). */
MOCK_HIDDEN void misc_exception_report(int32_t device, uint32_t stream_id, uint32_t task_id, aclError code);
/* exception.c: records the id of the task the calling thread just submitted
 * (read back by aclrtGetThreadLastTaskId); call from stream_enqueue. */
MOCK_HIDDEN void misc_note_task_submitted(uint32_t task_id);

#endif /* MOCK_MISC_H */
