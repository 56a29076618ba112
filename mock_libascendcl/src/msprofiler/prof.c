/*
 * prof.c - libmsprofiler.so: aclprof* profiling control, msproftx and the op-info
 * subscriptions.
 *
 * Collection happens in libascendcl.so (src/diag, mock README "Profiling"): this
 * library keeps the aclprof state machine and drives that collection through the
 * exported aclmockProf* calls (it cannot call the hidden functions of
 * libascendcl.so):
 *   aclprofInit twice                       -> ACL_ERROR_REPEAT_INITIALIZE (100002)
 *   aclprofInit while another collection runs (ASCEND_PROFILER_FLAGS, aclmockProfStart)
 *                                           -> ACL_ERROR_PROF_ALREADY_RUN (100042)
 *   aclprofInit/Start/Stop/Finalize while a model is subscribed, or
 *   aclprofModelSubscribe between Init and Finalize
 *                                           -> ACL_ERROR_PROF_API_CONFLICT (148047)
 *   aclprofStart/Stop/Finalize before Init  -> ACL_ERROR_PROF_NOT_RUN (100043)
 *   aclprofStart of a device already being profiled
 *                                           -> ACL_ERROR_PROF_ALREADY_RUN (100042)
 *   aclprofStop of devices not being profiled -> ACL_ERROR_PROF_NOT_RUN (100043)
 *   aclprofModelSubscribe of a subscribed model -> ACL_ERROR_PROF_REPEAT_SUBSCRIBE (148046)
 *   bad path / length / config              -> ACL_ERROR_INVALID_PARAM (100000)
 * The first aclprofStart starts the collection (into the aclprofInit directory, for
 * the devices of every running config), the last aclprofStop writes it (one profile
 * folder per Start..Stop period), aclprofFinalize stops whatever still runs. Errors
 * are recorded on the calling thread through libascendcl.so's aclmockSetError, so
 * aclGetRecentErrMsg / aclrtGetLastError see them like any runtime error. Streams are
 * validated through the public aclrtStreamGetId.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_prof.h"
#include "core/core.h" /* the handle registry (static inline) */

#define PROF_PATH_MAX 4096u
#define PROF_MSG_MAX 128u
#define PROF_MAX_DEVICES 64u
#define PROF_STACK_MAX 1024u

/* all known dataTypeConfig bits */
#define PROF_KNOWN_TYPES                                                                                  \
    (ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_AICORE_METRICS | ACL_PROF_AICPU | ACL_PROF_L2CACHE | \
     ACL_PROF_HCCL_TRACE | ACL_PROF_TRAINING_TRACE | ACL_PROF_MSPROFTX | ACL_PROF_RUNTIME_API |           \
     ACL_PROF_GE_API_L0 | ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_MEMORY | ACL_PROF_GE_API_L1 |              \
     ACL_PROF_TASK_TIME_L2 | ACL_PROF_OP_ATTR | ACL_PROF_TASK_TIME_L3 | ACL_PROF_API_STATS |               \
     ACL_PROF_AICORE_SHAPE)

#define PROF_CONFIG_MAGIC 0x70726f66436667ULL
#define PROF_SUBCFG_MAGIC 0x70726f6653756243ULL
#define PROF_STEP_MAGIC 0x70726f6653746570ULL
#define PROF_STAMP_MAGIC 0x70726f665374616dULL

/* The profiler's clock: modeled time under the timing model, else the host clock
 * (libascendcl.so's aclmockTimingNow), so step timestamps match the profile. */
static inline uint64_t now_ns(void)
{
    return aclmockTimingNow();
}

/* ================================================================ state */

struct aclprofConfig {
    uint64_t magic;
    uint64_t devices; /* bitmap of device ids */
    bool host_only;   /* deviceNums == 0 */
    aclprofAicoreMetrics metrics;
    uint64_t data_types;
};

struct aclprofStepInfo {
    uint64_t magic;
    uint64_t start_ns;
    uint64_t end_ns;
};

typedef struct prof_stamp {
    uint64_t magic;
    uint32_t msg_len;
    char msg[PROF_MSG_MAX + 1];
} prof_stamp;

struct aclprofSubscribeConfig {
    uint64_t magic;
    bool time_info;
    aclprofAicoreMetrics metrics;
    int fd;
};

typedef struct prof_session {
    uint64_t devices;
    uint64_t flags;
    bool host_only;
    struct prof_session *next;
} prof_session;

typedef struct prof_range {
    uint32_t id;
    uint64_t diag_id; /* the collection's range (aclmockProfRangeStart) */
    struct prof_range *next;
} prof_range;

static mock_mutex g_mu = MOCK_MUTEX_INIT(MOCK_LOCK_PROF);
static bool g_inited = false;
static char g_path[PROF_PATH_MAX + 1];
static prof_session *g_sessions = NULL;
static prof_range *g_ranges = NULL;
static uint32_t g_next_range = 1;
static char *g_settings[ACL_PROF_ARGS_MAX]; /* aclprofSetConfig values */
static uint32_t g_nsubscribed;             /* models subscribed (aclprofModelSubscribe) */

static mock_handle_set g_configs = MOCK_HANDLE_SET_INIT(MOCK_LOCK_PROF_CONFIGS);
static mock_handle_set g_steps = MOCK_HANDLE_SET_INIT(MOCK_LOCK_PROF_STEPS);
static mock_handle_set g_stamps = MOCK_HANDLE_SET_INIT(MOCK_LOCK_PROF_STAMPS);
static mock_handle_set g_subcfgs = MOCK_HANDLE_SET_INIT(MOCK_LOCK_PROF_SUBSCRIBE);

