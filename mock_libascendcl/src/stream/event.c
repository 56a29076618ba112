/*
 * event.c - events as versioned records with timestamps (acl_abi.md §5.5).
 *
 * Every aclrtRecordEvent bumps the event's record sequence (`rec_seq`) at
 * submission and enqueues a task; when the stream's worker reaches it the
 * record "completes": `done_seq` advances to that sequence and, for
 * ACL_EVENT_TIME_LINE events, the timestamp is taken at that moment. Query,
 * synchronize and elapsed time follow the *latest* record: the event is
 * complete when done_seq >= rec_seq. aclrtStreamWaitEvent captures rec_seq at
 * the time of the call and the waiting stream's worker blocks until that
 * record has completed (later re-records do not extend the wait).
 *
 * IPC events (ACL_EVENT_IPC, acl_next_semantics.md §3.3) keep the two sequences in a
 * process-shared slot (core/shm.c) instead, so that a process that opened the event
 * with aclrtIpcOpenEventHandle (src/ipc/) records and waits on the same state: a record
 * bumps the shared rec_seq at submission and raises done_seq when it runs; a wait takes
 * rec_seq at the time of the call as its target and sleeps on done_seq (shared futex).
 * So a wait on an IPC event never recorded, or whose latest record already ran, ends at
 * once (D-EVT 4.4). Such events refuse reset, the plain queries, timestamps and ids.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "stream/stream_private.h"

#define EVENT_MAGIC 0x45564e5445564e54ull /* "EVNTEVNT" */
/* Max events per device on A2/A3/950 (doc 07_event_management.md, §5.5). */
#define EVENT_MAX_PER_DEVICE 65536u
/* aclrtCreateEvent == runtime RT_EVENT_DEFAULT = STREAM_MARK|DDSYNC|TIME_LINE
 * (acl_abi.md §3.2 event-flag facts). */
#define EVENT_DEFAULT_FLAGS 0xEu
#define EVENT_DDSYNC 0x4u /* runtime RT_EVENT_DDSYNC (no ACL macro) */
/* Flags that make an event usable with aclrtStreamWaitEvent/aclrtResetEvent
 * (doc: "without ACL_EVENT_SYNC the event may not be used with ..."; the
 * default 0xE carries the runtime's DDSYNC bit, which also synchronises). */
#define EVENT_SYNC_CAPABLE (ACL_EVENT_SYNC | EVENT_DDSYNC)

/* The shared state of an IPC event (a slot of core/shm.c; the same layout in every
 * process that maps it). Sequences compare modulo 2^32. */
typedef struct ev_ipc_state {
    _Atomic uint32_t rec_seq;  /* records submitted, by any process */
    _Atomic uint32_t done_seq; /* highest record sequence completed (futex word) */
} ev_ipc_state;
_Static_assert(sizeof(ev_ipc_state) <= CORE_SHM_SLOT_BYTES, "IPC event state exceeds a shared slot");

typedef struct mock_event_s {
    uint64_t magic;
    atomic_int refs;
    int32_t device;
    uint32_t id;
    uint32_t flags;
    bool ex; /* created by aclrtCreateEventExWithFlag */

    mock_mutex mu;
    pthread_cond_t cv;
    int waiters;
    uint64_t rec_seq;  /* records submitted */
    uint64_t done_seq; /* highest record sequence completed */
    bool recorded;     /* a record was submitted and not reset since */
    bool ts_valid;
    uint64_t ts_ns;    /* time the latest completed record was reached */

    /* IPC events: the shared state; NULL for other events. Created here: `slot` holds
     * it (freed with the event). Opened from another process (aclrtIpcOpenEventHandle):
     * `ipc_release` unmaps it and tells the creator (src/ipc/). */
    ev_ipc_state *ipc;
    core_shm_slot slot;
    void (*ipc_release)(void *arg);
    void *ipc_release_arg;
} ev_t;

static mock_mutex g_ev_mu = MOCK_MUTEX_INIT(MOCK_LOCK_EVENT_REGISTRY);
static mock_registry g_ev_reg = MOCK_REGISTRY_EMPTY;
static uint32_t g_ev_live[MOCK_MAX_DEVICES];
static atomic_uint g_ev_next_id;
/* aclrtSetOpWaitTimeout: seconds, 0 = wait forever. */
static atomic_uint g_op_wait_timeout_s;

/* ---------------------------------------------------------------- helpers */

static void ev_ref(ev_t *e)
{
    atomic_fetch_add(&e->refs, 1);
}

static void ev_put(ev_t *e)
{
    if (atomic_fetch_sub(&e->refs, 1) == 1) {
        core_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->cv);
        e->magic = 0;
        core_shm_slot_free(&e->slot);
        if (e->ipc_release != NULL) {
            e->ipc_release(e->ipc_release_arg);
        }
        free(e);
    }
}

