/*
 * acl_mock.h - introspection and fault-injection API of mock_libascendcl.
 *
 * These functions exist only in the mock libascendcl.so (never in CANN). Every name
 * starts with "aclmock". A program can detect the mock at run time with
 * dlsym(handle, "aclmockGetStat") != NULL.
 *
 * All functions are thread-safe and may be called before aclInit / after aclFinalize.
 * Device ids are user (visible) device ids, i.e. the ids aclrtSetDevice takes after
 * ASCEND_RT_VISIBLE_DEVICES remapping.
 */
#ifndef ACL_MOCK_H_
#define ACL_MOCK_H_

#include <stddef.h>
#include <stdint.h>

#include "acl/acl.h"
#include "acl/acl_mock_kernel.h"

#ifndef ACLMOCK_API
#define ACLMOCK_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- live counts */

/* Kinds of live objects counted per device. CONTEXTS and STREAMS count everything;
 * the runtime's own part of them (what the program did not create with
 * aclrtCreateContext / aclrtCreateStream*) is DEFAULT_CONTEXTS and DEFAULT_STREAMS, so
 * CONTEXTS - DEFAULT_CONTEXTS are the program's explicit contexts and
 * STREAMS - DEFAULT_STREAMS the streams it created. */
typedef enum aclmockStat {
    ACLMOCK_STAT_CONTEXTS = 0,         /* contexts (default/primary and explicit)           */
    ACLMOCK_STAT_STREAMS = 1,          /* streams, including each context's default stream  */
    ACLMOCK_STAT_EVENTS = 2,           /* events                                            */
    ACLMOCK_STAT_ALLOCATIONS = 3,      /* live device allocations (aclrtMalloc*)            */
    ACLMOCK_STAT_BYTES = 4,            /* bytes of those allocations (after size rounding)  */
    ACLMOCK_STAT_HOST_ALLOCATIONS = 5, /* live aclrtMallocHost* allocations                 */
    ACLMOCK_STAT_HOST_BYTES = 6,       /* bytes of those                                    */
    ACLMOCK_STAT_DEFAULT_CONTEXTS = 7, /* default contexts: one per device aclrtSetDevice
                                          holds (released by aclrtResetDevice)             */
    ACLMOCK_STAT_DEFAULT_STREAMS = 8   /* default streams: one per context (default or
                                          explicit), created and destroyed with it        */
} aclmockStat;

/* Pass as `device` to sum over every device plus the host-side objects. */
#define ACLMOCK_ALL_DEVICES (-1)

/* Current number of live objects of kind `which` on user device `device`
 * (0 .. count-1), or the total over all devices and host-side objects when
 * device == ACLMOCK_ALL_DEVICES (-1). Host allocations are host-side objects:
 * they are counted only in the total. Returns -1 for an unknown `which` or an
 * out-of-range device. */
ACLMOCK_API int64_t aclmockGetStat(int32_t device, aclmockStat which);

/* -------------------------------------------------------------- leak report */

#define ACLMOCK_REPORT_NOW 0           /* objects alive right now                    */
#define ACLMOCK_REPORT_LAST_FINALIZE 1 /* objects that were alive when the last
                                          aclFinalize started (and were then released) */

/* Writes a human-readable report into buf: "no leaks", or one line per device (and one
 * for host-side objects) with its nonzero counts, first what the program created
 * (explicit contexts, created streams, events, allocations, bytes), then the runtime's
 * own default contexts and streams, e.g.
 *   mock_libascendcl leak report: device 1: 1 stream (plus the runtime's own: 1 default
 *   context, 1 default stream)
 *   mock_libascendcl leak report: device 0: only the runtime's own: 1 default context, ...
 * (NUL-terminated, truncated to len-1 characters; buf may be NULL when len is 0). Returns the number of characters the full report needs
 * (excluding the NUL), like snprintf, or -1 for an unknown `when`.
 * With ASCEND_MOCK_LEAK_REPORT=1 the LAST_FINALIZE report is also printed on stderr
 * by aclFinalize when it is not empty. */
ACLMOCK_API int aclmockGetLeakReport(char *buf, size_t len, int when);

/* ----------------------------------------------------------- fault injection */

/* Make the nth call (counted from now, 1 = the next call) of the public function
 * `func` (e.g. "aclrtMalloc") fail with `code` (nonzero). nth == 0 makes every call
 * fail until aclmockClearFaults. The failing call records its error like any real
 * failure (aclrtGetLastError, aclGetRecentErrMsg) and has no other effect.
 * Up to 64 faults can be armed at once; arming the same function again replaces its
 * fault. Returns ACL_SUCCESS, or ACL_ERROR_INVALID_PARAM for a NULL/empty/too long
 * name, code == 0, or a full table. Equivalent to ASCEND_MOCK_FAULTS=func:nth:code. */
ACLMOCK_API aclError aclmockInjectFault(const char *func, uint32_t nth, aclError code);

/* Disarm every fault (including those from ASCEND_MOCK_FAULTS). */
ACLMOCK_API void aclmockClearFaults(void);

/* How many times an armed fault of `func` has fired so far (0 if none is armed). */
ACLMOCK_API uint32_t aclmockGetFaultHits(const char *func);

/* ---------------------------------------------------------------- device lost */