/* msproftx push/pop and range push/pop stacks are per thread */
static _Thread_local uint32_t tls_push_depth = 0;
static _Thread_local uint32_t tls_range_depth = 0;

static void free_sessions_locked(void)
{
    while (g_sessions != NULL) {
        prof_session *n = g_sessions->next;
        free(g_sessions);
        g_sessions = n;
    }
}

/* The devices and data types of every running config (g_mu held). */
static uint64_t sessions_mask_locked(uint64_t *flags)
{
    uint64_t mask = 0;
    *flags = 0;
    for (const prof_session *o = g_sessions; o != NULL; o = o->next) {
        mask |= o->devices;
        *flags |= o->flags;
    }
    return mask;
}

/* Tells libascendcl.so's collection which devices the running configs cover. */
static void sync_devices(void)
{
    uint64_t flags;
    core_mutex_lock(&g_mu);
    uint64_t mask = sessions_mask_locked(&flags);
    bool any = g_sessions != NULL;
    core_mutex_unlock(&g_mu);
    if (any) {
        (void)aclmockProfSetDevices(mask);
    }
}

/* Checks a stream handle through the public API; records the error under `fn`. */
static aclError check_stream(const char *fn, aclrtStream stream)
{
    int32_t id = 0;
    aclError rc = aclrtStreamGetId(stream, &id);
    if (rc != ACL_SUCCESS) {
        return aclmockSetError(fn, rc, "argument 'stream' (%p) is not usable (error %d)", stream, (int)rc);
    }
    return ACL_SUCCESS;
}

/* mkdir -p; 0 or an errno */
static int make_dirs(const char *path)
{
    char buf[PROF_PATH_MAX + 1];
    snprintf(buf, sizeof buf, "%s", path);
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/') {
        buf[--len] = '\0';
    }
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0750) != 0 && errno != EEXIST) {
                return errno;
            }
            *p = '/';
        }
    }
    if (mkdir(buf, 0750) != 0 && errno != EEXIST) {
        return errno;
    }
    struct stat st;
    if (stat(buf, &st) != 0) {
        return errno;
    }
    if (!S_ISDIR(st.st_mode)) {
        return ENOTDIR;
    }
    if (access(buf, W_OK) != 0) {
        return errno;
    }
    return 0;
}

/* ======================================================= init / finalize */

aclError aclprofInit(const char *profilerResultPath, size_t length)
{
    static const char fn[] = "aclprofInit";
    if (profilerResultPath == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'profilerResultPath' is NULL");
    }
    if (length == 0 || length > PROF_PATH_MAX) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'length' (%zu) must be in 1..%u", length,
                               PROF_PATH_MAX);
    }
    size_t n = strnlen(profilerResultPath, length);
    if (n == 0) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'profilerResultPath' is an empty string");
    }
    char path[PROF_PATH_MAX + 1];
    memcpy(path, profilerResultPath, n);
    path[n] = '\0';
    if (aclmockProfIsActive() != 0) {
        return aclmockSetError(fn, ACL_ERROR_PROF_ALREADY_RUN,
                               "another profiling method is active (ASCEND_PROFILER_FLAGS or aclmockProfStart)");
    }
    core_mutex_lock(&g_mu);
    bool again = g_inited;
    bool conflict = !again && g_nsubscribed > 0;
    int err = again || conflict ? 0 : make_dirs(path);
    if (!again && !conflict && err == 0) {
        memcpy(g_path, path, n + 1);
        g_inited = true;
    }
    core_mutex_unlock(&g_mu);
    if (again) {
        return aclmockSetError(fn, ACL_ERROR_REPEAT_INITIALIZE, "profiling is already initialized");
    }
    if (conflict) {
        return aclmockSetError(fn, ACL_ERROR_PROF_API_CONFLICT,
                               "a model is subscribed (aclprofModelSubscribe): unsubscribe before aclprofInit");
    }
    if (err != 0) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM,
                               "argument 'profilerResultPath' \"%s\" is not a usable directory: %s", path, strerror(err));
    }
    return ACL_SUCCESS;
}

aclError aclprofFinalize(void)
{
    static const char fn[] = "aclprofFinalize";
    core_mutex_lock(&g_mu);
    if (!g_inited) {
        core_mutex_unlock(&g_mu);
        return aclmockSetError(fn, ACL_ERROR_PROF_NOT_RUN, "aclprofInit has not been called");
    }
    bool collecting = g_sessions != NULL;
    free_sessions_locked(); /* running collections are stopped */
    while (g_ranges != NULL) {
        prof_range *r = g_ranges->next;
        free(g_ranges);
        g_ranges = r;
    }
    for (size_t i = 0; i < ACL_PROF_ARGS_MAX; i++) {
        free(g_settings[i]);
        g_settings[i] = NULL;
    }
    g_path[0] = '\0';
    g_inited = false;
    core_mutex_unlock(&g_mu);
    if (collecting) {
        (void)aclmockProfStop(NULL, 0); /* the profile is written */
    }
    return ACL_SUCCESS;
}

