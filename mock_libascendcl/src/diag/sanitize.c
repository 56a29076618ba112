/*
 * sanitize.c - the race sanitizer (README "Race sanitizer"), on with
 * ASCEND_MOCK_SANITIZE.
 *
 * Happens-before with vector clocks. The participants are the streams and the host
 * (one participant for all host threads: they synchronize among themselves in ways
 * the runtime cannot see, so a synchronization made by any host thread orders the
 * whole host after it). Every participant has a vector clock:
 *  - a task submitted to stream S: S's clock joins the host's (what the host did
 *    before the call happens before the task), then S ticks: the task's epoch is
 *    (S, S's own component);
 *  - an event record on S keeps a copy of S's clock; a wait for it (a stream wait
 *    task, or a wait that queued nothing because the record had completed) joins
 *    that copy into the waiting stream's clock;
 *  - a host synchronization (stream, event, device, a query that saw completion, a
 *    copy of pageable memory) joins the stream's / record's clock into the host's;
 *  - a host callback or host function is a task of its stream; what its code does
 *    (copies, submissions) happens after the tasks before it on that stream.
 * Every task's memory accesses (copies, memsets, value operations, kernel
 * arguments with their declared read/write modes) are checked against a shadow of
 * the accessed ranges that keeps, per byte range, the last write and the reads
 * since (with their epochs): an earlier access of another participant that is not
 * ordered before the new one, where one of the two writes, is a race. Host
 * accesses (synchronous copies, aclmockSanitizerHostAccess) are checked the same
 * way against the host's clock, and freeing memory checks that no task that may
 * still touch it is pending. Host memory freed by aclrtFreeHost is remembered for a
 * while, so a task touching it later is reported too.
 *
 * Everything runs under MOCK_LOCK_DIAG_STATE when a task is submitted (not when it
 * runs), so the verdicts do not depend on the host scheduler: a race is reported
 * even when the two tasks happened not to overlap in this run.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "diag/diag_private.h"

#define HOST_PID 1u
#define SEG_READS 4
#define INFO_RING 16384u
#define MAX_TOMBS 256
#define MAX_REPORTS 1024u
#define MAX_PRINTED_SIGS 256u

/* ----------------------------------------------------------- vector clocks */

typedef struct vc_ent {
    uint32_t pid;
    uint32_t t;
} vc_ent;

typedef struct vclock {
    uint32_t n, cap;
    vc_ent *e;
} vclock;

void *diag_vc_new(void)
{
    return calloc(1, sizeof(vclock));
}

void diag_vc_free(void *p)
{
    vclock *v = p;
    if (v != NULL) {
        free(v->e);
        free(v);
    }
}

static uint32_t vc_get(const vclock *v, uint32_t pid)
{
    for (uint32_t i = 0; v != NULL && i < v->n; i++) {
        if (v->e[i].pid == pid) {
            return v->e[i].t;
        }
    }
    return 0;
}

static void vc_set(vclock *v, uint32_t pid, uint32_t t)
{
    for (uint32_t i = 0; i < v->n; i++) {
        if (v->e[i].pid == pid) {
            v->e[i].t = t;
            return;
        }
    }
    if (v->n == v->cap) {
        uint32_t nc = v->cap ? v->cap * 2 : 4;
        vc_ent *ne = realloc(v->e, nc * sizeof *ne);
        if (ne == NULL) {
            return; /* out of memory: the component is lost (fewer orderings known) */
        }
        v->e = ne;
        v->cap = nc;
    }
    v->e[v->n++] = (vc_ent){pid, t};
}

static void vc_join(vclock *dst, const vclock *src)
{
    for (uint32_t i = 0; src != NULL && i < src->n; i++) {
        if (vc_get(dst, src->e[i].pid) < src->e[i].t) {
            vc_set(dst, src->e[i].pid, src->e[i].t);
        }
    }
}

static vclock *vc_copy(const vclock *src)
{
    vclock *v = diag_vc_new();
    if (v != NULL) {
        vc_join(v, src);
    }
    return v;
}

static uint32_t vc_tick(vclock *v, uint32_t pid)
{
    uint32_t t = vc_get(v, pid) + 1;
    vc_set(v, pid, t);
    return t;
}

/* ------------------------------------------------------------------ state */

/* One access in the shadow: who (participant, its clock) and which task. */
typedef struct acc {
    uint32_t pid;
    uint32_t t;
    uint64_t task;
} acc;

