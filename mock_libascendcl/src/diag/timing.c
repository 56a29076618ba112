/*
 * timing.c - the timing model (README "Timing model") and the per-stream state the
 * diagnostics keep (timing and sanitizer), under MOCK_LOCK_DIAG_STATE.
 *
 * Virtual time. Every device has engines - one H2D and one D2H copy engine (PCIe),
 * one HBM engine (D2D copies, memsets, value writes), one device-link engine (peer
 * copies) and `compute_lanes` compute lanes (kernels) - and every stream a cursor:
 * the modeled end of its last task. A task is scheduled when it is submitted, in the
 * order the program submits it: it is ready at max(the submitting thread's virtual
 * time + one launch cost, its stream's cursor, the modeled time of the event record
 * it waits for), starts at the first gap of its engine that is long enough at or
 * after that time (so streams overlap on different engines and queue on a shared
 * one), and lasts latency + bytes / bandwidth (kernels: their declared cost or the
 * default; events and markers: no time). Because the schedule depends only on the
 * order of submissions, the modeled times are the same on every run of a program
 * whose threads submit in a fixed order - whatever the host scheduler does.
 *
 * Host threads have a virtual time too: asynchronous calls cost launch_ns,
 * allocations malloc_ns/free_ns, synchronous copies run on the engines and make the
 * thread wait for them, and a synchronization (stream, event, device, a query that
 * saw completion, a copy of pageable memory) moves the thread to the modeled end of
 * what it waited for (+ sync_ns when it had to wait). A new thread starts at the
 * latest time any host thread has reached.
 *
 * Host callbacks take their real time: once a callback is submitted, the end of its
 * stream is unknown until the callback returns, so the tasks submitted behind it
 * (and waits for events recorded behind it) are scheduled by the stream's worker
 * when it reaches them ("deferred").
 *
 * Modes: virtual = the model only (tasks run as fast as the host can, timestamps
 * are modeled); paced = the same schedule, but each stream worker sleeps until the
 * wall clock reaches a task's modeled start and end (times `pace`), and host
 * threads sleep for their modeled costs, so wall time follows the model.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "stream/stream.h"
#include "diag/diag_private.h"

#define LANE_MAX 256
#define MAX_COMPUTE_LANES 64

enum { ENG_H2D, ENG_D2H, ENG_HBM, ENG_PEER, ENG_COUNT };

/* Busy intervals of one engine lane, sorted and disjoint; nothing can be placed
 * before `floor` (the intervals dropped to keep the list bounded). */
typedef struct lane {
    uint64_t floor;
    size_t n;
    uint64_t s[LANE_MAX], e[LANE_MAX];
} lane;

typedef struct engines {
    lane copy[ENG_COUNT];
    lane *compute; /* compute_lanes of them */
} engines;

struct diag_stream {
    mock_stream *s;
    mock_context *ctx;
    int32_t device;
    int32_t id;
    uint32_t pid;       /* sanitizer participant */
    uint64_t cursor;    /* modeled end of the last scheduled task */
    uint32_t deferred;  /* submitted tasks waiting to be scheduled by the worker */
    bool open;          /* a host callback runs: its end is not known yet */
    void *vc;           /* sanitizer: the stream's vector clock */
};

typedef struct event_slot {
    const void *event;
    diag_event_node *latest;
} event_slot;

static mock_mutex g_state_mu = MOCK_MUTEX_INIT(MOCK_LOCK_DIAG_STATE);
static diag_stream **g_streams;
static size_t g_nstreams, g_capstreams;
static event_slot *g_events;
static size_t g_nevents, g_capevents;
static engines *g_eng[MOCK_MAX_DEVICES];
static uint32_t g_next_pid = 2; /* 1 is the host */
static _Atomic uint64_t g_host_frontier;

static _Thread_local uint64_t tls_vt;
static _Thread_local bool tls_vt_set;

void diag_state_lock(void)
{
    core_mutex_lock(&g_state_mu);
}

void diag_state_unlock(void)
{
    core_mutex_unlock(&g_state_mu);
}

/* ---------------------------------------------------------------- streams */

