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

/* ================================================================ diagnostics */
/* The timing model, the profiler, the dump writer, the device log and the race
 * sanitizer (mock README "Timing model", "Profiling", "Dump", "Device log", "Race
 * sanitizer"). Their environment switches are read once, at the first aclInit (or the
 * first of these calls). */

/* --------------------------------------------------------------- timing model */

typedef enum aclmockTimingMode {
    ACLMOCK_TIMING_REAL = 0,    /* ASCEND_MOCK_TIMING=real (default): tasks take host time */
    ACLMOCK_TIMING_VIRTUAL = 1, /* modeled timestamps, no waiting                         */
    ACLMOCK_TIMING_PACED = 2    /* modeled schedule, workers sleep so wall time follows it */
} aclmockTimingMode;

/* The numbers of the model in effect (the SoC's, with ASCEND_MOCK_TIMING_MODEL
 * overrides). Bandwidths in GB/s (10^9 bytes/s), times in ns. */
typedef struct aclmockTimingModel {
    double h2dGBps;      /* pinned host -> device (PCIe)                 */
    double d2hGBps;      /* device -> pinned host (PCIe)                 */
    double pageableGBps; /* PCIe with pageable host memory (staged)      */
    double hbmGBps;      /* device memory (memset; a D2D copy moves bytes twice) */
    double peerGBps;     /* device -> device link                       */
    double hostGBps;     /* host -> host                                 */
    uint64_t latencyNs;  /* fixed cost of each copy, memset, kernel      */
    uint64_t kernelNs;   /* kernel without a declared cost               */
    uint64_t launchNs;   /* host time of an asynchronous call            */
    uint64_t syncNs;     /* host time of a synchronization that waited   */
    uint64_t mallocNs;   /* host time of an allocation                   */
    uint64_t freeNs;     /* host time of a free                          */
    uint32_t computeLanes; /* kernels running at once on one device      */
    double pace;         /* paced mode: wall time = pace x modeled time  */
} aclmockTimingModel;

ACLMOCK_API aclmockTimingMode aclmockTimingGetMode(void);
/* ACL_ERROR_INVALID_PARAM for NULL. */
ACLMOCK_API aclError aclmockTimingGetModel(aclmockTimingModel *model);
/* The calling thread's time in ns: modeled (virtual/paced; it advances with the
 * thread's modeled calls and synchronizations) or the host clock since the mock's
 * epoch (real). */
ACLMOCK_API uint64_t aclmockTimingNow(void);
/* Modeled end (ns) of everything submitted to `stream` so far (NULL: the current
 * context's default stream); 0 in real mode or before any task. */
ACLMOCK_API aclError aclmockTimingStreamEnd(aclrtStream stream, uint64_t *endNs);

/* ------------------------------------------------------- modeled operators */

/* ACLMOCK_ACCESS_READ / _WRITE / _READ_WRITE: acl/acl_mock_kernel.h */

/* One argument of an operator: a range of device (or pinned host / managed)
 * memory, how the operator uses it, and optionally its tensor type for dumps. */
typedef struct aclmockOpArg {
    void *ptr;
    size_t size;         /* bytes */
    uint32_t access;     /* ACLMOCK_ACCESS_* */
    int32_t dtype;       /* aclDataType, ACL_DT_UNDEFINED (-1) = raw bytes */
    uint32_t ndim;       /* 0..8; 0 = one dimension of size / itemsize */
    int64_t dims[8];
} aclmockOpArg;

/* The host twin of an operator: runs on the stream's worker when the task runs; a
 * nonzero result fails the task (its stream reports it). */
typedef aclError (*aclmockOpFunc)(void *userData);

typedef struct aclmockOpDesc {
    const char *name;        /* 1..63 characters: the kernel name (dump, profile) */
    uint64_t costNs;         /* modeled duration; 0 = the model's kernelNs        */
    const aclmockOpArg *args;
    uint32_t numArgs;        /* <= 64 */
    aclmockOpFunc func;      /* may be NULL: the operator only takes time */
    void *userData;
} aclmockOpDesc;

/* Queues a compute task ("kernel") on `stream` (NULL: the default stream): the
 * timing model gives it costNs on a compute lane, the profiler, the dump writer and
 * the op-info subscriptions see it under `name`, and the race sanitizer checks its
 * arguments with their access modes, exactly like a kernel launch (aclrtLaunchKernel*),
 * without a binary: the way to model a computation from a script. Errors: ACL_ERROR_INVALID_PARAM (100000) for a bad
 * description, ACL_ERROR_RT_PARAM_INVALID (107000) for an argument that is not
 * inside one live allocation, and the usual stream errors. */