/* Looks the handle up (107000 for garbage) and returns it referenced. */
static aclError ev_get(const char *func, aclrtEvent handle, const char *argname, ev_t **out)
{
    if (handle == NULL) {
        return core_error(func, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", argname);
    }
    core_mutex_lock(&g_ev_mu);
    ev_t *e = core_registry_find(&g_ev_reg, handle);
    if (e != NULL && e->magic == EVENT_MAGIC) {
        ev_ref(e);
    } else {
        e = NULL;
    }
    core_mutex_unlock(&g_ev_mu);
    if (e == NULL) {
        return core_error(func, ACL_ERROR_RT_PARAM_INVALID, "argument '%s' (%p) is not a live event handle", argname,
                          handle);
    }
    aclError lost = core_device_lost_code(e->device);
    if (lost != ACL_SUCCESS) {
        ev_put(e);
        return core_error(func, lost, "device %d of the event is lost", e->device);
    }
    *out = e;
    return ACL_SUCCESS;
}

/* e->mu held */
static bool ev_complete_locked(const ev_t *e)
{
    return e->done_seq >= e->rec_seq;
}

static void ev_wake_locked(ev_t *e)
{
    if (e->waiters > 0) {
        pthread_cond_broadcast(&e->cv);
    }
}

/* IPC events: sequence `a` is at or after `b` (modulo 2^32). */
static bool ipcev_reached(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b) >= 0;
}

static bool ipcev_complete(ev_ipc_state *st)
{
    return ipcev_reached(atomic_load(&st->done_seq), atomic_load(&st->rec_seq));
}

/* A record of an IPC event ran (or was discarded): done_seq rises to `seq`, every
 * waiter in every process is woken. */
static void ipcev_record_done(ev_ipc_state *st, uint32_t seq)
{
    uint32_t cur = atomic_load(&st->done_seq);
    while (!ipcev_reached(cur, seq) && !atomic_compare_exchange_weak(&st->done_seq, &cur, seq)) {
    }
    core_futex_wake(&st->done_seq);
}

/* Waits (any thread; on a stream worker also ends on an abort) until the IPC event's
 * done_seq reaches `target`. Returns 0, ETIMEDOUT or ECANCELED. */
static int ipcev_wait(ev_ipc_state *st, uint32_t target, const struct timespec *dl)
{
    for (;;) {
        uint32_t seen = atomic_load(&st->done_seq);
        if (ipcev_reached(seen, target)) {
            return 0;
        }
        int w = stream_task_wait_word(&st->done_seq, seen, dl);
        if (w == ECANCELED) {
            return ECANCELED;
        }
        if (w == ETIMEDOUT && !ipcev_reached(atomic_load(&st->done_seq), target)) {
            return ETIMEDOUT;
        }
    }
}

/* ----------------------------------------------------------------- create */

/* `opened`: the shared state of an IPC event opened from another process (NULL: an
 * ACL_EVENT_IPC event gets a new slot here). */
static aclError ev_create(const char *func, aclrtEvent *event, uint32_t flags, bool ex, ev_ipc_state *opened,
                          void (*release)(void *arg), void *release_arg)
{
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(func, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int32_t dev = core_ctx_device(ctx);
    if (dev < 0 || dev >= MOCK_MAX_DEVICES) {
        return core_error(func, ACL_ERROR_RT_INVALID_DEVICEID, "current context has invalid device %d", dev);
    }
    ev_t *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return core_error(func, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory for an event");
    }
    e->magic = EVENT_MAGIC;
    atomic_init(&e->refs, 1);
    e->device = dev;
    e->flags = flags;
    e->ex = ex;
    e->slot.fd = -1;
    if (opened != NULL) {
        e->ipc = opened;
        e->ipc_release = release;
        e->ipc_release_arg = release_arg;
    } else if (flags == ACL_EVENT_IPC) {
        if (!core_shm_slot_alloc(&e->slot)) {
            free(e);
            return core_error(func, ACL_ERROR_RT_MEMORY_ALLOCATION, "no shared memory for an IPC event");
        }
        e->ipc = e->slot.addr;
    }
    core_mutex_init(&e->mu, MOCK_LOCK_EVENT);
    core_cond_init(&e->cv);
    e->id = atomic_fetch_add(&g_ev_next_id, 1); /* before the event is visible (IPC acquire reads it) */
    core_mutex_lock(&g_ev_mu);
    bool full = g_ev_live[dev] >= EVENT_MAX_PER_DEVICE;
    bool registered = !full && core_registry_insert(&g_ev_reg, e);
    if (registered) {
        g_ev_live[dev]++;
    }
    core_mutex_unlock(&g_ev_mu);
    if (!registered) {
        e->ipc_release = NULL; /* the caller still owns an opened event's state */
    }
    if (full) {
        ev_put(e);
        return core_error(func, ACL_ERROR_RT_NO_EVENT_RESOURCE, "device %d already has the maximum of %u events",
                          dev, EVENT_MAX_PER_DEVICE);
    }
    if (!registered) {
        ev_put(e);
        return core_error(func, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory for the event registry");
    }
    core_stat_add(dev, MOCK_STAT_EVENTS, 1);
    *event = e;
    return ACL_SUCCESS;
}

aclError aclrtCreateEvent(aclrtEvent *event)
{
    static const char fn[] = "aclrtCreateEvent";
    MOCK_REQUIRE_NONNULL(fn, event);
    MOCK_ENTER(fn);
    return ev_create(fn, event, EVENT_DEFAULT_FLAGS, false, NULL, NULL, NULL);
}

aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag)
{
    static const char fn[] = "aclrtCreateEventWithFlag";
    MOCK_REQUIRE_NONNULL(fn, event);
    /* flag must be non-zero and <= 0x3F; DEVICE_USE_ONLY (0x10) and EXTERNAL
     * (0x20) only alone (RT rt api_error.cc EventCreate; §3.2). */
    if (flag == 0 || flag > 0x3Fu) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'flag' is 0x%x (must be non-zero and <= 0x3F)",
                          flag);
    }
    if (((flag & ACL_EVENT_DEVICE_USE_ONLY) && flag != ACL_EVENT_DEVICE_USE_ONLY) ||
        ((flag & ACL_EVENT_EXTERNAL) && flag != ACL_EVENT_EXTERNAL)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'flag' is 0x%x: ACL_EVENT_DEVICE_USE_ONLY and ACL_EVENT_EXTERNAL must be used alone",
                          flag);
    }
    MOCK_ENTER(fn);
    return ev_create(fn, event, flag, false, NULL, NULL, NULL);
}

aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag)
{
    static const char fn[] = "aclrtCreateEventExWithFlag";
    MOCK_REQUIRE_NONNULL(fn, event);
    /* Allowed: bits 0x1|0x2|0x4|0x8, or ACL_EVENT_IPC (0x40) alone; 0 and
     * EXTERNAL are invalid (RT rt api_error.cc EventCreateEx; §3.2). */
    if (flag == 0 || ((flag & ~0xFu) != 0 && flag != ACL_EVENT_IPC)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'flag' is 0x%x (allowed: SYNC|CAPTURE_STREAM_PROGRESS|0x4|TIME_LINE, or IPC alone)",
                          flag);
    }
    MOCK_ENTER(fn);
    if (flag == ACL_EVENT_IPC) {
        /* IPC events: 950PR, A3, A2 (EVT#aclrtIpcGetEventHandle; not on 950DT, §3.3);
         * elsewhere creation fails as on a chip without them (acl_abi.md §3.2). */
        aclError rc = core_soc_require(fn, CORE_SOC_BIT(CORE_SOC_950PR) | CORE_SOC_BIT(CORE_SOC_A3) |
                                               CORE_SOC_BIT(CORE_SOC_A2));
        if (rc != ACL_SUCCESS) {
            return rc;
        }
    }
    return ev_create(fn, event, flag, true, NULL, NULL, NULL);
}

aclError aclrtDestroyEvent(aclrtEvent event)
{
    static const char fn[] = "aclrtDestroyEvent";
    MOCK_REQUIRE_NONNULL(fn, event);
    MOCK_ENTER(fn);
    core_mutex_lock(&g_ev_mu);
    ev_t *e = core_registry_find(&g_ev_reg, event);
    if (e == NULL) {
        core_mutex_unlock(&g_ev_mu);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'event' (%p) is not a live event handle", event);
    }
    core_registry_erase(&g_ev_reg, e);
    g_ev_live[e->device]--;
    core_mutex_unlock(&g_ev_mu);
    core_stat_add(e->device, MOCK_STAT_EVENTS, -1);
    stream_capture_event_gone(event); /* a capture forgets it */
    /* Asynchronous (doc): pending record/wait tasks keep their references;
     * the memory goes when the last of them has run. */
    ev_put(e);
    return ACL_SUCCESS;
}

/* aclFinalize (after core_devices_finalize, so no stream is left to run a
 * record/wait task): every event still alive is released, since aclFinalize
 * frees all runtime resources and events are not owned by a context. Tasks
 * can no longer hold references, but ev_put keeps any stray one safe. */
void stream_events_finalize(void)
{
    core_mutex_lock(&g_ev_mu);
    mock_registry reg = g_ev_reg;
    memset(&g_ev_reg, 0, sizeof g_ev_reg);
    memset(g_ev_live, 0, sizeof g_ev_live);
    core_mutex_unlock(&g_ev_mu);
    for (size_t i = 0; i < reg.cap; i++) {
        ev_t *e = core_registry_slot(&reg, i);
        if (e != NULL) {
            core_stat_add(e->device, MOCK_STAT_EVENTS, -1);
            ev_put(e);
        }
    }
    core_registry_release(&reg);
}

/* ----------------------------------------------------------------- record */

typedef struct rec_arg {
    ev_t *e;
    uint64_t seq;
    bool ran;
} rec_arg;

static aclError record_task(void *p)
{
    rec_arg *a = p;
    ev_t *e = a->e;
    if (e->ipc != NULL) {
        ipcev_record_done(e->ipc, (uint32_t)a->seq);
        a->ran = true;
        return ACL_SUCCESS;
    }
    /* the modeled time of this record under the timing model, else the host clock */
    uint64_t now = stream_task_time_ns(core_now_ns());
    core_mutex_lock(&e->mu);
    if (a->seq >= e->done_seq) {
        e->done_seq = a->seq;
        e->ts_ns = now;
        e->ts_valid = (e->flags & ACL_EVENT_TIME_LINE) != 0;
    }
    bool wake = e->waiters > 0;
    core_mutex_unlock(&e->mu);
    /* Woken after the unlock: a waiter does not wake only to block on e->mu again (one
     * context switch less per completion; e stays referenced by this task). */
    if (wake) {
        pthread_cond_broadcast(&e->cv);
    }
    a->ran = true;
    return ACL_SUCCESS;
}