typedef struct seg {
    uintptr_t lo, hi;
    acc w;      /* last write, pid 0 = none */
    uint32_t nr;
    acc r[SEG_READS]; /* reads since that write, one per participant */
} seg;

typedef struct task_info {
    uint64_t id;
    int32_t device;
    int32_t stream_id;
    void *stream;
    uint32_t mode;
    char name[64];
    char *tag;
} task_info;

typedef struct tomb {
    uintptr_t lo, hi;
    uint64_t task; /* the free */
} tomb;

struct diag_report {
    struct diag_report *next;
    aclmockSanitizerReport r;
};

/* under DIAG_STATE */
static vclock g_host_vc;
static seg *g_segs;
static size_t g_nsegs, g_capsegs;
static task_info *g_info; /* INFO_RING entries, allocated on first use */
static tomb g_tombs[MAX_TOMBS];
static size_t g_ntombs;

/* reports (under DIAG_STATE too, taken again by diag_sanitize_emit) */
static aclmockSanitizerReport *g_reports;
static size_t g_nreports;
static _Atomic uint64_t g_report_count;
static uint64_t g_printed_sigs[MAX_PRINTED_SIGS];
static size_t g_nprinted;
static atomic_bool g_no_stderr; /* aclmockSanitizerSetStderr(0): a binding reports them */

/* Inside a host callback / host function running on a stream worker: the host code
 * acts as that task (its stream's clock at submission, its epoch). */
static _Thread_local vclock *tls_cb_vc;
static _Thread_local uint32_t tls_cb_pid, tls_cb_t;

bool diag_sanitizing(void)
{
    return diag_config_get()->sanitize != DIAG_SANITIZE_OFF;
}

void diag_sanitize_reset(void)
{
    free(g_host_vc.e);
    memset(&g_host_vc, 0, sizeof g_host_vc);
    free(g_segs);
    g_segs = NULL;
    g_nsegs = g_capsegs = 0;
    g_ntombs = 0;
    if (g_info != NULL) {
        for (size_t i = 0; i < INFO_RING; i++) {
            free(g_info[i].tag);
        }
        free(g_info);
        g_info = NULL;
    }
}

static void info_put(uint64_t id, int32_t device, int32_t stream_id, void *stream, const char *name, const char *tag)
{
    if (g_info == NULL) {
        g_info = calloc(INFO_RING, sizeof *g_info);
        if (g_info == NULL) {
            return;
        }
    }
    task_info *i = &g_info[id % INFO_RING];
    free(i->tag);
    i->id = id;
    i->device = device;
    i->stream_id = stream_id;
    i->stream = stream;
    snprintf(i->name, sizeof i->name, "%s", name != NULL ? name : "?");
    i->tag = tag != NULL && tag[0] != '\0' ? strdup(tag) : NULL;
}

static void info_get(uint64_t id, uint32_t mode, aclmockSanitizerAccess *out)
{
    memset(out, 0, sizeof *out);
    out->taskId = id;
    out->access = mode;
    out->device = -1;
    out->streamId = -1;
    const task_info *i = g_info != NULL ? &g_info[id % INFO_RING] : NULL;
    if (i != NULL && i->id == id) {
        out->device = i->device;
        out->streamId = i->stream_id;
        out->stream = i->stream;
        snprintf(out->name, sizeof out->name, "%s", i->name);
        snprintf(out->tag, sizeof out->tag, "%s", i->tag != NULL ? i->tag : "");
    } else {
        snprintf(out->name, sizeof out->name, "task %llu (details no longer kept)", (unsigned long long)id);
    }
}

/* ----------------------------------------------------------------- reports */

static const char *mode_word(uint32_t mode)
{
    return (mode & MOCK_ACCESS_WRITE) ? "write" : "read";
}

static void describe(char *buf, size_t len, const aclmockSanitizerAccess *a)
{
    char where[64];
    if (a->streamId < 0) {
        snprintf(where, sizeof where, "the host");
    } else {
        snprintf(where, sizeof where, "stream %d of device %d", a->streamId, a->device);
    }
    snprintf(buf, len, "%s by %s %llu \"%s\" on %s%s%s%s", mode_word(a->access),
             a->streamId < 0 ? "host operation" : "task", (unsigned long long)a->taskId, a->name, where,
             a->tag[0] ? " [" : "", a->tag, a->tag[0] ? "]" : "");
}

