/*
 * prof.c - the profiler's collection (README "Profiling"): which tasks and host
 * events go into the running profile, the step counter, markers and ranges, the
 * seed's environment switches (ASCEND_PROFILER_*) and the op-info subscriptions
 * of aclprofModelSubscribe. libmsprofiler.so's aclprof* functions drive it through
 * the aclmockProf* calls below (they cannot reach the hidden functions), and so
 * can a Python profiler.
 *
 * One collection runs at a time: started by ASCEND_PROFILER_FLAGS=enable at aclInit
 * (within the START_STEP..STOP_STEP window), by aclprofStart, or by
 * aclmockProfStart; when it stops (aclmockProfStop, the stop step, aclFinalize, or
 * process exit) its records are written by trace.c into a new folder of its output
 * directory. Times are modeled (virtual/paced timing) or the host clock (real).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl_prof.h"
#include "core/core.h"
#include "stream/stream.h"
#include "diag/diag_private.h"

#define PROF_MAX_RECORDS (4u * 1024u * 1024u)
/* Records allocated, and touched, when a collection starts (about 2 MiB): the first
 * tasks of a profile then cost no page fault and no reallocation. */
#define PROF_INITIAL_RECORDS 16384u
#define PROF_MAX_SUBS 64
#define PROF_RANGE_DEPTH 256

typedef struct collection {
    bool active;       /* collecting */
    bool armed;        /* env window: waiting for the start step */
    bool env;          /* started by ASCEND_PROFILER_FLAGS */
    uint64_t devices;  /* bit per device id */
    uint64_t flags;    /* aclprofCreateConfig dataTypeConfig (0: everything) */
    char dir[4096];
    diag_prof_rec *recs;
    size_t n, cap;
    uint64_t dropped;
    uint64_t first_step;
} collection;

typedef struct subscription {
    uint32_t model;
    int fd;
    bool time_info;
    unsigned char *buf; /* records not yet written to the pipe */
    size_t len, cap;
} subscription;

typedef struct open_range {
    uint64_t id;
    uint64_t start;
    uint32_t tid;
    char name[64];
    struct open_range *next;
} open_range;

static mock_mutex g_prof_mu = MOCK_MUTEX_INIT(MOCK_LOCK_DIAG_PROF);
static collection g_col;
static subscription g_subs[PROF_MAX_SUBS];
static size_t g_nsubs;
static open_range *g_ranges;
static uint64_t g_next_range = 1;
static uint64_t g_out_seq;
static char g_last_output[4300];
static atomic_bool g_active_fast; /* g_col.active, for the hot path */
static _Atomic uint64_t g_devices_fast; /* devices whose tasks are collected (0 if none) */
static atomic_bool g_subs_fast;   /* g_nsubs > 0 */
static _Atomic uint64_t g_step;

/* msproftx ranges of aclmockProfRangePush/Pop: a stack per thread */
typedef struct pushed {
    uint64_t start;
    char name[64];
} pushed;
static _Thread_local pushed tls_stack[PROF_RANGE_DEPTH];
static _Thread_local uint32_t tls_depth;

static bool wants_tasks(uint64_t flags);

static void update_observing_locked(void)
{
    atomic_store(&g_active_fast, g_col.active);
    atomic_store(&g_devices_fast, g_col.active && wants_tasks(g_col.flags) ? g_col.devices : 0);
    atomic_store(&g_subs_fast, g_nsubs > 0);
    core_set_observing(CORE_OBSERVE_PROFILER, g_col.active || g_col.armed || g_nsubs > 0);
}

/* ------------------------------------------------------------- collecting */

static bool wants_tasks(uint64_t flags)
{
    /* every task-time flavour (and the ACL/runtime API switches) collects tasks;
     * 0 is the environment switch's "everything" */
    return flags == 0 || (flags & (ACL_PROF_TASK_TIME | ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_TIME_L2 |
                                   ACL_PROF_TASK_TIME_L3 | ACL_PROF_ACL_API | ACL_PROF_RUNTIME_API |
                                   ACL_PROF_TRAINING_TRACE)) != 0;
}

static bool wants_host(uint64_t flags)
{
    return flags == 0 || (flags & (ACL_PROF_MSPROFTX | ACL_PROF_ACL_API | ACL_PROF_RUNTIME_API)) != 0;
}