ACLMOCK_API aclError aclmockLaunchOp(const aclmockOpDesc *desc, aclrtStream stream);

/* ------------------------------------------------------------------- profiler */

#define ACLMOCK_PROF_ALL_DEVICES (~(uint64_t)0)

/* Starts a collection writing into `outputDir` (created): the tasks of the devices
 * in deviceMask (bit i = device i) and the host events (markers, ranges, steps,
 * synchronous calls). dataTypeConfig takes the ACL_PROF_* flags (0 = everything).
 * ACL_ERROR_PROF_ALREADY_RUN (100042) while one runs. */
ACLMOCK_API aclError aclmockProfStart(const char *outputDir, uint64_t deviceMask, uint64_t dataTypeConfig);
/* Changes the devices of the running collection (ACL_ERROR_PROF_NOT_RUN if none). */
ACLMOCK_API aclError aclmockProfSetDevices(uint64_t deviceMask);
/* Stops it and writes the profile into a new folder "<outputDir>/mock_prof_<pid>_<n>"
 * (trace.json, summary.json, kind_summary.csv, stream_summary.csv); the folder's path
 * goes into outPath (may be NULL). ACL_ERROR_PROF_NOT_RUN (100043) if none runs,
 * ACL_ERROR_PROFILING_FAILURE (500005) if the files cannot be written. */
ACLMOCK_API aclError aclmockProfStop(char *outPath, size_t len);
/* 0 = nothing, 1 = collecting, 2 = waiting for ASCEND_PROFILER_START_STEP. */
ACLMOCK_API int aclmockProfIsActive(void);
/* The folder of the last profile written (snprintf-style return). */
ACLMOCK_API int aclmockProfLastOutput(char *buf, size_t len);
/* A step boundary: returns the new step number (steps count from 0). Also passed by
 * aclprofGetStepTimestamp(..., ACL_STEP_END, ...). The window of
 * ASCEND_PROFILER_START_STEP/STOP_STEP and the dump's dump_step use it. */
ACLMOCK_API uint64_t aclmockProfStep(void);
ACLMOCK_API uint64_t aclmockProfGetStep(void);
/* A marker: on the host track (onStream 0) or as a task queued on `stream`. */
ACLMOCK_API aclError aclmockProfMark(const char *message, aclrtStream stream, int onStream);
/* Named ranges: push/pop nest on the calling thread; start/stop may cross threads. */
ACLMOCK_API aclError aclmockProfRangePush(const char *name);
ACLMOCK_API aclError aclmockProfRangePop(void);
ACLMOCK_API aclError aclmockProfRangeStart(const char *name, uint64_t *rangeId);
ACLMOCK_API aclError aclmockProfRangeStop(uint64_t rangeId);

/* Op-info subscriptions (aclprofModelSubscribe): while subscribed, every operator
 * task (aclmockLaunchOp, kernels) writes one aclmockOpRecord into the pipe `fd`;
 * unsubscribing flushes and closes it. ACL_ERROR_PROF_REPEAT_SUBSCRIBE (148046) for
 * a model already subscribed. */
#define ACLMOCK_OP_RECORD_MAGIC 0x3149504fu /* "OPI1" */
typedef struct aclmockOpRecord {
    uint32_t magic;
    uint32_t modelId;
    uint64_t startUs, endUs, durationUs; /* modeled or host time, in microseconds */
    uint32_t flag;                       /* aclprofSubscribeOpFlag (ACL_SUBSCRIBE_OP) */
    uint32_t deviceId;
    uint64_t taskId;
    uint32_t streamId;
    uint32_t reserved;
    char opType[64];
    char opName[128];
    char threadId[32];
} aclmockOpRecord;
ACLMOCK_API aclError aclmockProfSubscribe(uint32_t modelId, int fd, int timeInfo);
ACLMOCK_API aclError aclmockProfUnsubscribe(uint32_t modelId);

/* --------------------------------------------------------------- device log */

#define ACLMOCK_LOG_ALL (-1)  /* every device and the host, in order */
#define ACLMOCK_LOG_HOST (-2) /* the process (host) part: CANN's plog */

/* The kept entries (at most 1024 per device and for the host; older ones are
 * dropped) of one device's log as text lines in CANN's log format, oldest first
 * (snprintf-style return; -1 for a bad device). Errors, resets, task failures,
 * timeouts, faults and sanitizer reports, with their device and task. */
ACLMOCK_API int aclmockGetDeviceLog(int32_t device, char *buf, size_t len);
ACLMOCK_API uint64_t aclmockGetDeviceLogCount(int32_t device);
ACLMOCK_API void aclmockClearDeviceLog(void);

/* ----------------------------------------------------------- race sanitizer */