static void record_free(void *p)
{
    rec_arg *a = p;
    ev_t *e = a->e;
    if (!a->ran && e->ipc != NULL) {
        ipcev_record_done(e->ipc, (uint32_t)a->seq); /* discarded: release the waiters */
    } else if (!a->ran) {
        /* Discarded (destroy-force, abort, STOP_ON_FAILURE): release anyone
         * waiting for this record instead of leaving them blocked forever;
         * no timestamp was taken. */
        core_mutex_lock(&e->mu);
        if (a->seq >= e->done_seq) {
            e->done_seq = a->seq;
            e->ts_valid = false;
        }
        ev_wake_locked(e);
        core_mutex_unlock(&e->mu);
    }
    ev_put(e);
    free(a);
}

/* The replayable record of a captured external record (ACL_EVENT_RECORD_EXTERNAL,
 * G-CAP2): every run of the model records the event anew, as an ordinary record
 * submitted and reached at that moment. */
static aclError replay_record_task(void *p)
{
    ev_t *e = p;
    uint64_t now = core_now_ns();
    core_mutex_lock(&e->mu);
    e->done_seq = ++e->rec_seq;
    e->recorded = true;
    e->ts_ns = now;
    e->ts_valid = (e->flags & ACL_EVENT_TIME_LINE) != 0;
    ev_wake_locked(e);
    core_mutex_unlock(&e->mu);
    return ACL_SUCCESS;
}

/* The replayable wait of a captured external wait (ACL_EVENT_WAIT_EXTERNAL):
 * each run waits for the latest record submitted when the wait is reached. */
static aclError replay_wait_task(void *p)
{
    ev_t *e = p;
    aclError rc = ACL_SUCCESS;
    core_mutex_lock(&e->mu);
    uint64_t target = e->recorded ? e->rec_seq : 0;
    e->waiters++;
    while (e->done_seq < target) {
        if (stream_task_wait(&e->cv, &e->mu, NULL) == ECANCELED) {
            rc = ACL_ERROR_RT_STREAM_ABORT;
            break;
        }
    }
    e->waiters--;
    core_mutex_unlock(&e->mu);
    return rc;
}

static void ev_put_task(void *p)
{
    ev_put(p);
}

/* Offers a record / wait / reset to the capture port (only while a capture,
 * a model build or an update is in progress anywhere). `run` is the replayable
 * form of the operation, which the port keeps when it records the operation as
 * a task of its own (external flags, resets); *handled tells the caller not to
 * run the operation itself. */
static aclError offer_capture(const char *fn, stream_capture_event_op op, mock_stream *s, ev_t *e, uint32_t flag,
                              mock_task_fn run, bool *handled)
{
    *handled = false;
    if (!stream_capture_any()) {
        return ACL_SUCCESS;
    }
    ev_ref(e);
    stream_task t = {run, e, ev_put_task, NULL};
    uint32_t flags = e->flags | (e->ipc != NULL ? (uint32_t)ACL_EVENT_IPC : 0u); /* refused in captures */
    return stream_capture_event(fn, op, s, (aclrtEvent)e, flags, flag, &t, handled);
}

/* ACL_EVENT_RECORD/WAIT_EXTERNAL (G-CAP2, EVT#aclrtRecordEventWithFlag): an
 * event from aclrtCreateEventExWithFlag with ACL_EVENT_SYNC, or (the update
 * recipe of G-UPD) one created with ACL_EVENT_EXTERNAL. */
static bool external_capable(const ev_t *e)
{
    return (e->ex && (e->flags & ACL_EVENT_SYNC)) || (e->flags & ACL_EVENT_EXTERNAL);
}

static aclError record_common(const char *fn, aclrtEvent event, aclrtStream stream, uint32_t flag)
{
    MOCK_REQUIRE_NONNULL(fn, event);
    if (flag != ACL_EVENT_RECORD_DEFAULT && flag != ACL_EVENT_RECORD_EXTERNAL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'flag' is %u (expected 0 or 1)", flag);
    }
    MOCK_ENTER(fn);
    ev_t *e = NULL;
    aclError rc = ev_get(fn, event, "event", &e);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (flag == ACL_EVENT_RECORD_EXTERNAL && !external_capable(e)) {
        ev_put(e);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "ACL_EVENT_RECORD_EXTERNAL needs an event created by aclrtCreateEventExWithFlag with "
                          "ACL_EVENT_SYNC (or with ACL_EVENT_EXTERNAL)");
    }
    mock_stream *s = NULL;
    rc = stream_get(fn, stream, true, &s);
    if (rc != ACL_SUCCESS) {
        ev_put(e);
        return rc;
    }
    if (stream_device(s) != e->device) {
        int32_t sd = stream_device(s);
        stream_put(s);
        ev_put(e);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "event belongs to device %d but argument 'stream' to device %d", e->device, sd);
    }
    bool handled = false;
    rc = offer_capture(fn, STREAM_EVENT_RECORD, s, e, flag, replay_record_task, &handled);
    if (rc == ACL_SUCCESS && !handled && flag == ACL_EVENT_RECORD_EXTERNAL) {
        /* G-CAP2: outside capture the external record flag is an error */
        rc = core_error(fn, ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                        "ACL_EVENT_RECORD_EXTERNAL is only valid on a capturing stream");
    }
    if (rc != ACL_SUCCESS || handled) {
        stream_put(s);
        ev_put(e);
        return rc;
    }
    rec_arg *a = malloc(sizeof(*a));
    if (a == NULL) {
        stream_put(s);
        ev_put(e);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    core_mutex_lock(&e->mu);
    a->e = e; /* the reference taken by ev_get moves to the task */
    a->seq = e->ipc != NULL ? (uint64_t)atomic_fetch_add(&e->ipc->rec_seq, 1) + 1u : ++e->rec_seq;
    a->ran = false;
    e->recorded = true;
    core_mutex_unlock(&e->mu);
    mock_task_desc desc = {.kind = MOCK_TASK_EVENT_RECORD, .name = fn, .peer_device = -1, .event = e};
    rc = stream_enqueue_desc(s, record_task, a, record_free, &desc);
    stream_put(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the record task (error %d)", rc);
    }
    return ACL_SUCCESS;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)
{
    return record_common("aclrtRecordEvent", event, stream, ACL_EVENT_RECORD_DEFAULT);
}