bool diag_prof_wants_device(int32_t device)
{
    uint64_t mask = atomic_load_explicit(&g_devices_fast, memory_order_relaxed);
    return device >= 0 && device < 64 && (mask & (1ull << device)) != 0;
}

bool diag_prof_wants(const diag_task *t)
{
    return diag_prof_wants_device(t->device);
}

bool diag_prof_subscribed(void)
{
    return atomic_load_explicit(&g_subs_fast, memory_order_relaxed);
}

uint64_t diag_prof_step(void)
{
    return atomic_load_explicit(&g_step, memory_order_relaxed);
}

/* g_prof_mu held; false when the collection is full. */
static diag_prof_rec *append_locked(void)
{
    if (g_col.n == g_col.cap) {
        if (g_col.cap >= PROF_MAX_RECORDS) {
            g_col.dropped++;
            return NULL;
        }
        size_t nc = g_col.cap ? g_col.cap * 2 : 4096;
        diag_prof_rec *nv = realloc(g_col.recs, nc * sizeof *nv);
        if (nv == NULL) {
            g_col.dropped++;
            return NULL;
        }
        g_col.recs = nv;
        g_col.cap = nc;
    }
    diag_prof_rec *r = &g_col.recs[g_col.n++];
    memset(r, 0, sizeof *r);
    return r;
}

void diag_prof_task(const diag_task *t, uint64_t start_ns, uint64_t end_ns, aclError rc)
{
    char *tag = t->tag != NULL ? strdup(t->tag) : NULL;
    core_mutex_lock(&g_prof_mu);
    diag_prof_rec *r = g_col.active ? append_locked() : NULL;
    if (r != NULL) {
        r->id = t->id;
        r->start_ns = start_ns;
        r->end_ns = end_ns < start_ns ? start_ns : end_ns;
        r->bytes = t->bytes;
        r->step = t->step;
        r->device = t->device;
        r->stream_id = t->stream_id;
        r->kind = (uint8_t)t->kind;
        r->link = (uint8_t)t->link;
        r->instant = t->kind == MOCK_TASK_MARKER || t->kind == MOCK_TASK_EVENT_RECORD;
        r->stream_default = t->stream_default;
        r->rc = rc;
        memcpy(r->name, t->name, sizeof r->name);
        r->cat = diag_kind_name(t->kind, t->link);
        r->tag = tag;
        tag = NULL;
    }
    core_mutex_unlock(&g_prof_mu);
    free(tag);
}

void diag_prof_fast(const diag_fast_rec *f, int32_t device, int32_t stream_id, uint64_t end_ns, aclError rc)
{
    core_mutex_lock(&g_prof_mu);
    diag_prof_rec *r = g_col.active ? append_locked() : NULL;
    if (r != NULL) {
        r->id = f->id;
        r->start_ns = f->start;
        r->end_ns = end_ns < f->start ? f->start : end_ns;
        r->bytes = f->bytes;
        r->step = f->step;
        r->device = device;
        r->stream_id = stream_id;
        r->kind = f->kind;
        r->link = f->link;
        r->instant = f->kind == MOCK_TASK_MARKER || f->kind == MOCK_TASK_EVENT_RECORD;
        r->stream_default = f->stream_default;
        r->rc = rc;
        memcpy(r->name, f->name, sizeof f->name);
        r->cat = diag_kind_name(f->kind, f->link);
        r->tag = f->tag; /* the record takes it over */
    }
    core_mutex_unlock(&g_prof_mu);
    if (r == NULL) {
        free(f->tag);
    }
}

void diag_prof_host(const char *name, const char *cat, uint64_t start_ns, uint64_t end_ns, uint64_t bytes,
                    const char *tag)
{
    if (!atomic_load_explicit(&g_active_fast, memory_order_relaxed)) {
        return;
    }
    char *tcopy = tag != NULL ? strdup(tag) : NULL;
    uint32_t tid = diag_host_tid();
    core_mutex_lock(&g_prof_mu);
    diag_prof_rec *r = g_col.active && wants_host(g_col.flags) ? append_locked() : NULL;
    if (r != NULL) {
        r->id = 0;
        r->start_ns = start_ns;
        r->end_ns = end_ns < start_ns ? start_ns : end_ns;
        r->bytes = bytes;
        r->step = atomic_load(&g_step);
        r->device = -1;
        r->stream_id = (int32_t)tid;
        r->kind = MOCK_TASK_KIND_COUNT; /* a host event */
        r->instant = end_ns <= start_ns;
        snprintf(r->name, sizeof r->name, "%s", name);
        r->cat = cat;
        r->tag = tcopy;
        tcopy = NULL;
    }
    core_mutex_unlock(&g_prof_mu);
    free(tcopy);
}