/* Mark user device `device` as lost: from now on every call on that device (set,
 * reset, context/stream/event/memory operations on it, synchronize, device queries)
 * fails with the sticky `code` (e.g. ACL_ERROR_RT_LOST_HEARTBEAT 507010), like a card
 * that fell off the bus. aclrtQueryDeviceStatus still answers, with
 * ACL_RT_DEVICE_STATUS_ABNORMAL, and the thread-state queries aclrtGetDevice /
 * aclrtGetCurrentContext still answer. aclrtResetDevice/aclrtResetDeviceForce release the
 * device's resources but still return the sticky code. code == 0 revives the device
 * (test convenience; a real card needs a reboot).
 * Returns ACL_SUCCESS or ACL_ERROR_RT_INVALID_DEVICEID for a bad id.
 * Equivalent to ASCEND_MOCK_DEVICE_LOST=dev:code. */
ACLMOCK_API aclError aclmockSetDeviceLost(int32_t device, aclError code);

/* The sticky code of a lost device, 0 if the device is fine or the id is invalid. */
ACLMOCK_API aclError aclmockGetDeviceLost(int32_t device);

/* ------------------------------------------------------------- error recording */

/* Record a failure of `func` on the calling thread exactly as the mock's own entry
 * points do: sets the thread's last error (aclrtGetLastError/PeekAtLastError) to
 * `code` and its recent message (aclGetRecentErrMsg) to "<func>: <formatted text>".
 * Returns `code`. Used by the generated "not supported" entry points and by the mock's
 * libmsprofiler.so / libascend_dump.so. `fmt` may be NULL (no text after the name). */
ACLMOCK_API aclError aclmockSetError(const char *func, aclError code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------- configuration */

typedef enum aclmockConfigKey {
    ACLMOCK_CONFIG_PHYSICAL_DEVICE_COUNT = 0, /* ASCEND_MOCK_DEVICE_COUNT (after fallback)  */
    ACLMOCK_CONFIG_VISIBLE_DEVICE_COUNT = 1,  /* after ASCEND_RT_VISIBLE_DEVICES (0 if invalid) */
    ACLMOCK_CONFIG_MEM_PER_DEVICE = 2,        /* bytes                                      */
    ACLMOCK_CONFIG_ISOLATION = 3,             /* 0/1                                        */
    ACLMOCK_CONFIG_LEAK_REPORT = 4,           /* 0/1                                        */
    ACLMOCK_CONFIG_VISIBLE_INVALID = 5        /* 1 if ASCEND_RT_VISIBLE_DEVICES was rejected */
} aclmockConfigKey;

/* The effective value of a configuration item (environment read once, at first use),
 * or -1 for an unknown key. */
ACLMOCK_API int64_t aclmockGetConfig(aclmockConfigKey key);

/* The effective ASCEND_MOCK_SOC_NAME / ASCEND_MOCK_CANN_VERSION (static strings). */
ACLMOCK_API const char *aclmockGetSocName(void);
ACLMOCK_API const char *aclmockGetCannVersion(void);

/* Physical device id behind user device `device`, or -1 for a bad id. */
ACLMOCK_API int32_t aclmockGetPhysicalDevice(int32_t device);

/* ------------------------------------------------------------------ dump bridge */

/* The dump directory configured (aclmdlSetDump or the "dump" section of the aclInit
 * config) for an acldumpType value, or NULL when that kind of dump is not enabled.
 * Used by the mock libascend_dump.so (acldumpGetPath); the string stays valid until
 * the next aclmdlSetDump/aclmdlFinalizeDump. Implemented in src/dump.c. */
ACLMOCK_API const char *aclmockDumpGetPath(int32_t dumpType);

/* ------------------------------------------------------------ kernel twins */

/* Registers a host twin for the kernel `name` (see acl/acl_mock_kernel.h): from now on a
 * kernel of that name in a device binary (an ELF for another machine, such as an Ascend
 * C `.o`, loaded with aclrtBinaryLoadFromFile/FromData or aclrtBinaryLoad) runs `fn`, once
 * per block, with `userData`. `flags` are ACLMOCK_KERNEL_* (block independence, kernel
 * type); the parameters are not described (ACLMOCK_PARAMS_UNKNOWN). The signature takes
 * plain pointers and integers so that a foreign-function callback (Python cffi/ctypes)
 * can be registered. The name is copied. Returns ACL_SUCCESS,
 * ACL_ERROR_INVALID_PARAM (100000) for a NULL/empty/too long (> 255 bytes) name, a NULL
 * fn or undefined flag bits, or ACL_ERROR_RT_KERNEL_DUPLICATE (507028) when a twin of
 * that name is registered already (unregister it first). Errors are recorded like those
 * of the ACL entry points (aclGetRecentErrMsg). Usable before aclInit. */
ACLMOCK_API aclError aclmockRegisterKernel(const char *name, aclmockKernelFn fn, void *userData, uint32_t flags);

/* The same with a full descriptor (parameters with their sizes and access modes, cost;
 * acl/acl_mock_kernel.h). The descriptor, its name and its parameter array are copied.
 * Also ACL_ERROR_INVALID_PARAM for a wrong version, numParams > 128 (other than
 * ACLMOCK_PARAMS_UNKNOWN), a NULL params with numParams > 0, a parameter of size 0 or
 * with an access mode outside ACLMOCK_ACCESS_*, a pointer parameter whose size is not 8,
 * or reserved fields that are not 0. */
ACLMOCK_API aclError aclmockRegisterKernelDesc(const aclmockKernelDesc *desc);

/* Removes the twin registered under `name`. Launches already queued keep the twin they
 * resolved; later launches of that name fail (no twin). ACL_ERROR_INVALID_PARAM when no
 * twin of that name is registered. */
ACLMOCK_API aclError aclmockUnregisterKernel(const char *name);

/* 1 when a twin is registered under `name`, else 0. */
ACLMOCK_API int32_t aclmockKernelIsRegistered(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* ACL_MOCK_H_ */