diag_stream *diag_stream_get(mock_stream *s, int32_t device, int32_t id)
{
    for (size_t i = 0; i < g_nstreams; i++) {
        if (g_streams[i]->s == s) {
            if (g_streams[i]->id < 0) {
                g_streams[i]->id = id; /* first seen by a wait or a sync */
            }
            /* move-to-front by one step keeps hot streams cheap to find */
            if (i > 0) {
                diag_stream *t = g_streams[i - 1];
                g_streams[i - 1] = g_streams[i];
                g_streams[i] = t;
                return g_streams[i - 1];
            }
            return g_streams[i];
        }
    }
    if (g_nstreams == g_capstreams) {
        size_t nc = g_capstreams ? g_capstreams * 2 : 16;
        diag_stream **nv = realloc(g_streams, nc * sizeof *nv);
        if (nv == NULL) {
            return NULL;
        }
        g_streams = nv;
        g_capstreams = nc;
    }
    diag_stream *ds = calloc(1, sizeof *ds);
    if (ds == NULL) {
        return NULL;
    }
    ds->s = s;
    ds->ctx = stream_context(s);
    ds->device = device;
    ds->id = id;
    ds->pid = g_next_pid++;
    ds->vc = diag_vc_new();
    g_streams[g_nstreams++] = ds;
    return ds;
}

/* The state of `s` if it has one (never creates: a stream destroyed by force may still
 * finish a task after its state was forgotten). */
static diag_stream *stream_find(const mock_stream *s)
{
    for (size_t i = 0; i < g_nstreams; i++) {
        if (g_streams[i]->s == s) {
            return g_streams[i];
        }
    }
    return NULL;
}

void diag_stream_forget(mock_stream *s)
{
    diag_state_lock();
    for (size_t i = 0; i < g_nstreams; i++) {
        if (g_streams[i]->s == s) {
            diag_vc_free(g_streams[i]->vc);
            free(g_streams[i]);
            g_streams[i] = g_streams[--g_nstreams];
            break;
        }
    }
    diag_state_unlock();
}

void diag_streams_each(mock_context *ctx, void (*fn)(diag_stream *ds, void *arg), void *arg)
{
    for (size_t i = 0; i < g_nstreams; i++) {
        if (ctx == NULL || g_streams[i]->ctx == ctx) {
            fn(g_streams[i], arg);
        }
    }
}

uint32_t diag_stream_pid(const diag_stream *ds)
{
    return ds->pid;
}

void *diag_stream_vc(diag_stream *ds)
{
    return ds->vc;
}

/* ----------------------------------------------------------------- events */

void diag_event_put(diag_event_node *n)
{
    if (n != NULL && --n->refs == 0) {
        diag_vc_free(n->vc);
        free(n);
    }
}

diag_event_node *diag_event_latest(const void *event)
{
    for (size_t i = 0; i < g_nevents; i++) {
        if (g_events[i].event == event) {
            g_events[i].latest->refs++;
            return g_events[i].latest;
        }
    }
    return NULL;
}

diag_event_node *diag_event_record(const void *event)
{
    diag_event_node *n = calloc(1, sizeof *n);
    if (n == NULL) {
        return NULL;
    }
    n->refs = 2; /* the table's and the caller's */
    for (size_t i = 0; i < g_nevents; i++) {
        if (g_events[i].event == event) {
            diag_event_put(g_events[i].latest);
            g_events[i].latest = n;
            return n;
        }
    }
    if (g_nevents == g_capevents) {
        size_t nc = g_capevents ? g_capevents * 2 : 16;
        event_slot *nv = realloc(g_events, nc * sizeof *nv);
        if (nv == NULL) {
            free(n);
            return NULL;
        }
        g_events = nv;
        g_capevents = nc;
    }
    g_events[g_nevents++] = (event_slot){event, n};
    return n;
}

void diag_state_reset(void)
{
    diag_state_lock();
    for (size_t i = 0; i < g_nstreams; i++) {
        diag_vc_free(g_streams[i]->vc);
        free(g_streams[i]);
    }
    free(g_streams);
    g_streams = NULL;
    g_nstreams = g_capstreams = 0;
    for (size_t i = 0; i < g_nevents; i++) {
        diag_event_put(g_events[i].latest);
    }
    free(g_events);
    g_events = NULL;
    g_nevents = g_capevents = 0;
    for (int d = 0; d < MOCK_MAX_DEVICES; d++) {
        if (g_eng[d] != NULL) {
            free(g_eng[d]->compute);
            free(g_eng[d]);
            g_eng[d] = NULL;
        }
    }
    diag_sanitize_reset();
    diag_state_unlock();
}