/* ------------------------------------------------------------ start / stop */

static const char *timing_name(void)
{
    switch (diag_config_get()->timing) {
    case DIAG_TIMING_VIRTUAL:
        return "virtual";
    case DIAG_TIMING_PACED:
        return "paced";
    default:
        return "real";
    }
}

/* Writes what stop_locked handed over; records the folder in g_last_output. */
static int write_profile(const char *dir, diag_prof_rec *recs, size_t n, uint64_t first_step, uint64_t last_step,
                         uint64_t seq, char *out, size_t outlen)
{
    char folder[4200];
    snprintf(folder, sizeof folder, "%s/mock_prof_%ld_%llu", dir, (long)getpid(), (unsigned long long)seq);
    int err = diag_trace_write(folder, recs, n, timing_name(), first_step, last_step);
    for (size_t i = 0; i < n; i++) {
        free(recs[i].tag);
    }
    free(recs);
    core_mutex_lock(&g_prof_mu);
    if (err == 0) {
        snprintf(g_last_output, sizeof g_last_output, "%s", folder);
    }
    core_mutex_unlock(&g_prof_mu);
    if (out != NULL && outlen > 0) {
        snprintf(out, outlen, "%s", err == 0 ? folder : "");
    }
    return err;
}

/* Ends the collection (g_prof_mu held) and hands its records to the caller. */
typedef struct finished {
    bool any;
    char dir[4096];
    diag_prof_rec *recs;
    size_t n;
    uint64_t first_step, last_step, seq, dropped;
} finished;

static void stop_locked(finished *f)
{
    memset(f, 0, sizeof *f);
    if (!g_col.active && !g_col.armed) {
        return;
    }
    f->any = true;
    snprintf(f->dir, sizeof f->dir, "%s", g_col.dir);
    f->recs = g_col.recs;
    f->n = g_col.n;
    f->first_step = g_col.first_step;
    f->last_step = atomic_load(&g_step);
    f->seq = ++g_out_seq;
    f->dropped = g_col.dropped;
    memset(&g_col, 0, sizeof g_col);
    update_observing_locked();
}

static aclError finish(const char *fn, finished *f, char *out, size_t outlen)
{
    if (!f->any) {
        return ACL_SUCCESS;
    }
    if (f->dropped > 0) {
        diag_log(-1, DIAG_LOG_WARNING, fn, 0, "the profile kept %zu records and dropped %llu (limit %u)", f->n,
                 (unsigned long long)f->dropped, PROF_MAX_RECORDS);
    }
    int err = write_profile(f->dir, f->recs, f->n, f->first_step, f->last_step, f->seq, out, outlen);
    if (err != 0) {
        return core_error(fn, ACL_ERROR_PROFILING_FAILURE, "cannot write the profile into '%s': %s", f->dir,
                          strerror(err));
    }
    return ACL_SUCCESS;
}

static aclError start_common(const char *fn, const char *dir, uint64_t devices, uint64_t flags, bool env, bool armed)
{
    if (dir == NULL || dir[0] == '\0') {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'outputDir' is NULL or empty");
    }
    if (strlen(dir) >= sizeof g_col.dir - 64) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'outputDir' is too long");
    }
    int err = diag_make_dirs(dir);
    if (err != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "output directory '%s' is not usable: %s", dir, strerror(err));
    }
    diag_prof_rec *initial = malloc(PROF_INITIAL_RECORDS * sizeof *initial);
    if (initial != NULL) {
        memset(initial, 0, PROF_INITIAL_RECORDS * sizeof *initial); /* fault the pages in now */
    }
    core_mutex_lock(&g_prof_mu);
    bool busy = g_col.active || g_col.armed;
    if (!busy) {
        if (initial != NULL && g_col.recs == NULL) {
            g_col.recs = initial;
            g_col.cap = PROF_INITIAL_RECORDS;
            initial = NULL;
        }
        g_col.active = !armed;
        g_col.armed = armed;
        g_col.env = env;
        g_col.devices = devices;
        g_col.flags = flags;
        g_col.first_step = atomic_load(&g_step);
        snprintf(g_col.dir, sizeof g_col.dir, "%s", dir);
        update_observing_locked();
    }
    core_mutex_unlock(&g_prof_mu);
    free(initial);
    if (busy) {
        return core_error(fn, ACL_ERROR_PROF_ALREADY_RUN, "a profiling collection is already running");
    }
    return ACL_SUCCESS;
}