aclError aclprofSetConfig(aclprofConfigType configType, const char *config, size_t configLength)
{
    static const char fn[] = "aclprofSetConfig";
    int t = (int)configType;
    if (t <= ACL_PROF_ARGS_MIN || t >= ACL_PROF_ARGS_MAX || t == 2) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'configType' (%d) is not an aclprofConfigType",
                               t);
    }
    if (config == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'config' is NULL");
    }
    if (configLength == 0 || configLength > PROF_PATH_MAX) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'configLength' (%zu) must be in 1..%u",
                               configLength, PROF_PATH_MAX);
    }
    size_t n = strnlen(config, configLength);
    if (n == 0) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'config' is an empty string");
    }
    char *copy = (char *)malloc(n + 1);
    if (copy == NULL) {
        return aclmockSetError(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    memcpy(copy, config, n);
    copy[n] = '\0';
    core_mutex_lock(&g_mu);
    free(g_settings[t]);
    g_settings[t] = copy;
    core_mutex_unlock(&g_mu);
    return ACL_SUCCESS;
}

/* ================================================================ config */

aclprofConfig *aclprofCreateConfig(uint32_t *deviceIdList, uint32_t deviceNums, aclprofAicoreMetrics aicoreMetrics,
                                   const aclprofAicoreEvents *aicoreEvents, uint64_t dataTypeConfig)
{
    static const char fn[] = "aclprofCreateConfig";
    if (deviceNums > 0 && deviceIdList == NULL) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'deviceIdList' is NULL but deviceNums is %u",
                              deviceNums);
        return NULL;
    }
    if (deviceNums > PROF_MAX_DEVICES) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'deviceNums' (%u) exceeds %u", deviceNums,
                              PROF_MAX_DEVICES);
        return NULL;
    }
    int m = (int)aicoreMetrics;
    if ((m < ACL_AICORE_ARITHMETIC_UTILIZATION || m > ACL_AICORE_MEMORY_ACCESS) && m != ACL_AICORE_NONE) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'aicoreMetrics' (%d) is not an aclprofAicoreMetrics",
                              m);
        return NULL;
    }
    if (aicoreEvents != NULL) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'aicoreEvents' is reserved and must be NULL");
        return NULL;
    }
    if ((dataTypeConfig & ~(uint64_t)PROF_KNOWN_TYPES) != 0) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM,
                              "argument 'dataTypeConfig' (0x%llx) has unknown bits 0x%llx",
                              (unsigned long long)dataTypeConfig,
                              (unsigned long long)(dataTypeConfig & ~(uint64_t)PROF_KNOWN_TYPES));
        return NULL;
    }
    uint64_t bitmap = 0;
    if (deviceNums > 0) {
        uint32_t count = 0;
        aclError rc = aclrtGetDeviceCount(&count);
        if (rc != ACL_SUCCESS) {
            (void)aclmockSetError(fn, rc, "cannot query the device count (error %d)", (int)rc);
            return NULL;
        }
        for (uint32_t i = 0; i < deviceNums; i++) {
            uint32_t d = deviceIdList[i];
            if (d >= count || d >= PROF_MAX_DEVICES) {
                (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM,
                                      "argument 'deviceIdList[%u]' (%u) is not a valid device id (device count %u)", i,
                                      d, count);
                return NULL;
            }
            if (bitmap & (1ull << d)) {
                (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'deviceIdList' lists device %u twice", d);
                return NULL;
            }
            bitmap |= 1ull << d;
        }
    }
    struct aclprofConfig *c = (struct aclprofConfig *)calloc(1, sizeof *c);
    if (c == NULL) {
        (void)aclmockSetError(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    c->magic = PROF_CONFIG_MAGIC;
    c->devices = bitmap;
    c->host_only = deviceNums == 0;
    c->metrics = aicoreMetrics;
    c->data_types = dataTypeConfig;
    if (!core_handle_set_add(&g_configs, c)) {
        free(c);
        (void)aclmockSetError(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    return c;
}

aclError aclprofDestroyConfig(const aclprofConfig *profilerConfig)
{
    static const char fn[] = "aclprofDestroyConfig";
    if (profilerConfig == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'profilerConfig' is NULL");
    }
    if (!core_handle_set_remove(&g_configs, profilerConfig)) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM,
                               "argument 'profilerConfig' (%p) is not a live aclprofConfig", (const void *)profilerConfig);
    }
    struct aclprofConfig *c = (struct aclprofConfig *)(uintptr_t)profilerConfig;
    c->magic = 0;
    free(c);
    return ACL_SUCCESS;
}

/* Copies a live config (false + error otherwise). */
static bool read_config(const char *fn, const aclprofConfig *cfg, struct aclprofConfig *out)
{
    if (cfg == NULL) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'profilerConfig' is NULL");
        return false;
    }
    core_handle_set_lock(&g_configs);
    bool live = core_handle_set_contains_locked(&g_configs, cfg);
    if (live) {
        *out = *cfg;
    }
    core_handle_set_unlock(&g_configs);
    if (!live) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'profilerConfig' (%p) is not a live aclprofConfig",
                              (const void *)cfg);
    }
    return live;
}