aclError aclrtRecordEventWithFlag(aclrtEvent event, aclrtStream stream, uint32_t flag)
{
    return record_common("aclrtRecordEventWithFlag", event, stream, flag);
}

/* ------------------------------------------------------------------ reset */

static aclError reset_task(void *p)
{
    ev_t *e = p;
    core_mutex_lock(&e->mu);
    if (ev_complete_locked(e)) { /* a newer record still pending wins */
        e->recorded = false;
        e->ts_valid = false;
    }
    core_mutex_unlock(&e->mu);
    return ACL_SUCCESS;
}

static void ev_put_void(void *p)
{
    ev_put(p);
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)
{
    static const char fn[] = "aclrtResetEvent";
    MOCK_ENTER(fn);
    ev_t *e = NULL;
    aclError rc = ev_get(fn, event, "event", &e);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (e->ex) {
        ev_put(e);
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "events created by aclrtCreateEventExWithFlag cannot be reset (re-record them instead)");
    }
    if (!(e->flags & EVENT_SYNC_CAPABLE)) {
        ev_put(e);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "event flags 0x%x lack ACL_EVENT_SYNC", e->flags);
    }
    mock_stream *s = NULL;
    rc = stream_get(fn, stream, true, &s);
    if (rc != ACL_SUCCESS) {
        ev_put(e);
        return rc;
    }
    bool handled = false;
    rc = offer_capture(fn, STREAM_EVENT_RESET, s, e, 0, reset_task, &handled);
    if (rc != ACL_SUCCESS || handled) {
        stream_put(s);
        ev_put(e);
        return rc;
    }
    mock_task_desc desc = {.kind = MOCK_TASK_EVENT_RESET, .name = fn, .peer_device = -1, .event = e};
    rc = stream_enqueue_desc(s, reset_task, e, ev_put_void, &desc);
    stream_put(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the reset task (error %d)", rc);
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------------ query */

/* Shared body of the three event queries (the caller has checked `status`): fault hook,
 * validate the event, refuse Ex events where `ex_refusal` is set (appended to the message),
 * and report whether the latest record has completed. Ex events report done before their
 * first record (doc 07_event_management.md, §5.5); other events are not done until recorded.
 * A wait on the event can complete once its latest record has. */
static aclError ev_query_done(const char *fn, aclrtEvent event, const char *ex_refusal, bool *done)
{
    MOCK_ENTER(fn);
    ev_t *e = NULL;
    aclError rc = ev_get(fn, event, "event", &e);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (ex_refusal != NULL && e->ex) {
        ev_put(e);
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "not supported for events created by aclrtCreateEventExWithFlag%s", ex_refusal);
    }
    bool recorded = false;
    rc = stream_capture_check(fn, STREAM_CALL_SYNC_EVENT, NULL, event); /* 107028: recorded in a capture */
    if (rc != ACL_SUCCESS) {
        ev_put(e);
        return rc;
    }
    if (e->ipc != NULL) {
        *done = ipcev_complete(e->ipc); /* never recorded: complete (D-EVT 4.4) */
    } else {
        core_mutex_lock(&e->mu);
        recorded = e->recorded;
        *done = recorded ? ev_complete_locked(e) : e->ex;
        core_mutex_unlock(&e->mu);
    }
    if (recorded && *done && core_observing()) {
        core_observe_simple(CORE_OBS_SYNC_EVENT, NULL, e, NULL, 0, e->device);
    }
    ev_put(e);
    return ACL_SUCCESS;
}

aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status)
{
    static const char fn[] = "aclrtQueryEvent";
    MOCK_REQUIRE_NONNULL(fn, status);
    bool done = false;
    aclError rc = ev_query_done(fn, event, " (use aclrtQueryEventStatus)", &done);
    if (rc == ACL_SUCCESS) {
        *status = done ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
    }
    return rc;
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)
{
    static const char fn[] = "aclrtQueryEventStatus";
    MOCK_REQUIRE_NONNULL(fn, status);
    bool done = false;
    aclError rc = ev_query_done(fn, event, NULL, &done);
    if (rc == ACL_SUCCESS) {
        *status = done ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
    }
    return rc;
}