void diag_prof_env_start(void)
{
    const diag_config *c = diag_config_get();
    if (!c->prof_env) {
        return;
    }
    core_mutex_lock(&g_prof_mu);
    bool running = g_col.active || g_col.armed;
    core_mutex_unlock(&g_prof_mu);
    if (running) {
        return; /* a second aclInit: the process-wide collection goes on */
    }
    bool armed = c->prof_start_step > atomic_load(&g_step);
    if (start_common("aclInit", c->prof_dir, ~0ull, 0, true, armed) != ACL_SUCCESS) {
        fprintf(stderr, "mock_libascendcl: ASCEND_PROFILER_OUTPUT='%s' is not a usable directory; not profiling\n",
                c->prof_dir);
    }
}

void diag_prof_finalize(void)
{
    finished f;
    core_mutex_lock(&g_prof_mu);
    stop_locked(&f);
    core_mutex_unlock(&g_prof_mu);
    (void)finish("aclFinalize", &f, NULL, 0);
}

/* ------------------------------------------------------------------ steps */

uint64_t aclmockProfStep(void)
{
    const diag_config *c = diag_config_get();
    uint64_t now = diag_host_now();
    uint64_t step = atomic_fetch_add(&g_step, 1) + 1;
    char name[48];
    snprintf(name, sizeof name, "step %llu", (unsigned long long)step);
    diag_prof_host(name, "step", now, now, 0, NULL);
    finished f = {0};
    core_mutex_lock(&g_prof_mu);
    if (g_col.env && g_col.armed && step >= c->prof_start_step) {
        g_col.armed = false;
        g_col.active = true;
        g_col.first_step = step;
        update_observing_locked();
    } else if (g_col.env && g_col.active && c->prof_stop_step != 0 && step >= c->prof_stop_step) {
        stop_locked(&f);
    }
    core_mutex_unlock(&g_prof_mu);
    (void)finish("aclmockProfStep", &f, NULL, 0);
    return step;
}

uint64_t aclmockProfGetStep(void)
{
    return atomic_load(&g_step);
}

/* ------------------------------------------------------------------ the API */

aclError aclmockProfStart(const char *outputDir, uint64_t deviceMask, uint64_t dataTypeConfig)
{
    (void)diag_config_get();
    return start_common("aclmockProfStart", outputDir, deviceMask, dataTypeConfig, false, false);
}

aclError aclmockProfSetDevices(uint64_t deviceMask)
{
    core_mutex_lock(&g_prof_mu);
    bool running = g_col.active;
    if (running) {
        g_col.devices = deviceMask;
    }
    core_mutex_unlock(&g_prof_mu);
    if (!running) {
        return core_error("aclmockProfSetDevices", ACL_ERROR_PROF_NOT_RUN, "no profiling collection is running");
    }
    return ACL_SUCCESS;
}

aclError aclmockProfStop(char *outPath, size_t len)
{
    finished f;
    core_mutex_lock(&g_prof_mu);
    stop_locked(&f);
    core_mutex_unlock(&g_prof_mu);
    if (!f.any) {
        if (outPath != NULL && len > 0) {
            outPath[0] = '\0';
        }
        return core_error("aclmockProfStop", ACL_ERROR_PROF_NOT_RUN, "no profiling collection is running");
    }
    return finish("aclmockProfStop", &f, outPath, len);
}

int aclmockProfIsActive(void)
{
    core_mutex_lock(&g_prof_mu);
    int v = g_col.active ? 1 : g_col.armed ? 2 : 0;
    core_mutex_unlock(&g_prof_mu);
    return v;
}

int aclmockProfLastOutput(char *buf, size_t len)
{
    core_mutex_lock(&g_prof_mu);
    int n = snprintf(buf, len, "%s", g_last_output);
    core_mutex_unlock(&g_prof_mu);
    return n;
}