aclError aclprofStart(const aclprofConfig *profilerConfig)
{
    static const char fn[] = "aclprofStart";
    struct aclprofConfig c;
    if (!read_config(fn, profilerConfig, &c)) {
        return ACL_ERROR_INVALID_PARAM;
    }
    prof_session *s = (prof_session *)calloc(1, sizeof *s);
    if (s == NULL) {
        return aclmockSetError(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    core_mutex_lock(&g_mu);
    bool inited = g_inited;
    uint64_t clash = 0;
    bool host_clash = false;
    for (const prof_session *o = inited ? g_sessions : NULL; o != NULL && clash == 0 && !host_clash; o = o->next) {
        clash = o->devices & c.devices;
        host_clash = o->host_only && c.host_only;
    }
    bool started = inited && clash == 0 && !host_clash;
    bool first = started && g_sessions == NULL;
    char path[PROF_PATH_MAX + 1] = "";
    if (started) {
        s->devices = c.devices;
        s->flags = c.data_types;
        s->host_only = c.host_only;
        s->next = g_sessions;
        g_sessions = s;
        memcpy(path, g_path, sizeof path);
    }
    core_mutex_unlock(&g_mu);
    if (first) {
        /* the first running config starts libascendcl.so's collection */
        aclError rc = aclmockProfStart(path, c.devices, c.data_types);
        if (rc != ACL_SUCCESS) {
            core_mutex_lock(&g_mu);
            prof_session **pp = &g_sessions;
            while (*pp != NULL && *pp != s) {
                pp = &(*pp)->next;
            }
            if (*pp == s) {
                *pp = s->next;
            }
            core_mutex_unlock(&g_mu);
            free(s);
            return aclmockSetError(fn, rc, "cannot start the collection (error %d): another profiling method is "
                                   "active", (int)rc);
        }
    }
    if (started) {
        sync_devices();
        return ACL_SUCCESS;
    }
    free(s);
    if (!inited) {
        return aclmockSetError(fn, ACL_ERROR_PROF_NOT_RUN, "aclprofInit has not been called");
    }
    if (clash != 0) {
        return aclmockSetError(fn, ACL_ERROR_PROF_ALREADY_RUN, "device %d is already being profiled",
                               __builtin_ctzll(clash));
    }
    return aclmockSetError(fn, ACL_ERROR_PROF_ALREADY_RUN, "host profiling is already running");
}

aclError aclprofStop(const aclprofConfig *profilerConfig)
{
    static const char fn[] = "aclprofStop";
    struct aclprofConfig c;
    if (!read_config(fn, profilerConfig, &c)) {
        return ACL_ERROR_INVALID_PARAM;
    }
    core_mutex_lock(&g_mu);
    bool inited = g_inited;
    prof_session *s = NULL;
    if (inited) {
        prof_session **pp = &g_sessions;
        while (*pp != NULL && !((*pp)->devices == c.devices && (*pp)->host_only == c.host_only)) {
            pp = &(*pp)->next;
        }
        s = *pp;
        if (s != NULL) {
            *pp = s->next;
        }
    }
    core_mutex_unlock(&g_mu);
    if (!inited) {
        return aclmockSetError(fn, ACL_ERROR_PROF_NOT_RUN, "aclprofInit has not been called");
    }
    if (s == NULL) {
        return aclmockSetError(fn, ACL_ERROR_PROF_NOT_RUN,
                               "no profiling was started with these devices (call aclprofStart first)");
    }
    free(s);
    core_mutex_lock(&g_mu);
    bool last = g_sessions == NULL;
    core_mutex_unlock(&g_mu);
    if (last) { /* the last running config: the profile is written */
        aclError rc = aclmockProfStop(NULL, 0);
        if (rc != ACL_SUCCESS && rc != ACL_ERROR_PROF_NOT_RUN) {
            return aclmockSetError(fn, rc, "the profile could not be written (error %d)", (int)rc);
        }
    } else {
        sync_devices();
    }
    return ACL_SUCCESS;
}

/* ============================================================= step info */

aclprofStepInfo *aclprofCreateStepInfo(void)
{
    struct aclprofStepInfo *si = (struct aclprofStepInfo *)calloc(1, sizeof *si);
    if (si == NULL) {
        (void)aclmockSetError("aclprofCreateStepInfo", ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    si->magic = PROF_STEP_MAGIC;
    if (!core_handle_set_add(&g_steps, si)) {
        free(si);
        (void)aclmockSetError("aclprofCreateStepInfo", ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    return si;
}

void aclprofDestroyStepInfo(aclprofStepInfo *stepinfo)
{
    static const char fn[] = "aclprofDestroyStepInfo";
    if (stepinfo == NULL) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stepinfo' is NULL");
        return;
    }
    if (!core_handle_set_remove(&g_steps, stepinfo)) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stepinfo' (%p) is not a live aclprofStepInfo",
                              (void *)stepinfo);
        return;
    }
    stepinfo->magic = 0;
    free(stepinfo);
}

aclError aclprofGetStepTimestamp(aclprofStepInfo *stepInfo, aclprofStepTag tag, aclrtStream stream)
{
    static const char fn[] = "aclprofGetStepTimestamp";
    if (stepInfo == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stepInfo' is NULL");
    }
    if ((int)tag != ACL_STEP_START && (int)tag != ACL_STEP_END) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'tag' (%d) must be ACL_STEP_START or ACL_STEP_END",
                               (int)tag);
    }
    aclError rc = check_stream(fn, stream);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    uint64_t now = now_ns();
    core_handle_set_lock(&g_steps);
    bool live = core_handle_set_contains_locked(&g_steps, stepInfo);
    if (live) {
        if ((int)tag == ACL_STEP_START) {
            stepInfo->start_ns = now;
        } else {
            stepInfo->end_ns = now;
        }
    }
    core_handle_set_unlock(&g_steps);
    if (!live) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stepInfo' (%p) is not a live aclprofStepInfo",
                               (void *)stepInfo);
    }
    /* the end of a step is a step boundary of the collection (and of dump_step) */
    if ((int)tag == ACL_STEP_END) {
        (void)aclmockProfStep();
    } else {
        (void)aclmockProfMark("step start", NULL, 0);
    }
    return ACL_SUCCESS;
}

