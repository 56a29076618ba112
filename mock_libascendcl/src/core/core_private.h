/*
 * core/core_private.h - helpers shared by the core files only (config.c, error.c,
 * init.c, device.c, context.c, json.c); no file outside src/core/ includes it.
 * Other subsystems use core/core.h. Every function declared here starts with core_.
 */
#ifndef MOCK_CORE_PRIVATE_H
#define MOCK_CORE_PRIVATE_H

#include <stdarg.h>

#include "core/core.h"

#define CORE_MAX_FAULTS 64
#define CORE_FUNC_NAME_MAX 64

/* ------------------------------------------------------------------ config.c */

typedef struct core_fault_spec {
    char func[CORE_FUNC_NAME_MAX];
    uint32_t nth;   /* 0 = every call */
    aclError code;
} core_fault_spec;

/* Faults parsed from ASCEND_MOCK_FAULTS (valid entries only). */
MOCK_HIDDEN const core_fault_spec *core_config_faults(size_t *count);
/* Sticky code from ASCEND_MOCK_DEVICE_LOST for a user device id, 0 if none. */
MOCK_HIDDEN aclError core_config_lost_code(int32_t device);
/* Default sticky code of a lost device (ACL_ERROR_RT_LOST_HEARTBEAT). */
#define CORE_DEFAULT_LOST_CODE 507010

/* ------------------------------------------------------------------- error.c */

/* Switch aclGetRecentErrMsg between thread level (default) and process level
 * ("err_msg_mode": "1" in the aclInit JSON). */
MOCK_HIDDEN void core_error_set_process_mode(bool process_level);
/* va_list form of core_error (shared by core_error and aclmockSetError): records
 * "<func>: <formatted message>" and `code` as the last error; returns code. */
MOCK_HIDDEN aclError core_error_v(const char *func, aclError code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* ------------------------------------------------------------------ device.c */

/* The default device of the aclInit config ({"defaultDevice": {"default_device": N}}),
 * -1 for none. Set by aclInit (after validating N against the visible devices), reset
 * to -1 by aclFinalize (core_devices_finalize). */
MOCK_HIDDEN void core_default_device_set(int32_t device);
MOCK_HIDDEN int32_t core_default_device(void);
/* For a thread without a current context while a default device is configured: makes
 * the default device's default context current (creating it, with one aclrtSetDevice
 * reference, when the device is not set). Returns that context, or NULL (no default
 * device, device lost, or out of memory). */
MOCK_HIDDEN mock_context *core_default_device_bind(void);

/* Live-object counter of `device` (see core_stat_add), for the aclmock* queries
 * and the leak report. */
MOCK_HIDDEN int64_t core_stat_get(int32_t device, mock_stat which);
/* aclFinalize (init.c): destroys every context (with its streams) and resets
 * every device. */
MOCK_HIDDEN void core_devices_finalize(void);

/* ----------------------------------------------------------------- context.c */

/* Creates a context on `device` (with its default stream) and registers it.
 * NULL on allocation failure. Does not make it current. */
MOCK_HIDDEN mock_context *core_ctx_create(int32_t device, bool primary);
/* Unregisters and tears down a context (drains and destroys its streams). Threads
 * whose current context it was see NULL from then on. */
MOCK_HIDDEN void core_ctx_destroy(mock_context *ctx);
/* Sets the calling thread's current context (NULL clears). */
MOCK_HIDDEN void core_ctx_set_current(mock_context *ctx);
/* Destroys every live context (aclFinalize). */
MOCK_HIDDEN void core_ctx_destroy_all(void);
/* Collects the live contexts of `device`, each retained (release each with
 * core_ctx_release), into a malloc'd array (free it); NULL with *n = 0 when there
 * is none or memory is short. */
MOCK_HIDDEN mock_context **core_ctx_collect(int32_t device, size_t *n);
MOCK_HIDDEN void core_ctx_release(mock_context *ctx);

#endif /* MOCK_CORE_PRIVATE_H */