static void marker_noop_free(void *p)
{
    (void)p;
}

static aclError marker_task(void *p)
{
    (void)p;
    return ACL_SUCCESS;
}

aclError aclmockProfMark(const char *message, aclrtStream stream, int onStream)
{
    static const char fn[] = "aclmockProfMark";
    if (message == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'message' is NULL");
    }
    if (!onStream) {
        uint64_t now = diag_host_now();
        diag_prof_host(message, "mark", now, now, 0, NULL);
        return ACL_SUCCESS;
    }
    mock_stream *s = NULL;
    aclError rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_task_desc desc = {.kind = MOCK_TASK_MARKER, .name = message, .peer_device = -1};
    rc = stream_enqueue_desc(s, marker_task, NULL, marker_noop_free, &desc);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the marker task (error %d)", rc);
    }
    return ACL_SUCCESS;
}

aclError aclmockProfRangePush(const char *name)
{
    static const char fn[] = "aclmockProfRangePush";
    if (name == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'name' is NULL");
    }
    if (tls_depth >= PROF_RANGE_DEPTH) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "range depth limit %d reached on this thread",
                          PROF_RANGE_DEPTH);
    }
    pushed *p = &tls_stack[tls_depth++];
    p->start = diag_host_now();
    snprintf(p->name, sizeof p->name, "%s", name);
    return ACL_SUCCESS;
}

aclError aclmockProfRangePop(void)
{
    if (tls_depth == 0) {
        return core_error("aclmockProfRangePop", ACL_ERROR_INVALID_PARAM, "no range is open on this thread");
    }
    pushed *p = &tls_stack[--tls_depth];
    diag_prof_host(p->name, "range", p->start, diag_host_now(), 0, NULL);
    return ACL_SUCCESS;
}

aclError aclmockProfRangeStart(const char *name, uint64_t *rangeId)
{
    static const char fn[] = "aclmockProfRangeStart";
    if (name == NULL || rangeId == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", name == NULL ? "name" : "rangeId");
    }
    open_range *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    r->start = diag_host_now();
    r->tid = diag_host_tid();
    snprintf(r->name, sizeof r->name, "%s", name);
    core_mutex_lock(&g_prof_mu);
    r->id = g_next_range++;
    r->next = g_ranges;
    g_ranges = r;
    core_mutex_unlock(&g_prof_mu);
    *rangeId = r->id;
    return ACL_SUCCESS;
}

aclError aclmockProfRangeStop(uint64_t rangeId)
{
    core_mutex_lock(&g_prof_mu);
    open_range **pp = &g_ranges;
    while (*pp != NULL && (*pp)->id != rangeId) {
        pp = &(*pp)->next;
    }
    open_range *r = *pp;
    if (r != NULL) {
        *pp = r->next;
    }
    core_mutex_unlock(&g_prof_mu);
    if (r == NULL) {
        return core_error("aclmockProfRangeStop", ACL_ERROR_INVALID_PARAM,
                          "argument 'rangeId' (%llu) is not an open range", (unsigned long long)rangeId);
    }
    diag_prof_host(r->name, "range", r->start, diag_host_now(), 0, NULL);
    free(r);
    return ACL_SUCCESS;
}

/* ----------------------------------------------------------- subscriptions */

/* Writes what the pipe takes without blocking (g_prof_mu held). */
static void sub_pump_locked(subscription *s)
{
    while (s->len > 0) {
        ssize_t w = write(s->fd, s->buf, s->len);
        if (w <= 0) {
            return; /* full (EAGAIN) or closed by the reader: kept for later */
        }
        memmove(s->buf, s->buf + w, s->len - (size_t)w);
        s->len -= (size_t)w;
    }
}