/* ============================================================== msproftx */

void *aclprofCreateStamp(void)
{
    prof_stamp *st = (prof_stamp *)calloc(1, sizeof *st);
    if (st == NULL) {
        (void)aclmockSetError("aclprofCreateStamp", ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    st->magic = PROF_STAMP_MAGIC;
    if (!core_handle_set_add(&g_stamps, st)) {
        free(st);
        (void)aclmockSetError("aclprofCreateStamp", ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    return st;
}

void aclprofDestroyStamp(void *stamp)
{
    static const char fn[] = "aclprofDestroyStamp";
    if (stamp == NULL) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stamp' is NULL");
        return;
    }
    if (!core_handle_set_remove(&g_stamps, stamp)) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stamp' (%p) is not a live stamp", stamp);
        return;
    }
    ((prof_stamp *)stamp)->magic = 0;
    free(stamp);
}

static aclError check_stamp(const char *fn, void *stamp)
{
    if (stamp == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stamp' is NULL");
    }
    if (!core_handle_set_contains(&g_stamps, stamp)) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM,
                               "argument 'stamp' (%p) is not a live stamp (aclprofCreateStamp)", stamp);
    }
    return ACL_SUCCESS;
}

static aclError check_msg(const char *fn, const char *msg, size_t len)
{
    if (msg == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'msg' is NULL");
    }
    if (len == 0 || len > PROF_MSG_MAX) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'msgLen' (%zu) must be in 1..%u", len,
                               PROF_MSG_MAX);
    }
    return ACL_SUCCESS;
}

aclError aclprofSetStampTraceMessage(void *stamp, const char *msg, uint32_t msgLen)
{
    static const char fn[] = "aclprofSetStampTraceMessage";
    aclError rc = check_msg(fn, msg, msgLen);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (stamp == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stamp' is NULL");
    }
    size_t n = strnlen(msg, msgLen);
    core_handle_set_lock(&g_stamps);
    bool live = core_handle_set_contains_locked(&g_stamps, stamp);
    if (live) {
        prof_stamp *st = (prof_stamp *)stamp;
        memcpy(st->msg, msg, n);
        st->msg[n] = '\0';
        st->msg_len = (uint32_t)n;
    }
    core_handle_set_unlock(&g_stamps);
    if (!live) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stamp' (%p) is not a live stamp", stamp);
    }
    return ACL_SUCCESS;
}

/* The message of a live stamp ("" when none was set); false + error otherwise. */
static bool stamp_message(const char *fn, void *stamp, char *out, size_t len)
{
    if (check_stamp(fn, stamp) != ACL_SUCCESS) {
        return false;
    }
    core_handle_set_lock(&g_stamps);
    bool live = core_handle_set_contains_locked(&g_stamps, stamp);
    if (live) {
        snprintf(out, len, "%s", ((prof_stamp *)stamp)->msg[0] ? ((prof_stamp *)stamp)->msg : "msproftx");
    }
    core_handle_set_unlock(&g_stamps);
    if (!live) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stamp' (%p) is not a live stamp", stamp);
    }
    return live;
}

aclError aclprofMark(void *stamp)
{
    char msg[PROF_MSG_MAX + 1];
    if (!stamp_message("aclprofMark", stamp, msg, sizeof msg)) {
        return ACL_ERROR_INVALID_PARAM;
    }
    return aclmockProfMark(msg, NULL, 0);
}

aclError aclprofMarkEx(const char *msg, size_t msgLen, aclrtStream stream)
{
    static const char fn[] = "aclprofMarkEx";
    aclError rc = check_msg(fn, msg, msgLen);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = check_stream(fn, stream);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    char text[PROF_MSG_MAX + 1];
    size_t n = strnlen(msg, msgLen);
    memcpy(text, msg, n);
    text[n] = '\0';
    /* a marker task on the stream: links the host and the device timelines */
    rc = aclmockProfMark(text, stream, 1);
    return rc != ACL_SUCCESS ? aclmockSetError(fn, rc, "the stream refused the marker (error %d)", (int)rc) : rc;
}

aclError aclprofPush(void *stamp)
{
    static const char fn[] = "aclprofPush";
    char msg[PROF_MSG_MAX + 1];
    if (!stamp_message(fn, stamp, msg, sizeof msg)) {
        return ACL_ERROR_INVALID_PARAM;
    }
    if (tls_push_depth >= PROF_STACK_MAX) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "push depth limit %u reached on this thread",
                               PROF_STACK_MAX);
    }
    aclError rc = aclmockProfRangePush(msg);
    if (rc != ACL_SUCCESS) {
        return aclmockSetError(fn, rc, "cannot open the range (error %d)", (int)rc);
    }
    tls_push_depth++;
    return ACL_SUCCESS;
}

aclError aclprofPop(void)
{
    if (tls_push_depth == 0) {
        return aclmockSetError("aclprofPop", ACL_ERROR_INVALID_PARAM, "no aclprofPush is open on this thread");
    }
    tls_push_depth--;
    return aclmockProfRangePop();
}

