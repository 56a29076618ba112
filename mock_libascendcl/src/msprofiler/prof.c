/*
 * prof.c - libmsprofiler.so: aclprof* profiling control and msproftx.
 *
 * A host simulator has no profiling hardware, so nothing is collected and no
 * files are written, but every call validates its arguments and follows the
 * profiler's state machine:
 *   aclprofInit twice                       -> ACL_ERROR_REPEAT_INITIALIZE (100002)
 *   aclprofStart/Stop/Finalize before Init  -> ACL_ERROR_PROF_NOT_RUN (100043)
 *   aclprofStart of a device already being profiled
 *                                           -> ACL_ERROR_PROF_ALREADY_RUN (100042)
 *   aclprofStop of devices not being profiled -> ACL_ERROR_PROF_NOT_RUN (100043)
 *   bad path / length / config              -> ACL_ERROR_INVALID_PARAM (100000)
 * aclprofFinalize stops whatever is still running. Errors are recorded on the
 * calling thread through libascendcl.so's aclmockSetError, so
 * aclGetRecentErrMsg / aclrtGetLastError see them like any runtime error.
 * Streams are validated through the public aclrtStreamGetId.
 */
#include <errno.h>
#include <stdarg.h>
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
#define PROF_STEP_MAGIC 0x70726f6653746570ULL
#define PROF_STAMP_MAGIC 0x70726f665374616dULL

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
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

typedef struct prof_session {
    uint64_t devices;
    bool host_only;
    struct prof_session *next;
} prof_session;

typedef struct prof_range {
    uint32_t id;
    struct prof_range *next;
} prof_range;

static mock_mutex g_mu = MOCK_MUTEX_INIT(MOCK_LOCK_PROF);
static bool g_inited = false;
static char g_path[PROF_PATH_MAX + 1];
static prof_session *g_sessions = NULL;
static prof_range *g_ranges = NULL;
static uint32_t g_next_range = 1;
static char *g_settings[ACL_PROF_ARGS_MAX]; /* aclprofSetConfig values */

static mock_handle_set g_configs = MOCK_HANDLE_SET_INIT(MOCK_LOCK_PROF_CONFIGS);
static mock_handle_set g_steps = MOCK_HANDLE_SET_INIT(MOCK_LOCK_PROF_STEPS);
static mock_handle_set g_stamps = MOCK_HANDLE_SET_INIT(MOCK_LOCK_PROF_STAMPS);

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
    core_mutex_lock(&g_mu);
    bool again = g_inited;
    int err = again ? 0 : make_dirs(path);
    if (!again && err == 0) {
        memcpy(g_path, path, n + 1);
        g_inited = true;
    }
    core_mutex_unlock(&g_mu);
    if (again) {
        return aclmockSetError(fn, ACL_ERROR_REPEAT_INITIALIZE, "profiling is already initialized");
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
    if (started) {
        s->devices = c.devices;
        s->host_only = c.host_only;
        s->next = g_sessions;
        g_sessions = s;
    }
    core_mutex_unlock(&g_mu);
    if (started) {
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
    core_handle_set_lock(&g_steps);
    bool live = core_handle_set_contains_locked(&g_steps, stepInfo);
    if (live) {
        if ((int)tag == ACL_STEP_START) {
            stepInfo->start_ns = now_ns();
        } else {
            stepInfo->end_ns = now_ns();
        }
    }
    core_handle_set_unlock(&g_steps);
    if (!live) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'stepInfo' (%p) is not a live aclprofStepInfo",
                               (void *)stepInfo);
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

aclError aclprofMark(void *stamp)
{
    return check_stamp("aclprofMark", stamp);
}

aclError aclprofMarkEx(const char *msg, size_t msgLen, aclrtStream stream)
{
    static const char fn[] = "aclprofMarkEx";
    aclError rc = check_msg(fn, msg, msgLen);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return check_stream(fn, stream);
}

aclError aclprofPush(void *stamp)
{
    static const char fn[] = "aclprofPush";
    aclError rc = check_stamp(fn, stamp);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (tls_push_depth >= PROF_STACK_MAX) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "push depth limit %u reached on this thread",
                               PROF_STACK_MAX);
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
    return ACL_SUCCESS;
}

aclError aclprofRangeStart(void *stamp, uint32_t *rangeId)
{
    static const char fn[] = "aclprofRangeStart";
    if (rangeId == NULL) {
        return aclmockSetError(fn, ACL_ERROR_INVALID_PARAM, "argument 'rangeId' is NULL");
    }
    aclError rc = check_stamp(fn, stamp);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    prof_range *r = (prof_range *)malloc(sizeof *r);
    if (r == NULL) {
        return aclmockSetError(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
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
    return ACL_SUCCESS;
}

/* Stable id of a message string (64-bit FNV-1a; 0 is reserved for errors). */
uint64_t aclprofStr2Id(const char *message)
{
    if (message == NULL) {
        (void)aclmockSetError("aclprofStr2Id", ACL_ERROR_INVALID_PARAM, "argument 'message' is NULL");
        return 0;
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)message; *p != '\0'; p++) {
        h ^= *p;
        h *= 0x100000001b3ULL;
    }
    return h == 0 ? 1 : h;
}