/* Adds a report (kind, the bytes [lo, hi), the later access `cur`, the earlier `prev`)
 * unless the same pair of accesses is already in *out: then its range grows. */
static void add_report(diag_report **out, uint32_t kind, uintptr_t lo, uintptr_t hi, uint64_t cur_task, uint32_t cur_mode,
                       uint64_t prev_task, uint32_t prev_mode)
{
    for (diag_report *r = *out; r != NULL; r = r->next) {
        if (r->r.kind == kind && r->r.current.taskId == cur_task && r->r.previous.taskId == prev_task) {
            uintptr_t a = r->r.address < lo ? r->r.address : lo;
            uintptr_t b = r->r.address + r->r.size > hi ? r->r.address + r->r.size : hi;
            r->r.address = a;
            r->r.size = b - a;
            r->r.previous.access |= prev_mode;
            return;
        }
    }
    diag_report *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return;
    }
    r->r.kind = kind;
    r->r.address = lo;
    r->r.size = hi - lo;
    info_get(cur_task, cur_mode, &r->r.current);
    info_get(prev_task, prev_mode, &r->r.previous);
    r->r.device = r->r.current.device >= 0 ? r->r.current.device : r->r.previous.device;
    r->next = *out;
    *out = r;
}

static void finish_message(aclmockSanitizerReport *r)
{
    char cur[512], prev[512];
    describe(cur, sizeof cur, &r->current);
    describe(prev, sizeof prev, &r->previous);
    const char *what = r->kind == ACLMOCK_SANITIZER_RACE        ? "race between two streams"
                       : r->kind == ACLMOCK_SANITIZER_HOST_RACE ? "host access while a task is pending"
                                                                : "use of freed memory";
    const char *why = r->kind == ACLMOCK_SANITIZER_USE_AFTER_FREE
                          ? "the task may run after the memory is freed (synchronize before freeing, or do not "
                            "use memory after freeing it)"
                          : "nothing orders them (no event record/wait, stream wait or synchronization between them)";
    snprintf(r->message, sizeof r->message, "%s: %llu bytes at %p: %s, and %s: %s", what,
             (unsigned long long)r->size, (void *)(uintptr_t)r->address, cur, prev, why);
}

static uint64_t signature(const aclmockSanitizerReport *r)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ r->kind;
    const char *parts[4] = {r->current.name, r->current.tag, r->previous.name, r->previous.tag};
    for (int i = 0; i < 4; i++) {
        for (const unsigned char *p = (const unsigned char *)parts[i]; *p != '\0'; p++) {
            h = (h ^ *p) * 0x100000001b3ULL;
        }
        h = (h ^ 0xff) * 0x100000001b3ULL;
    }
    h ^= (uint64_t)(uint32_t)r->current.streamId << 32 | (uint32_t)r->previous.streamId;
    return h;
}

size_t diag_sanitize_emit(diag_report *list)
{
    size_t n = 0;
    int mode = diag_config_get()->sanitize;
    while (list != NULL) {
        diag_report *r = list;
        list = r->next;
        finish_message(&r->r);
        atomic_fetch_add(&g_report_count, 1);
        bool print = true;
        diag_state_lock();
        if (g_nreports < MAX_REPORTS) {
            if (g_reports == NULL) {
                g_reports = calloc(MAX_REPORTS, sizeof *g_reports);
            }
            if (g_reports != NULL) {
                g_reports[g_nreports++] = r->r;
            }
        }
        uint64_t sig = signature(&r->r); /* print each kind of race once */
        for (size_t i = 0; i < g_nprinted && print; i++) {
            print = g_printed_sigs[i] != sig;
        }
        if (print && g_nprinted < MAX_PRINTED_SIGS) {
            g_printed_sigs[g_nprinted++] = sig;
        }
        diag_state_unlock();
        if (print && (!atomic_load(&g_no_stderr) || mode == DIAG_SANITIZE_ABORT)) {
            fprintf(stderr, "mock_libascendcl: race sanitizer: %s\n", r->r.message);
            fflush(stderr);
        }
        diag_log(r->r.device, DIAG_LOG_ERROR, "race sanitizer", 0, "%s", r->r.message);
        if (mode == DIAG_SANITIZE_ABORT) {
            fprintf(stderr, "mock_libascendcl: race sanitizer: aborting (ASCEND_MOCK_SANITIZE=abort)\n");
            fflush(stderr);
            abort();
        }
        free(r);
        n++;
    }
    return n;
}