aclError aclprofRangeStart(void *stamp, uint32_t *rangeId)
{
    static const char fn[] = "aclprofRangeStart";
    if (rangeId == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'rangeId' is NULL");
    }
    char msg[PROF_MSG_MAX + 1];
    if (!stamp_message(fn, stamp, msg, sizeof msg)) {
        return ACL_ERROR_INVALID_PARAM;
    }
    prof_range *r = (prof_range *)malloc(sizeof *r);
    if (r == NULL) {
        return aclmockSetError(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    aclError rc = aclmockProfRangeStart(msg, &r->diag_id);
    if (rc != ACL_SUCCESS) {
        free(r);
        return aclmockSetError(fn, rc, "cannot open the range (error %d)", (int)rc);
    }
    core_mutex_lock(&g_mu);
    r->id = g_next_range++;
    if (g_next_range == 0) {
        g_next_range = 1;
    }
    r->next = g_ranges;
    g_ranges = r;
    *rangeId = r->id;
    core_mutex_unlock(&g_mu);
    return ACL_SUCCESS;
}

aclError aclprofRangeStop(uint32_t rangeId)
{
    core_mutex_lock(&g_mu);
    prof_range **pp = &g_ranges;
    while (*pp != NULL && (*pp)->id != rangeId) {
        pp = &(*pp)->next;
    }
    prof_range *r = *pp;
    if (r != NULL) {
        *pp = r->next;
    }
    core_mutex_unlock(&g_mu);
    if (r == NULL) {
        return aclmockSetError("aclprofRangeStop", ACL_ERROR_INVALID_PARAM,
                               "argument 'rangeId' (%u) is not an open range (aclprofRangeStart)", rangeId);
    }
    (void)aclmockProfRangeStop(r->diag_id);
    free(r);
    return ACL_SUCCESS;
}

aclError aclprofRangePushEx(aclprofEventAttributes *attr)
{
    static const char fn[] = "aclprofRangePushEx";
    if (attr == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'attr' is NULL");
    }
    if (attr->version != ACL_PROF_EVENT_ATTR_VERSION) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "attr->version (%u) must be ACL_PROF_EVENT_ATTR_VERSION (%d)",
                               (unsigned)attr->version, ACL_PROF_EVENT_ATTR_VERSION);
    }
    if (attr->size != sizeof(aclprofEventAttributes)) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "attr->size (%u) must be sizeof(aclprofEventAttributes) (%zu)",
                               (unsigned)attr->size, sizeof(aclprofEventAttributes));
    }
    if (attr->messageType != ACL_PROF_MESSAGE_TYPE_TENSOR_INFO) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "attr->messageType (%u) is not an aclprofMessageType",
                               attr->messageType);
    }
    if (attr->message.tensorInfo == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "attr->message.tensorInfo is NULL");
    }
    if (tls_range_depth >= PROF_STACK_MAX) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "range depth limit %u reached on this thread",
                               PROF_STACK_MAX);
    }
    char name[64];
    snprintf(name, sizeof name, "op %llx", (unsigned long long)attr->message.tensorInfo->opNameId);
    aclError rc = aclmockProfRangePush(name);
    if (rc != ACL_SUCCESS) {
        return aclmockSetError(fn, rc, "cannot open the range (error %d)", (int)rc);
    }
    tls_range_depth++;
    return ACL_SUCCESS;
}

aclError aclprofRangePop(void)
{
    if (tls_range_depth == 0) {
        return aclmockSetError("aclprofRangePop", ACL_ERROR_INVALID_PARAM,
                               "no aclprofRangePushEx is open on this thread");
    }
    tls_range_depth--;
    return aclmockProfRangePop();
}

/* Stable id of a message string (64-bit FNV-1a). UINT64_MAX means failure
 * (acl_next_semantics.md §7.3), so that value is never an id. */
uint64_t aclprofStr2Id(const char *message)
{
    if (message == NULL) {
        (void)aclmockSetError("aclprofStr2Id", ACL_ERROR_INVALID_PARAM, "argument 'message' is NULL");
        return UINT64_MAX;
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)message; *p != '\0'; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    return h == UINT64_MAX ? UINT64_MAX - 1 : h;
}

/* ========================================================= subscriptions */