aclError aclrtQueryEventWaitStatus(aclrtEvent event, aclrtEventWaitStatus *status)
{
    static const char fn[] = "aclrtQueryEventWaitStatus";
    MOCK_REQUIRE_NONNULL(fn, status);
    bool done = false;
    aclError rc = ev_query_done(fn, event, "", &done);
    if (rc == ACL_SUCCESS) {
        *status = done ? ACL_EVENT_WAIT_STATUS_COMPLETE : ACL_EVENT_WAIT_STATUS_NOT_READY;
    }
    return rc;
}

/* ------------------------------------------------------------ synchronize */

static aclError ev_sync(const char *fn, aclrtEvent event, int64_t timeout_ms)
{
    ev_t *e = NULL;
    aclError rc = ev_get(fn, event, "event", &e);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = stream_capture_check(fn, STREAM_CALL_SYNC_EVENT, NULL, event); /* 107028: recorded in a capture */
    if (rc != ACL_SUCCESS) {
        ev_put(e);
        return rc;
    }
    struct timespec dl_buf;
    const struct timespec *dl = core_deadline_opt(timeout_ms, &dl_buf);
    if (e->ipc != NULL) {
        if (ipcev_wait(e->ipc, atomic_load(&e->ipc->rec_seq), dl) == ETIMEDOUT) {
            rc = ACL_ERROR_RT_EVENT_SYNC_TIMEOUT;
        }
        ev_put(e);
        if (rc != ACL_SUCCESS) {
            return core_error(fn, rc, "IPC event not complete after %lld ms", (long long)timeout_ms);
        }
        return ACL_SUCCESS;
    }
    core_mutex_lock(&e->mu);
    uint64_t target = e->rec_seq; /* the latest record at the time of the call */
    e->waiters++;
    while (e->done_seq < target) {
        if (core_cond_wait_until(&e->cv, &e->mu, dl) == ETIMEDOUT && e->done_seq < target) {
            rc = ACL_ERROR_RT_EVENT_SYNC_TIMEOUT;
            break;
        }
    }
    e->waiters--;
    core_mutex_unlock(&e->mu);
    if (rc == ACL_SUCCESS && target > 0 && core_observing()) {
        core_observe_simple(CORE_OBS_SYNC_EVENT, NULL, e, NULL, 0, e->device);
    }
    ev_put(e);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "event not complete after %lld ms", (long long)timeout_ms);
    }
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeEvent(aclrtEvent event)
{
    return core_sync_with_timeout("aclrtSynchronizeEvent", event, -1, ev_sync);
}

aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout)
{
    return core_sync_with_timeout("aclrtSynchronizeEventWithTimeout", event, timeout, ev_sync);
}

/* ------------------------------------------------------------------- time */

/* Checks that e has a completed, timestamped latest record. e->mu held. */
static aclError ev_ts_check(const char *fn, const ev_t *e, const char *argname)
{
    if (e->flags & (ACL_EVENT_EXTERNAL | ACL_EVENT_IPC)) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "event '%s' is an EXTERNAL/IPC event", argname);
    }
    if (!e->recorded) {
        /* runtime RT_ERROR_EVENT_RECORDER_NULL -> 507000 (§5.5) */
        return core_error(fn, ACL_ERROR_RT_INTERNAL_ERROR, "event '%s' has not been recorded", argname);
    }
    if (!(e->flags & ACL_EVENT_TIME_LINE)) {
        return core_error(fn, ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
                          "event '%s' was created without ACL_EVENT_TIME_LINE (flags 0x%x)", argname, e->flags);
    }
    if (!ev_complete_locked(e)) {
        return core_error(fn, ACL_ERROR_RT_EVENT_NOT_COMPLETE, "the latest record of event '%s' has not completed",
                          argname);
    }
    if (!e->ts_valid) {
        return core_error(fn, ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, "event '%s' has no timestamp (record discarded)",
                          argname);
    }
    return ACL_SUCCESS;
}

aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)
{
    static const char fn[] = "aclrtEventElapsedTime";
    MOCK_REQUIRE_NONNULL(fn, ms);
    MOCK_REQUIRE_NONNULL(fn, startEvent);
    MOCK_REQUIRE_NONNULL(fn, endEvent);
    MOCK_ENTER(fn);
    ev_t *a = NULL, *b = NULL;
    aclError rc = ev_get(fn, startEvent, "startEvent", &a);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = ev_get(fn, endEvent, "endEvent", &b);
    if (rc != ACL_SUCCESS) {
        ev_put(a);
        return rc;
    }
    uint64_t ta = 0, tb = 0;
    core_mutex_lock(&a->mu);
    rc = ev_ts_check(fn, a, "startEvent");
    ta = a->ts_ns;
    core_mutex_unlock(&a->mu);
    if (rc == ACL_SUCCESS) {
        core_mutex_lock(&b->mu);
        rc = ev_ts_check(fn, b, "endEvent");
        tb = b->ts_ns;
        core_mutex_unlock(&b->mu);
    }
    ev_put(a);
    ev_put(b);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (tb < ta) {
        return core_error(fn, ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL,
                          "endEvent completed before startEvent (timestamp reversal)");
    }
    *ms = (float)((double)(tb - ta) / 1e6);
    return ACL_SUCCESS;
}

aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t *timestamp)
{
    static const char fn[] = "aclrtEventGetTimestamp";
    MOCK_REQUIRE_NONNULL(fn, timestamp);
    MOCK_ENTER(fn);
    ev_t *e = NULL;
    aclError rc = ev_get(fn, event, "event", &e);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&e->mu);
    rc = ev_ts_check(fn, e, "event");
    uint64_t t = e->ts_ns;
    core_mutex_unlock(&e->mu);
    ev_put(e);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* Microseconds of the host's monotonic clock (the unit of the device
     * timestamp is not pinned down by the reference; us chosen). */
    *timestamp = t / 1000u;
    return ACL_SUCCESS;
}

/* --------------------------------------------------------------- ids/count */

aclError aclrtGetEventId(aclrtEvent event, uint32_t *eventId)
{
    static const char fn[] = "aclrtGetEventId";
    MOCK_REQUIRE_NONNULL(fn, eventId);
    MOCK_ENTER(fn);
    ev_t *e = NULL;
    aclError rc = ev_get(fn, event, "event", &e);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    bool ipc = e->ipc != NULL;
    uint32_t id = e->id;
    ev_put(e);
    if (ipc) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "not supported for ACL_EVENT_IPC events");
    }
    *eventId = id;
    return ACL_SUCCESS;
}

aclError aclrtGetEventAvailNum(uint32_t *eventCount)
{
    static const char fn[] = "aclrtGetEventAvailNum";
    MOCK_REQUIRE_NONNULL(fn, eventCount);
    MOCK_ENTER(fn);
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int32_t dev = core_ctx_device(ctx);
    core_mutex_lock(&g_ev_mu);
    uint32_t used = (dev >= 0 && dev < MOCK_MAX_DEVICES) ? g_ev_live[dev] : 0;
    core_mutex_unlock(&g_ev_mu);
    *eventCount = used >= EVENT_MAX_PER_DEVICE ? 0 : EVENT_MAX_PER_DEVICE - used;
    return ACL_SUCCESS;
}

aclError aclrtSetOpWaitTimeout(uint32_t timeout)
{
    MOCK_ENTER("aclrtSetOpWaitTimeout");
    /* Seconds an event-wait task may block before failing; 0 = forever
     * (doc 07_event_management.md). Process-wide. */
    atomic_store(&g_op_wait_timeout_s, timeout);
    return ACL_SUCCESS;
}

/* -------------------------------------------------------------- wait event */

typedef struct wait_arg {
    ev_t *e;
    uint64_t target;
    int64_t timeout_ms; /* < 0: forever */
} wait_arg;

static aclError wait_task(void *p)
{
    wait_arg *a = p;
    ev_t *e = a->e;
    struct timespec dl_buf;
    const struct timespec *dl = core_deadline_opt(a->timeout_ms, &dl_buf);
    aclError rc = ACL_SUCCESS;
    if (e->ipc != NULL) {
        /* ECANCELED (stream aborted): discarded; a timeout fails the stream as below */
        return ipcev_wait(e->ipc, (uint32_t)a->target, dl) == ETIMEDOUT ? ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
                                                                       : ACL_SUCCESS;
    }
    core_mutex_lock(&e->mu);
    e->waiters++;
    while (e->done_seq < a->target) {
        int w = stream_task_wait(&e->cv, &e->mu, dl);
        if (w == ECANCELED) {
            break; /* stream aborted: the task counts as discarded */
        }
        if (w == ETIMEDOUT && e->done_seq < a->target) {
            /* The code a timed-out event wait leaves on the stream is not
             * pinned down by the reference; the event-sync timeout is the
             * closest documented one. */
            rc = ACL_ERROR_RT_EVENT_SYNC_TIMEOUT;
            break;
        }
    }
    e->waiters--;
    core_mutex_unlock(&e->mu);
    return rc;
}

static void wait_free(void *p)
{
    wait_arg *a = p;
    ev_put(a->e);
    free(a);
}