/* ------------------------------------------------------------------ shadow */

static bool seg_grow(void)
{
    if (g_nsegs < g_capsegs) {
        return true;
    }
    size_t nc = g_capsegs ? g_capsegs * 2 : 256;
    seg *ns = realloc(g_segs, nc * sizeof *ns);
    if (ns == NULL) {
        return false;
    }
    g_segs = ns;
    g_capsegs = nc;
    return true;
}

static bool seg_insert(size_t i, seg s)
{
    if (!seg_grow()) {
        return false;
    }
    memmove(g_segs + i + 1, g_segs + i, (g_nsegs - i) * sizeof *g_segs);
    g_segs[i] = s;
    g_nsegs++;
    return true;
}

/* Splits segment i at `at` (lo < at < hi): i keeps [lo, at), i+1 gets [at, hi). */
static bool seg_split(size_t i, uintptr_t at)
{
    seg right = g_segs[i];
    right.lo = at;
    if (!seg_insert(i + 1, right)) {
        return false;
    }
    g_segs[i].hi = at;
    return true;
}

/* The first segment whose hi > p. */
static size_t seg_find(uintptr_t p)
{
    size_t lo = 0, hi = g_nsegs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_segs[mid].hi <= p) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static bool ordered(const acc *a, const vclock *vc)
{
    return vc_get(vc, a->pid) >= a->t;
}

static bool same_state(const seg *a, const seg *b)
{
    if (a->hi != b->lo || a->w.pid != b->w.pid || a->w.t != b->w.t || a->w.task != b->w.task || a->nr != b->nr) {
        return false;
    }
    for (uint32_t i = 0; i < a->nr; i++) {
        if (a->r[i].pid != b->r[i].pid || a->r[i].t != b->r[i].t || a->r[i].task != b->r[i].task) {
            return false;
        }
    }
    return true;
}

/* Checks one access against the segment and records it there. */
static void seg_access(seg *s, uint32_t mode, const acc *me, const vclock *vc, uint32_t kind, diag_report **out)
{
    if (s->w.pid != 0 && s->w.pid != me->pid && !ordered(&s->w, vc)) {
        add_report(out, kind, s->lo, s->hi, me->task, mode, s->w.task, MOCK_ACCESS_WRITE);
    }
    if (mode & MOCK_ACCESS_WRITE) {
        for (uint32_t i = 0; i < s->nr; i++) {
            if (s->r[i].pid != me->pid && !ordered(&s->r[i], vc)) {
                add_report(out, kind, s->lo, s->hi, me->task, mode, s->r[i].task, MOCK_ACCESS_READ);
            }
        }
        s->w = *me;
        s->nr = 0;
        return;
    }
    for (uint32_t i = 0; i < s->nr; i++) {
        if (s->r[i].pid == me->pid) {
            s->r[i] = *me;
            return;
        }
    }
    if (s->nr == SEG_READS) { /* forget the oldest read */
        memmove(s->r, s->r + 1, (SEG_READS - 1) * sizeof s->r[0]);
        s->nr--;
    }
    s->r[s->nr++] = *me;
}

/* Checks and records [lo, hi) accessed with `mode` by `me` whose clock is vc. */
static void shadow_access(uintptr_t lo, uintptr_t hi, uint32_t mode, const acc *me, const vclock *vc, uint32_t kind,
                          diag_report **out)
{
    if (hi <= lo) {
        return;
    }
    size_t i = seg_find(lo);
    size_t first = i;
    uintptr_t cur = lo;
    while (cur < hi) {
        if (i < g_nsegs && g_segs[i].lo <= cur) {
            if (g_segs[i].lo < cur) {
                if (!seg_split(i, cur)) {
                    return;
                }
                i++;
                first = i;
            }
            if (g_segs[i].hi > hi && !seg_split(i, hi)) {
                return;
            }
        } else {
            uintptr_t end = (i < g_nsegs && g_segs[i].lo < hi) ? g_segs[i].lo : hi;
            if (!seg_insert(i, (seg){.lo = cur, .hi = end})) {
                return;
            }
        }
        seg_access(&g_segs[i], mode, me, vc, kind, out);
        cur = g_segs[i].hi;
        i++;
    }
    /* merge neighbours left in the same state (a write leaves the range uniform) */
    size_t from = first > 0 ? first - 1 : 0;
    size_t to = i < g_nsegs ? i : g_nsegs - 1;
    for (size_t k = from; k < to && k + 1 < g_nsegs;) {
        if (same_state(&g_segs[k], &g_segs[k + 1])) {
            g_segs[k].hi = g_segs[k + 1].hi;
            memmove(g_segs + k + 1, g_segs + k + 2, (g_nsegs - k - 2) * sizeof *g_segs);
            g_nsegs--;
            to--;
        } else {
            k++;
        }
    }
}