/* ---------------------------------------------------------------- engines */

static uint64_t lane_fit(const lane *l, uint64_t ready, uint64_t dur)
{
    uint64_t t = ready > l->floor ? ready : l->floor;
    for (size_t i = 0; i < l->n; i++) {
        if (l->e[i] <= t) {
            continue;
        }
        if (l->s[i] >= t + dur) {
            break; /* fits in the gap before interval i */
        }
        t = l->e[i];
    }
    return t;
}

static void lane_insert(lane *l, uint64_t s, uint64_t e)
{
    if (e <= s) {
        return;
    }
    if (l->n == LANE_MAX) { /* drop the oldest; nothing may go before its end any more */
        if (l->e[0] > l->floor) {
            l->floor = l->e[0];
        }
        memmove(l->s, l->s + 1, (LANE_MAX - 1) * sizeof l->s[0]);
        memmove(l->e, l->e + 1, (LANE_MAX - 1) * sizeof l->e[0]);
        l->n--;
    }
    size_t i = l->n;
    while (i > 0 && l->s[i - 1] > s) {
        i--;
    }
    memmove(l->s + i + 1, l->s + i, (l->n - i) * sizeof l->s[0]);
    memmove(l->e + i + 1, l->e + i, (l->n - i) * sizeof l->e[0]);
    l->s[i] = s;
    l->e[i] = e;
    l->n++;
}

static engines *device_engines(int32_t device, const diag_model *m)
{
    if (device < 0 || device >= MOCK_MAX_DEVICES) {
        return NULL;
    }
    if (g_eng[device] == NULL) {
        engines *e = calloc(1, sizeof *e);
        if (e == NULL) {
            return NULL;
        }
        e->compute = calloc(m->compute_lanes, sizeof(lane));
        if (e->compute == NULL) {
            free(e);
            return NULL;
        }
        g_eng[device] = e;
    }
    return g_eng[device];
}

/* Reserves `dur` on the engine the task uses (none: starts when ready). */
static uint64_t reserve(int32_t device, mock_task_kind kind, mock_link link, uint64_t ready, uint64_t dur)
{
    const diag_model *m = &diag_config_get()->model;
    engines *e = device_engines(device, m);
    if (e == NULL || dur == 0) {
        return ready;
    }
    lane *l = NULL;
    switch (kind) {
    case MOCK_TASK_COPY:
        l = link == MOCK_LINK_H2D   ? &e->copy[ENG_H2D]
            : link == MOCK_LINK_D2H ? &e->copy[ENG_D2H]
            : link == MOCK_LINK_PEER ? &e->copy[ENG_PEER]
            : link == MOCK_LINK_D2D ? &e->copy[ENG_HBM]
                                    : NULL; /* host to host: the CPU, no engine */
        break;
    case MOCK_TASK_MEMSET:
    case MOCK_TASK_VALUE:
        l = link == MOCK_LINK_H2H ? NULL : &e->copy[ENG_HBM];
        break;
    case MOCK_TASK_KERNEL: {
        uint64_t best = UINT64_MAX;
        for (uint32_t i = 0; i < m->compute_lanes; i++) {
            uint64_t t = lane_fit(&e->compute[i], ready, dur);
            if (t < best) {
                best = t;
                l = &e->compute[i];
            }
        }
        break;
    }
    default:
        break;
    }
    if (l == NULL) {
        return ready;
    }
    uint64_t start = lane_fit(l, ready, dur);
    lane_insert(l, start, start + dur);
    return start;
}