static aclError wait_common(const char *fn, aclrtStream stream, aclrtEvent event, int64_t timeout_ms, uint32_t flag)
{
    ev_t *e = NULL;
    aclError rc = ev_get(fn, event, "event", &e);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (!(e->flags & (EVENT_SYNC_CAPABLE | ACL_EVENT_IPC))) {
        ev_put(e);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "event flags 0x%x lack ACL_EVENT_SYNC: it cannot be waited for", e->flags);
    }
    if (flag == ACL_EVENT_WAIT_EXTERNAL && !external_capable(e)) {
        ev_put(e);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "ACL_EVENT_WAIT_EXTERNAL needs an event created by aclrtCreateEventExWithFlag with "
                          "ACL_EVENT_SYNC (or with ACL_EVENT_EXTERNAL)");
    }
    mock_stream *s = NULL;
    rc = stream_get(fn, stream, true, &s);
    if (rc != ACL_SUCCESS) {
        ev_put(e);
        return rc;
    }
    bool handled = false;
    rc = offer_capture(fn, STREAM_EVENT_WAIT, s, e, flag, replay_wait_task, &handled);
    if (rc == ACL_SUCCESS && !handled && flag == ACL_EVENT_WAIT_EXTERNAL) {
        rc = core_error(fn, ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                        "ACL_EVENT_WAIT_EXTERNAL is only valid on a capturing stream");
    }
    if (rc != ACL_SUCCESS || handled) {
        stream_put(s);
        ev_put(e);
        return rc;
    }
    uint64_t target;
    bool done;
    bool recorded = false;
    if (e->ipc != NULL) {
        target = atomic_load(&e->ipc->rec_seq); /* the latest record in any process */
        done = ipcev_reached(atomic_load(&e->ipc->done_seq), (uint32_t)target);
    } else {
        core_mutex_lock(&e->mu);
        recorded = e->recorded;
        target = recorded ? e->rec_seq : 0;
        done = e->done_seq >= target;
        core_mutex_unlock(&e->mu);
    }
    if (done && !(recorded && core_observing())) {
        /* Never recorded, or already complete with nobody observing:
         * nothing to wait for, and a barrier task keeps nothing, so skip
         * the enqueue entirely. While a diagnostic observes (profiler,
         * timing model, sanitizer), a recorded event's wait stays a task
         * as on a card - else the trace would lose it whenever the
         * recording stream happened to finish first. */
        stream_put(s);
        ev_put(e);
        return ACL_SUCCESS;
    }
    wait_arg *a = malloc(sizeof(*a));
    if (a == NULL) {
        stream_put(s);
        ev_put(e);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    if (timeout_ms < 0) {
        uint32_t sec = atomic_load(&g_op_wait_timeout_s);
        if (sec != 0) {
            timeout_ms = (int64_t)sec * 1000;
        }
    }
    a->e = e;
    a->target = target;
    a->timeout_ms = timeout_ms;
    mock_task_desc desc = {.kind = MOCK_TASK_EVENT_WAIT, .name = fn, .peer_device = -1, .event = e};
    rc = stream_enqueue_desc(s, wait_task, a, wait_free, &desc);
    stream_put(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the wait task (error %d)", rc);
    }
    return ACL_SUCCESS;
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)
{
    static const char fn[] = "aclrtStreamWaitEvent";
    MOCK_REQUIRE_NONNULL(fn, event);
    MOCK_ENTER(fn);
    return wait_common(fn, stream, event, -1, ACL_EVENT_WAIT_DEFAULT);
}

aclError aclrtStreamWaitEventWithFlag(aclrtStream stream, aclrtEvent event, uint32_t timeout, uint32_t flag)
{
    static const char fn[] = "aclrtStreamWaitEventWithFlag";
    MOCK_REQUIRE_NONNULL(fn, event);
    if (flag != ACL_EVENT_WAIT_DEFAULT && flag != ACL_EVENT_WAIT_EXTERNAL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'flag' is %u (expected 0 or 1)", flag);
    }
    MOCK_ENTER(fn);
    if (flag == ACL_EVENT_WAIT_EXTERNAL && timeout != 0) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'timeout' is %u: an ACL_EVENT_WAIT_EXTERNAL wait takes 0 (G-CAP2)", timeout);
    }
    /* timeout in ms; 0 = no explicit timeout (aclrtSetOpWaitTimeout applies) */
    return wait_common(fn, stream, event, timeout == 0 ? -1 : (int64_t)timeout, flag);
}

aclError aclrtStreamWaitEventWithTimeout(aclrtStream stream, aclrtEvent event, int32_t timeout)
{
    static const char fn[] = "aclrtStreamWaitEventWithTimeout";
    MOCK_REQUIRE_NONNULL(fn, event);
    int32_t ms = -1;
    aclError rc = core_check_timeout(fn, timeout, &ms);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    return wait_common(fn, stream, event, ms, ACL_EVENT_WAIT_DEFAULT);
}

/* ------------------------------------------------- IPC events (for src/ipc/) */

aclError stream_event_ipc_export(const char *fn, aclrtEvent event, uint32_t *id)
{
    ev_t *e = NULL;
    aclError rc = ev_get(fn, event, "event", &e);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    bool ipc = e->ipc != NULL, opened = e->ipc_release != NULL, shareable = e->slot.fd >= 0;
    *id = e->id;
    ev_put(e);
    if (!ipc) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'event' was not created with aclrtCreateEventExWithFlag(ACL_EVENT_IPC)");
    }
    if (opened) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'event' was opened from another process (only its creator exports it)");
    }
    if (!shareable) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "this system cannot share memory between processes (memfd_create failed)");
    }
    return ACL_SUCCESS;
}

aclError stream_event_ipc_acquire(aclrtEvent event, uint32_t id, void **obj, int *fd, uint64_t *offset)
{
    core_mutex_lock(&g_ev_mu);
    ev_t *e = core_registry_find(&g_ev_reg, event);
    bool ok = e != NULL && e->magic == EVENT_MAGIC && e->id == id && e->slot.addr != NULL;
    if (ok) {
        ev_ref(e);
    }
    core_mutex_unlock(&g_ev_mu);
    if (!ok) {
        return ACL_ERROR_RT_IPC_ERROR; /* destroyed (or never this event): the open fails (§3.3) */
    }
    *obj = e;
    *fd = e->slot.fd;
    *offset = e->slot.offset;
    return ACL_SUCCESS;
}

void stream_event_ipc_put(void *obj)
{
    ev_put(obj);
}

aclError stream_event_ipc_open(const char *fn, void *state, void (*release)(void *), void *arg, aclrtEvent *out)
{
    return ev_create(fn, out, ACL_EVENT_IPC, true, state, release, arg);
}
