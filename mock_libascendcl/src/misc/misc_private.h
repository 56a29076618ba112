/*
 * misc/misc_private.h - declarations shared by the misc sources of
 * libascendcl.so (util.c, overflow.c, other.c, dump.c, exception.c); no file
 * outside src/misc/ includes it (other subsystems use misc/misc.h). Every
 * function declared here starts with misc_.
 */
#ifndef MOCK_MISC_PRIVATE_H
#define MOCK_MISC_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "misc/misc.h"

/* Hooks (registered in misc/hooks.c, run by core): */
/* dump.c, init hook: applies the "dump" section of an aclInit config file
 * (CANN lets acl.json configure dumping at init). `text` is the file content;
 * *has_dump tells whether it had a "dump" section.
 * No "dump" key -> ACL_SUCCESS and nothing changes; an invalid section -> the
 * error (ACL_ERROR_INVALID_DUMP_CONFIG ..., recorded under `fn`, message naming
 * the key) and nothing changes. */
MOCK_HIDDEN aclError misc_dump_configure_from_init(const char *fn, const char *path, const char *text, size_t len,
                                                   bool *has_dump);
/* dump.c, init_undo and release hooks: ends an aclmdlInitDump session and
 * forgets the aclInit dump config (CANN stops dumping at finalize, so a later
 * aclInit + aclmdlInitDump succeeds). */
MOCK_HIDDEN void misc_dump_finalize(void);
/* dump.c, init hook when the aclInit config has no "dump" section: the dump config
 * file named by DUMP_CONFIG_PATH (the same JSON as aclmdlSetDump's), validated the
 * same way (an invalid file fails aclInit with its code); unset/empty -> nothing. */
MOCK_HIDDEN aclError misc_dump_configure_from_env(const char *fn);
/* exception.c, task_failed hook: runs the exception-info callbacks registered
 * with aclrtSetExceptionInfoCallback / aclrtExceptionInfoCallbackRegister for
 * a failed task (called without locks, on the stream worker); for a kernel fault
 * (f->detail) the callback of its binary first. */
MOCK_HIDDEN void misc_exception_report(const core_task_failure *f);

/* util.c: exact IEEE binary16 <-> binary32 (RNE, subnormals, inf/nan). */
MOCK_HIDDEN float misc_half_to_float(uint16_t h);
MOCK_HIDDEN uint16_t misc_float_to_half(float f);
/* util.c: bfloat16 <-> binary32 (RNE, NaN stays a quiet NaN). */
MOCK_HIDDEN float misc_bf16_to_float(uint16_t b);
MOCK_HIDDEN uint16_t misc_float_to_bf16(float f);

/* overflow.c: saturation mode of a (logical) device; the default depends on
 * the SoC (INF/NaN on A2/A3-class SoCs, saturation on older ones). */
MOCK_HIDDEN aclrtFloatOverflowMode misc_device_sat_mode(int32_t device);
/* overflow.c: fault hook, resolve `stream` (NULL = default) and enqueue a task
 * that does nothing (stream-ordered no-ops: overflow resets, aclrtProfTrace), of
 * `kind` for the diagnostics (MOCK_TASK_OTHER, MOCK_TASK_MARKER). */
MOCK_HIDDEN aclError misc_enqueue_noop(const char *fn, aclrtStream stream, mock_task_kind kind);

/* (m18) Teardown of what misc keeps per context or process (hooks.c):
 * overflow_addr.c: the context's overflow status area (ctx_teardown hook);
 * mbuf.c: every shared buffer still alive (release hook, aclFinalize);
 * snapshot.c: forced unlock, the backup and the callbacks (release hook). */
MOCK_HIDDEN void misc_overflow_area_teardown(mock_context *ctx);
MOCK_HIDDEN void misc_mbuf_release_all(void);
MOCK_HIDDEN void misc_snapshot_release(void);

#endif /* MOCK_MISC_PRIVATE_H */