uint64_t diag_timing_duration(const diag_model *m, mock_task_kind kind, mock_link link, bool pageable, uint64_t bytes,
                              uint64_t cost_ns)
{
    double gbps;
    switch (kind) {
    case MOCK_TASK_COPY:
        switch (link) {
        case MOCK_LINK_H2D:
            gbps = pageable ? m->pageable_gbps : m->h2d_gbps;
            break;
        case MOCK_LINK_D2H:
            gbps = pageable ? m->pageable_gbps : m->d2h_gbps;
            break;
        case MOCK_LINK_D2D:
            gbps = m->hbm_gbps / 2.0; /* read and write through the same HBM */
            break;
        case MOCK_LINK_PEER:
            gbps = m->peer_gbps;
            break;
        default:
            gbps = m->host_gbps;
            break;
        }
        return m->latency_ns + (uint64_t)((double)bytes / gbps);
    case MOCK_TASK_MEMSET:
    case MOCK_TASK_VALUE:
        return m->latency_ns + (uint64_t)((double)bytes / (link == MOCK_LINK_H2H ? m->host_gbps : m->hbm_gbps));
    case MOCK_TASK_KERNEL:
        return m->latency_ns + (cost_ns != 0 ? cost_ns : m->kernel_ns);
    case MOCK_TASK_OTHER:
        return m->latency_ns;
    default: /* events, waits, markers: ordering only; callbacks: measured */
        return 0;
    }
}

/* ------------------------------------------------------------- host time */

static bool paced(void)
{
    return diag_config_get()->timing == DIAG_TIMING_PACED;
}

/* Modeled time of the wall clock (paced mode). */
static uint64_t wall_model_now(void)
{
    return (uint64_t)((double)diag_wall_ns() / diag_config_get()->model.pace);
}

static void raise_frontier(uint64_t vt)
{
    uint64_t cur = atomic_load(&g_host_frontier);
    while (vt > cur && !atomic_compare_exchange_weak(&g_host_frontier, &cur, vt)) {
    }
}

uint64_t diag_host_now(void)
{
    if (diag_config_get()->timing == DIAG_TIMING_REAL) {
        return diag_wall_ns();
    }
    if (!tls_vt_set) {
        tls_vt = atomic_load(&g_host_frontier);
        tls_vt_set = true;
    }
    if (paced()) {
        uint64_t w = wall_model_now();
        if (w > tls_vt) {
            tls_vt = w;
        }
    }
    return tls_vt;
}

/* Sleeps until the wall clock reaches modeled time `vt` (paced mode). */
static void sleep_until_model(uint64_t vt)
{
    const diag_model *m = &diag_config_get()->model;
    uint64_t target = (uint64_t)((double)vt * m->pace);
    for (;;) {
        uint64_t now = diag_wall_ns();
        if (now + 20000 >= target) { /* within 20 us: close enough */
            return;
        }
        uint64_t left = target - now;
        struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        nanosleep(&ts, NULL);
    }
}

static void host_set(uint64_t vt)
{
    (void)diag_host_now();
    if (vt > tls_vt) {
        tls_vt = vt;
    }
    raise_frontier(tls_vt);
    if (paced()) {
        sleep_until_model(tls_vt);
    }
}

void diag_timing_host_cost(uint64_t cost_ns, uint64_t *start, uint64_t *end)
{
    uint64_t t = diag_host_now();
    *start = t;
    *end = t + cost_ns;
    host_set(t + cost_ns);
}

/* --------------------------------------------------------------- schedule */

/* Schedules t (DIAG_STATE held, its stream state ds): start, end, the stream's
 * cursor, the event record it makes. */
static void schedule(diag_task *t, diag_stream *ds)
{
    const diag_model *m = &diag_config_get()->model;
    uint64_t ready = t->submit_vt > ds->cursor ? t->submit_vt : ds->cursor;
    if (t->dep != NULL && t->dep->vt > ready) {
        ready = t->dep->vt;
    }
    uint64_t dur = diag_timing_duration(m, t->kind, t->link, t->pageable, t->bytes, t->cost_ns);
    t->start_vt = reserve(t->device, t->kind, t->link, ready, dur);
    t->end_vt = t->start_vt + dur;
    t->scheduled = true;
    if (t->kind == MOCK_TASK_CALLBACK) {
        ds->open = true; /* its end is known when it returns */
    } else {
        ds->cursor = t->end_vt;
    }
    if (t->node != NULL && t->kind != MOCK_TASK_CALLBACK) {
        t->node->vt = t->end_vt;
        t->node->resolved = true;
    }
}

void diag_timing_submit(diag_task *t, diag_stream *ds)
{
    const diag_model *m = &diag_config_get()->model;
    t->timed = true;
    /* host time of the call, then the task is visible to the device */
    t->submit_vt = diag_host_now() + m->launch_ns;
    tls_vt = t->submit_vt;
    raise_frontier(tls_vt);
    bool dep_open = t->dep != NULL && !t->dep->resolved;
    if (ds->open || ds->deferred > 0 || dep_open) {
        t->deferred = true;
        ds->deferred++;
    } else {
        schedule(t, ds);
    }
}