/* Freed host memory touched again. */
static void check_tombs(uintptr_t lo, uintptr_t hi, uint64_t task, uint32_t mode, diag_report **out)
{
    for (size_t k = 0; k < g_ntombs; k++) {
        if (g_tombs[k].lo < hi && lo < g_tombs[k].hi) {
            uintptr_t a = lo > g_tombs[k].lo ? lo : g_tombs[k].lo;
            uintptr_t b = hi < g_tombs[k].hi ? hi : g_tombs[k].hi;
            add_report(out, ACLMOCK_SANITIZER_USE_AFTER_FREE, a, b, task, mode, g_tombs[k].task, MOCK_ACCESS_WRITE);
        }
    }
}

/* ----------------------------------------------------------- entry points */

/* The calling thread's clock and epoch as the host (or as the callback it runs). */
static const vclock *host_clock(acc *me, uint64_t task)
{
    if (tls_cb_vc != NULL) {
        *me = (acc){tls_cb_pid, tls_cb_t, task};
        return tls_cb_vc;
    }
    uint32_t t = vc_tick(&g_host_vc, HOST_PID);
    *me = (acc){HOST_PID, t, task};
    return &g_host_vc;
}

void diag_sanitize_task(diag_task *t, diag_stream *ds, const mock_task_desc *d, diag_report **out)
{
    vclock *vc = diag_stream_vc(ds);
    if (vc == NULL) {
        return;
    }
    uint32_t pid = diag_stream_pid(ds);
    /* program order: what the submitting host (or callback) did happens before */
    vc_join(vc, tls_cb_vc != NULL ? tls_cb_vc : &g_host_vc);
    if (t->dep != NULL) {
        vc_join(vc, t->dep->vc);
    }
    uint32_t tick = vc_tick(vc, pid);
    info_put(t->id, t->device, t->stream_id, t->stream, t->name, t->tag);
    if (t->node != NULL) {
        diag_vc_free(t->node->vc);
        t->node->vc = vc_copy(vc);
    }
    if (t->kind == MOCK_TASK_CALLBACK) {
        t->cb_vc = vc_copy(vc);
        t->cb_pid = pid;
        t->cb_t = tick;
    }
    acc me = {pid, tick, t->id};
    for (size_t k = 0; k < d->naccess; k++) {
        if (d->kind == MOCK_TASK_VALUE && d->access[k].mode == MOCK_ACCESS_READ) {
            /* aclrtValueWait is a synchronization: it reads the flag others write to
             * release it; not a racing read */
            continue;
        }
        uintptr_t lo = (uintptr_t)d->access[k].ptr;
        uintptr_t hi = lo + d->access[k].size;
        check_tombs(lo, hi, t->id, d->access[k].mode, out);
        shadow_access(lo, hi, d->access[k].mode, &me, vc, ACLMOCK_SANITIZER_RACE, out);
    }
    if (*out != NULL && diag_config_get()->sanitize == DIAG_SANITIZE_FAIL) {
        /* the closest public code for a task that faulted on the device */
        t->fail = ACL_ERROR_RT_AICORE_EXCEPTION;
    }
}

void diag_sanitize_host(uint64_t task_id, const char *name, const char *tag, int32_t device, const mock_access *a,
                        size_t n, diag_report **out)
{
    acc me;
    const vclock *vc = host_clock(&me, task_id);
    info_put(task_id, device, -1, NULL, name, tag);
    for (size_t k = 0; k < n; k++) {
        uintptr_t lo = (uintptr_t)a[k].ptr;
        uintptr_t hi = lo + a[k].size;
        check_tombs(lo, hi, task_id, a[k].mode, out);
        shadow_access(lo, hi, a[k].mode, &me, vc, ACLMOCK_SANITIZER_HOST_RACE, out);
    }
}