void diag_prof_subscription_task(const diag_task *t, uint64_t start_ns, uint64_t end_ns)
{
    aclmockOpRecord rec;
    memset(&rec, 0, sizeof rec);
    rec.magic = ACLMOCK_OP_RECORD_MAGIC;
    rec.startUs = start_ns / 1000u;
    rec.endUs = end_ns / 1000u;
    rec.durationUs = rec.endUs - rec.startUs;
    rec.flag = 0; /* ACL_SUBSCRIBE_OP */
    rec.deviceId = (uint32_t)t->device;
    rec.streamId = (uint32_t)t->stream_id;
    rec.taskId = t->id;
    snprintf(rec.opType, sizeof rec.opType, "%s", t->name);
    snprintf(rec.opName, sizeof rec.opName, "%s_%llu", t->name, (unsigned long long)t->id);
    snprintf(rec.threadId, sizeof rec.threadId, "%u", diag_host_tid());
    core_mutex_lock(&g_prof_mu);
    for (size_t i = 0; i < g_nsubs; i++) {
        subscription *s = &g_subs[i];
        aclmockOpRecord mine = rec;
        mine.modelId = s->model;
        if (!s->time_info) {
            mine.startUs = mine.endUs = mine.durationUs = 0;
        }
        if (s->len + sizeof mine > s->cap) {
            size_t nc = s->cap ? s->cap * 2 : 64 * sizeof mine;
            while (nc < s->len + sizeof mine) {
                nc *= 2;
            }
            unsigned char *nb = realloc(s->buf, nc);
            if (nb == NULL) {
                continue;
            }
            s->buf = nb;
            s->cap = nc;
        }
        memcpy(s->buf + s->len, &mine, sizeof mine);
        s->len += sizeof mine;
        sub_pump_locked(s);
    }
    core_mutex_unlock(&g_prof_mu);
}

aclError aclmockProfSubscribe(uint32_t modelId, int fd, int timeInfo)
{
    static const char fn[] = "aclmockProfSubscribe";
    if (fd < 0 || fcntl(fd, F_GETFL) < 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'fd' (%d) is not an open file descriptor", fd);
    }
    aclError rc = ACL_SUCCESS;
    core_mutex_lock(&g_prof_mu);
    for (size_t i = 0; i < g_nsubs && rc == ACL_SUCCESS; i++) {
        if (g_subs[i].model == modelId) {
            rc = ACL_ERROR_PROF_REPEAT_SUBSCRIBE;
        }
    }
    if (rc == ACL_SUCCESS && g_nsubs == PROF_MAX_SUBS) {
        rc = ACL_ERROR_INVALID_PARAM;
    }
    if (rc == ACL_SUCCESS) {
        /* records are written without blocking the stream workers; the rest at
         * unsubscribe */
        int fl = fcntl(fd, F_GETFL);
        (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        g_subs[g_nsubs++] = (subscription){.model = modelId, .fd = fd, .time_info = timeInfo != 0};
        update_observing_locked();
    }
    core_mutex_unlock(&g_prof_mu);
    if (rc == ACL_ERROR_PROF_REPEAT_SUBSCRIBE) {
        return core_error(fn, rc, "model %u is already subscribed (unsubscribe it first)", modelId);
    }
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "too many subscriptions (at most %d)", PROF_MAX_SUBS);
    }
    return ACL_SUCCESS;
}

aclError aclmockProfUnsubscribe(uint32_t modelId)
{
    subscription s = {0};
    bool found = false;
    core_mutex_lock(&g_prof_mu);
    for (size_t i = 0; i < g_nsubs; i++) {
        if (g_subs[i].model == modelId) {
            s = g_subs[i];
            g_subs[i] = g_subs[--g_nsubs];
            found = true;
            break;
        }
    }
    update_observing_locked();
    core_mutex_unlock(&g_prof_mu);
    if (!found) {
        return core_error("aclmockProfUnsubscribe", ACL_ERROR_INVALID_PARAM, "model %u is not subscribed", modelId);
    }
    /* flush what is left (blocking now), then close the pipe as the runtime does */
    int fl = fcntl(s.fd, F_GETFL);
    if (fl >= 0) {
        (void)fcntl(s.fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    size_t off = 0;
    while (off < s.len) {
        ssize_t w = write(s.fd, s.buf + off, s.len - off);
        if (w <= 0) {
            break;
        }
        off += (size_t)w;
    }
    free(s.buf);
    close(s.fd);
    return ACL_SUCCESS;
}

/* aclFinalize: the subscriptions end (their pipes are flushed and closed). */
void diag_prof_subscriptions_end(void)
{
    for (;;) {
        core_mutex_lock(&g_prof_mu);
        uint32_t model = g_nsubs > 0 ? g_subs[0].model : 0;
        bool any = g_nsubs > 0;
        core_mutex_unlock(&g_prof_mu);
        if (!any) {
            return;
        }
        (void)aclmockProfUnsubscribe(model);
    }
}