aclprofSubscribeConfig *aclprofCreateSubscribeConfig(int8_t timeInfoSwitch, aclprofAicoreMetrics aicoreMetrics,
                                                     void *fd)
{
    static const char fn[] = "aclprofCreateSubscribeConfig";
    if (fd == NULL) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'fd' is NULL (pass the write end of a pipe)");
        return NULL;
    }
    if (timeInfoSwitch != 0 && timeInfoSwitch != 1) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'timeInfoSwitch' is %d (expected 0 or 1)",
                              (int)timeInfoSwitch);
        return NULL;
    }
    int m = (int)aicoreMetrics; /* ignored, but must be an aclprofAicoreMetrics */
    if ((m < ACL_AICORE_ARITHMETIC_UTILIZATION || m > ACL_AICORE_MEMORY_ACCESS) && m != ACL_AICORE_NONE) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'aicoreMetrics' (%d) is not an aclprofAicoreMetrics",
                              m);
        return NULL;
    }
    int f = *(const int *)fd;
    if (f < 0 || fcntl(f, F_GETFL) < 0 || (fcntl(f, F_GETFL) & O_ACCMODE) == O_RDONLY) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument '*fd' (%d) is not a writable file descriptor", f);
        return NULL;
    }
    struct aclprofSubscribeConfig *c = (struct aclprofSubscribeConfig *)calloc(1, sizeof *c);
    if (c == NULL) {
        (void)aclmockSetError(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    c->magic = PROF_SUBCFG_MAGIC;
    c->time_info = timeInfoSwitch == 1;
    c->metrics = aicoreMetrics;
    c->fd = f;
    if (!core_handle_set_add(&g_subcfgs, c)) {
        free(c);
        (void)aclmockSetError(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    return c;
}

aclError aclprofDestroySubscribeConfig(const aclprofSubscribeConfig *profSubscribeConfig)
{
    static const char fn[] = "aclprofDestroySubscribeConfig";
    if (profSubscribeConfig == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'profSubscribeConfig' is NULL");
    }
    if (!core_handle_set_remove(&g_subcfgs, profSubscribeConfig)) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM,
                               "argument 'profSubscribeConfig' (%p) is not a live aclprofSubscribeConfig",
                               (const void *)profSubscribeConfig);
    }
    struct aclprofSubscribeConfig *c = (struct aclprofSubscribeConfig *)(uintptr_t)profSubscribeConfig;
    c->magic = 0;
    free(c);
    return ACL_SUCCESS;
}

/* Mock choice: the mock has no offline models (aclmdlLoad* are not part of the
 * runtime it simulates), so any model id may be subscribed; every operator task
 * (kernels, aclmockLaunchOp) of every device is reported under it. */
aclError aclprofModelSubscribe(uint32_t modelId, const aclprofSubscribeConfig *profSubscribeConfig)
{
    static const char fn[] = "aclprofModelSubscribe";
    if (profSubscribeConfig == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'profSubscribeConfig' is NULL");
    }
    struct aclprofSubscribeConfig c;
    core_handle_set_lock(&g_subcfgs);
    bool live = core_handle_set_contains_locked(&g_subcfgs, profSubscribeConfig);
    if (live) {
        c = *profSubscribeConfig;
    }
    core_handle_set_unlock(&g_subcfgs);
    if (!live) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM,
                               "argument 'profSubscribeConfig' (%p) is not a live aclprofSubscribeConfig",
                               (const void *)profSubscribeConfig);
    }
    core_mutex_lock(&g_mu);
    bool conflict = g_inited;
    if (!conflict) {
        g_nsubscribed++; /* reserved while subscribing: aclprofInit refuses meanwhile */
    }
    core_mutex_unlock(&g_mu);
    if (conflict) {
        return aclmockSetError(fn, ACL_ERROR_PROF_API_CONFLICT,
                               "profiling runs through aclprofInit..aclprofFinalize: the two styles cannot be mixed");
    }
    aclError rc = aclmockProfSubscribe(modelId, c.fd, c.time_info ? 1 : 0);
    if (rc != ACL_SUCCESS) {
        core_mutex_lock(&g_mu);
        g_nsubscribed--;
        core_mutex_unlock(&g_mu);
        return aclmockSetError(fn, rc, "model %u cannot be subscribed (error %d)", modelId, (int)rc);
    }
    return ACL_SUCCESS;
}

aclError aclprofModelUnSubscribe(uint32_t modelId)
{
    static const char fn[] = "aclprofModelUnSubscribe";
    core_mutex_lock(&g_mu);
    bool conflict = g_inited;
    core_mutex_unlock(&g_mu);
    if (conflict) {
        return aclmockSetError(fn, ACL_ERROR_PROF_API_CONFLICT,
                               "profiling runs through aclprofInit..aclprofFinalize: the two styles cannot be mixed");
    }
    aclError rc = aclmockProfUnsubscribe(modelId);
    if (rc != ACL_SUCCESS) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_MODEL_ID, "model %u is not subscribed", modelId);
    }
    core_mutex_lock(&g_mu);
    if (g_nsubscribed > 0) {
        g_nsubscribed--;
    }
    core_mutex_unlock(&g_mu);
    return ACL_SUCCESS;
}

/* ---------------------------------------------------- op-info record parsers */

aclError aclprofGetOpDescSize(size_t *opDescSize)
{
    if (opDescSize == NULL) {
        return aclmockSetError("aclprofGetOpDescSize", ACL_ERROR_INVALID_PARAM, "argument 'opDescSize' is NULL");
    }
    *opDescSize = sizeof(aclmockOpRecord);
    return ACL_SUCCESS;
}

/* Copies record `index` of the buffer (a whole number of records read from the
 * pipe) into *out; records the error under fn otherwise. */
static aclError get_record(const char *fn, const void *opInfo, size_t opInfoLen, uint32_t index, aclmockOpRecord *out)
{
    if (opInfo == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'opInfo' is NULL");
    }
    if (opInfoLen == 0 || opInfoLen % sizeof(aclmockOpRecord) != 0) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM,
                               "argument 'opInfoLen' (%zu) is not a positive multiple of the record size (%zu, "
                               "aclprofGetOpDescSize)",
                               opInfoLen, sizeof(aclmockOpRecord));
    }
    size_t n = opInfoLen / sizeof(aclmockOpRecord);
    if (index >= n) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'index' (%u) is not in [0, %zu]", index, n - 1);
    }
    memcpy(out, (const unsigned char *)opInfo + (size_t)index * sizeof *out, sizeof *out);
    if (out->magic != ACLMOCK_OP_RECORD_MAGIC) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "record %u of 'opInfo' is not an op-info record", index);
    }
    return ACL_SUCCESS;
}