#define ACLMOCK_SANITIZER_RACE 1u           /* two tasks on different streams, not ordered */
#define ACLMOCK_SANITIZER_HOST_RACE 2u      /* the host touches memory a pending task uses  */
#define ACLMOCK_SANITIZER_USE_AFTER_FREE 3u /* a task may touch memory that is (being) freed */

typedef struct aclmockSanitizerAccess {
    uint64_t taskId;   /* the task (or host operation) number */
    int32_t device;    /* -1: unknown */
    int32_t streamId;  /* -1: the host */
    aclrtStream stream;
    uint32_t access;   /* ACLMOCK_ACCESS_READ / WRITE bits */
    char name[64];     /* "aclrtMemcpyAsync", an operator name, "aclrtFree", ... */
    char tag[256];     /* aclmockSetNextTaskTag ("file.py:123"), or "" */
} aclmockSanitizerAccess;

typedef struct aclmockSanitizerReport {
    uint32_t kind;     /* ACLMOCK_SANITIZER_* */
    int32_t device;
    uint64_t address;  /* first byte of the conflict */
    uint64_t size;     /* bytes */
    aclmockSanitizerAccess current;  /* the later one, in program order */
    aclmockSanitizerAccess previous; /* the earlier one it is not ordered after */
    char message[1024];
} aclmockSanitizerReport;

/* 0 off, 1 report, 2 fail (the racing task fails with ACL_ERROR_RT_AICORE_EXCEPTION),
 * 3 abort (ASCEND_MOCK_SANITIZE). */
ACLMOCK_API int aclmockSanitizerGetMode(void);
/* Reports so far (all of them; the first 1024 are kept). */
ACLMOCK_API uint64_t aclmockSanitizerGetReportCount(void);
/* Copies kept reports [first, first+max) into out; returns how many. */
ACLMOCK_API size_t aclmockSanitizerGetReports(aclmockSanitizerReport *out, size_t max, size_t first);
ACLMOCK_API void aclmockSanitizerClearReports(void);
/* 1 (default): each kind of report is printed on stderr once; 0: not printed (a binding
 * that reports them itself - pyacl_rt turns them into RaceWarning / RaceError - so that
 * a report is shown once); the device log and the kept list have them either way, and
 * the abort mode prints before aborting. Returns the previous setting. */
ACLMOCK_API int aclmockSanitizerSetStderr(int on);
/* The host is about to read (ACLMOCK_ACCESS_READ) or write [ptr, ptr+size) (a
 * HostBuffer's numpy view, tobytes, copy): checked against the pending tasks.
 * ACL_SUCCESS, or in fail mode ACL_ERROR_RT_AICORE_EXCEPTION when it races. */
ACLMOCK_API aclError aclmockSanitizerHostAccess(const void *ptr, size_t size, uint32_t access);
/* A tag ("file.py:123") for the next task (or host operation) the calling thread
 * submits: shown in sanitizer reports and the profile. NULL/"" clears it. Ignored (and
 * the pending one cleared) while no diagnostic observes tasks. */
ACLMOCK_API aclError aclmockSetNextTaskTag(const char *tag);

/* Sub-allocation regions, like NVTX memory regions: a sub-allocator that hands out
 * blocks of one runtime allocation (pyacl_rt's caching allocator) registers each block
 * it hands out and unregisters it when it takes it back. A kernel pointer argument
 * whose extent nobody declared (acl/acl_mock_kernel.h "Extents") is then observed up
 * to the end of its region instead of the end of its allocation (race sanitizer, dump);
 * copies and memsets keep their exact sizes. [ptr, ptr+size) must lie in one live
 * device allocation (ACL_ERROR_INVALID_PARAM otherwise); a region replaces the
 * regions of the allocation it overlaps; regions go with their allocation.
 * Unregister: ACL_ERROR_INVALID_PARAM when no region starts at ptr. */
ACLMOCK_API aclError aclmockMemRegionRegister(const void *ptr, size_t size);
ACLMOCK_API aclError aclmockMemRegionUnregister(const void *ptr);
/* The extents (bytes from the pointer on; 0 = not given) of the arguments of the next
 * kernel launch of the calling thread, by parameter index (count <= 128): the caller
 * knows the windows it passes (a buffer view's size). Used for pointer parameters
 * whose twin declares no extent, clipped to the allocation. Every launch call uses it
 * up, whatever its outcome. Ignored while no diagnostic observes tasks. */
ACLMOCK_API aclError aclmockSetNextLaunchExtents(const uint64_t *bytes, uint32_t count);

#ifdef __cplusplus
}
#endif

#endif /* ACL_MOCK_H_ */