void diag_timing_drop(diag_task *t)
{
    diag_state_lock();
    diag_stream *ds = stream_find(t->stream);
    if (ds != NULL && t->deferred && !t->scheduled && ds->deferred > 0) {
        ds->deferred--;
    }
    if (ds != NULL && t->kind == MOCK_TASK_CALLBACK) {
        ds->open = false;
    }
    diag_state_unlock();
}

/* Schedules a deferred task on its worker (its predecessors are all scheduled). */
static void schedule_deferred(diag_task *t)
{
    diag_state_lock();
    diag_stream *ds = stream_find(t->stream);
    if (ds != NULL && !t->scheduled) {
        if (ds->deferred > 0) {
            ds->deferred--;
        }
        schedule(t, ds);
    }
    diag_state_unlock();
}

void diag_timing_begin(diag_task *t)
{
    /* a deferred wait is scheduled at its end: the record it waits for may only be
     * resolved once the wait has seen it complete */
    if (t->deferred && !(t->kind == MOCK_TASK_EVENT_WAIT && t->dep != NULL)) {
        schedule_deferred(t);
    }
    if (t->kind == MOCK_TASK_CALLBACK) {
        t->real_begin = diag_wall_ns();
    }
    if (paced() && t->scheduled) {
        sleep_until_model(t->start_vt);
    }
}

void diag_timing_end(diag_task *t, bool skipped)
{
    if (!t->scheduled) {
        schedule_deferred(t);
    }
    if (t->kind == MOCK_TASK_CALLBACK) {
        /* a host callback takes its real time (in modeled units when paced) */
        uint64_t real = skipped ? 0 : diag_wall_ns() - t->real_begin;
        uint64_t dur = paced() ? (uint64_t)((double)real / diag_config_get()->model.pace) : real;
        diag_state_lock();
        t->end_vt = t->start_vt + dur;
        diag_stream *ds = stream_find(t->stream);
        if (ds != NULL) {
            ds->open = false;
            if (t->end_vt > ds->cursor) {
                ds->cursor = t->end_vt;
            }
        }
        diag_state_unlock();
    } else if (paced() && !skipped) {
        sleep_until_model(t->end_vt);
    }
}

/* ---------------------------------------------------------------- host ops */

void diag_timing_host_op(const mock_task_desc *d, int32_t device, uint64_t *start, uint64_t *end)
{
    const diag_model *m = &diag_config_get()->model;
    uint64_t dur = diag_timing_duration(m, d->kind, d->link, d->pageable, d->bytes, d->cost_ns);
    uint64_t ready = diag_host_now();
    diag_state_lock();
    uint64_t s = reserve(device, d->kind, d->link, ready, dur);
    diag_state_unlock();
    *start = s;
    *end = s + dur;
    /* the calling thread waits for it, like a synchronization */
    host_set(s + dur + diag_config_get()->model.sync_ns);
}

static void join_host(uint64_t vt)
{
    uint64_t now = diag_host_now();
    if (vt > now) {
        host_set(vt + diag_config_get()->model.sync_ns);
    }
}

void diag_timing_sync_stream(mock_stream *s)
{
    uint64_t vt = diag_timing_stream_end(s);
    join_host(vt);
}

void diag_timing_sync_event(const void *event)
{
    diag_state_lock();
    diag_event_node *n = diag_event_latest(event);
    uint64_t vt = n != NULL && n->resolved ? n->vt : 0;
    diag_event_put(n);
    diag_state_unlock();
    join_host(vt);
}

static void max_cursor(diag_stream *ds, void *arg)
{
    uint64_t *vt = arg;
    if (ds->cursor > *vt) {
        *vt = ds->cursor;
    }
}

void diag_timing_sync_context(mock_context *ctx)
{
    uint64_t vt = 0;
    diag_state_lock();
    diag_streams_each(ctx, max_cursor, &vt);
    diag_state_unlock();
    join_host(vt);
}

uint64_t diag_timing_stream_end(mock_stream *s)
{
    diag_state_lock();
    diag_stream *ds = stream_find(s);
    uint64_t vt = ds != NULL ? ds->cursor : 0;
    diag_state_unlock();
    return vt;
}