aclError aclprofGetOpNum(const void *opInfo, size_t opInfoLen, uint32_t *opNumber)
{
    static const char fn[] = "aclprofGetOpNum";
    if (opNumber == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'opNumber' is NULL");
    }
    aclmockOpRecord r;
    aclError rc = get_record(fn, opInfo, opInfoLen, 0, &r);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *opNumber = (uint32_t)(opInfoLen / sizeof(aclmockOpRecord));
    return ACL_SUCCESS;
}

static aclError string_len(const char *fn, const void *opInfo, size_t opInfoLen, uint32_t index, size_t *len,
                           bool type)
{
    if (len == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", type ? "opTypeLen" : "opNameLen");
    }
    aclmockOpRecord r;
    aclError rc = get_record(fn, opInfo, opInfoLen, index, &r);
    if (rc == ACL_SUCCESS) {
        *len = strnlen(type ? r.opType : r.opName, type ? sizeof r.opType : sizeof r.opName) + 1;
    }
    return rc;
}

static aclError string_get(const char *fn, const void *opInfo, size_t opInfoLen, uint32_t index, char *out, size_t len,
                           bool type)
{
    if (out == NULL || len == 0) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL or its length is 0",
                               type ? "opType" : "opName");
    }
    aclmockOpRecord r;
    aclError rc = get_record(fn, opInfo, opInfoLen, index, &r);
    if (rc == ACL_SUCCESS) { /* a smaller buffer gets a truncated string */
        snprintf(out, len, "%.*s", (int)(type ? sizeof r.opType : sizeof r.opName), type ? r.opType : r.opName);
    }
    return rc;
}

aclError aclprofGetOpTypeLen(const void *opInfo, size_t opInfoLen, uint32_t index, size_t *opTypeLen)
{
    return string_len("aclprofGetOpTypeLen", opInfo, opInfoLen, index, opTypeLen, true);
}

aclError aclprofGetOpType(const void *opInfo, size_t opInfoLen, uint32_t index, char *opType, size_t opTypeLen)
{
    return string_get("aclprofGetOpType", opInfo, opInfoLen, index, opType, opTypeLen, true);
}

aclError aclprofGetOpNameLen(const void *opInfo, size_t opInfoLen, uint32_t index, size_t *opNameLen)
{
    return string_len("aclprofGetOpNameLen", opInfo, opInfoLen, index, opNameLen, false);
}

aclError aclprofGetOpName(const void *opInfo, size_t opInfoLen, uint32_t index, char *opName, size_t opNameLen)
{
    return string_get("aclprofGetOpName", opInfo, opInfoLen, index, opName, opNameLen, false);
}

/* The three times are in microseconds; 0 (with the error recorded) on failure. */
uint64_t aclprofGetOpStart(const void *opInfo, size_t opInfoLen, uint32_t index)
{
    aclmockOpRecord r;
    return get_record("aclprofGetOpStart", opInfo, opInfoLen, index, &r) == ACL_SUCCESS ? r.startUs : 0;
}

uint64_t aclprofGetOpEnd(const void *opInfo, size_t opInfoLen, uint32_t index)
{
    aclmockOpRecord r;
    return get_record("aclprofGetOpEnd", opInfo, opInfoLen, index, &r) == ACL_SUCCESS ? r.endUs : 0;
}

uint64_t aclprofGetOpDuration(const void *opInfo, size_t opInfoLen, uint32_t index)
{
    aclmockOpRecord r;
    return get_record("aclprofGetOpDuration", opInfo, opInfoLen, index, &r) == ACL_SUCCESS ? r.durationUs : 0;
}

size_t aclprofGetModelId(const void *opInfo, size_t opInfoLen, uint32_t index)
{
    aclmockOpRecord r;
    return get_record("aclprofGetModelId", opInfo, opInfoLen, index, &r) == ACL_SUCCESS ? r.modelId : 0;
}

aclprofSubscribeOpFlag aclprofGetOpFlag(const void *opInfo, size_t opInfoLen, uint32_t index)
{
    aclmockOpRecord r;
    if (get_record("aclprofGetOpFlag", opInfo, opInfoLen, index, &r) != ACL_SUCCESS) {
        return ACL_SUBSCRIBE_NONE;
    }
    return (aclprofSubscribeOpFlag)r.flag;
}

/* A pointer into the caller's buffer (the record's thread id string). */
const char *aclprofGetOpAttriValue(const void *opInfo, size_t opInfoLen, uint32_t index, aclprofSubscribeOpAttri attri)
{
    static const char fn[] = "aclprofGetOpAttriValue";
    aclmockOpRecord r;
    if (get_record(fn, opInfo, opInfoLen, index, &r) != ACL_SUCCESS) {
        return NULL;
    }
    if ((int)attri != ACL_SUBSCRIBE_ATTRI_THREADID) {
        (void)aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'attri' (%d) is not ACL_SUBSCRIBE_ATTRI_THREADID",
                              (int)attri);
        return NULL;
    }
    const char *rec = (const char *)opInfo + (size_t)index * sizeof r;
    return rec + offsetof(aclmockOpRecord, threadId);
}