void diag_sanitize_free(const void *ptr, size_t size, bool host_pinned, const char *tag, diag_report **out)
{
    uint64_t id = diag_next_task_id();
    acc me;
    const vclock *vc = host_clock(&me, id);
    info_put(id, -1, -1, NULL, host_pinned ? "aclrtFreeHost" : "aclrtFree", tag);
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    size_t i = seg_find(lo);
    size_t j = i;
    while (j < g_nsegs && g_segs[j].lo < hi) {
        seg *s = &g_segs[j];
        uintptr_t a = s->lo > lo ? s->lo : lo, b = s->hi < hi ? s->hi : hi;
        if (s->w.pid != 0 && s->w.pid != me.pid && !ordered(&s->w, vc)) {
            add_report(out, ACLMOCK_SANITIZER_USE_AFTER_FREE, a, b, id, MOCK_ACCESS_WRITE, s->w.task, MOCK_ACCESS_WRITE);
        }
        for (uint32_t k = 0; k < s->nr; k++) {
            if (s->r[k].pid != me.pid && !ordered(&s->r[k], vc)) {
                add_report(out, ACLMOCK_SANITIZER_USE_AFTER_FREE, a, b, id, MOCK_ACCESS_WRITE, s->r[k].task,
                           MOCK_ACCESS_READ);
            }
        }
        j++;
    }
    /* forget the range: split the segments at its edges, drop what is inside */
    if (i < g_nsegs && g_segs[i].lo < lo && g_segs[i].hi > lo && seg_split(i, lo)) {
        i++;
    }
    j = i;
    while (j < g_nsegs && g_segs[j].lo < hi) {
        if (g_segs[j].hi > hi && !seg_split(j, hi)) {
            break;
        }
        j++;
    }
    memmove(g_segs + i, g_segs + j, (g_nsegs - j) * sizeof *g_segs);
    g_nsegs -= j - i;
    if (host_pinned) { /* the bytes become plain heap memory: remember them */
        if (g_ntombs == MAX_TOMBS) {
            memmove(g_tombs, g_tombs + 1, (MAX_TOMBS - 1) * sizeof g_tombs[0]);
            g_ntombs--;
        }
        g_tombs[g_ntombs++] = (tomb){lo, hi, id};
    }
}

void diag_sanitize_alloc(const void *ptr, size_t size)
{
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    for (size_t k = 0; k < g_ntombs;) {
        if (g_tombs[k].lo < hi && lo < g_tombs[k].hi) {
            g_tombs[k] = g_tombs[--g_ntombs];
        } else {
            k++;
        }
    }
}

void diag_sanitize_sync_stream(diag_stream *ds)
{
    vclock *vc = diag_stream_vc(ds);
    vc_join(tls_cb_vc != NULL ? tls_cb_vc : &g_host_vc, vc);
}

void diag_sanitize_sync_node(diag_event_node *n)
{
    if (n->vc != NULL) {
        vc_join(tls_cb_vc != NULL ? tls_cb_vc : &g_host_vc, n->vc);
    }
}

/* A host callback starts / ends on the calling thread (a stream worker). */
void diag_sanitize_callback_enter(diag_task *t)
{
    tls_cb_vc = t->cb_vc;
    tls_cb_pid = t->cb_pid;
    tls_cb_t = t->cb_t;
}

void diag_sanitize_callback_leave(void)
{
    tls_cb_vc = NULL;
}

/* ------------------------------------------------------------------ the API */

uint64_t aclmockSanitizerGetReportCount(void)
{
    return atomic_load(&g_report_count);
}

size_t aclmockSanitizerGetReports(aclmockSanitizerReport *out, size_t max, size_t first)
{
    if (out == NULL || max == 0) {
        return 0;
    }
    diag_state_lock();
    size_t n = 0;
    for (size_t i = first; i < g_nreports && n < max; i++) {
        out[n++] = g_reports[i];
    }
    diag_state_unlock();
    return n;
}

void aclmockSanitizerClearReports(void)
{
    diag_state_lock();
    g_nreports = 0;
    g_nprinted = 0;
    atomic_store(&g_report_count, 0);
    diag_state_unlock();
}

int aclmockSanitizerSetStderr(int on)
{
    return atomic_exchange(&g_no_stderr, on == 0) ? 0 : 1;
}

int aclmockSanitizerGetMode(void)
{
    return diag_config_get()->sanitize;
}
