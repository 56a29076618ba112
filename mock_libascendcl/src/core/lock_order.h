/*
 * core/lock_order.h - every lock of the mock, in lock order, with what it guards and
 * which locks may be held when it is taken; the wrappers every source file uses
 * (mock_mutex, mock_rwlock, core_mutex_lock, ...).
 *
 * The rule
 *   A thread may take lock L only while every lock it already holds is in L's "may
 *   hold" set. Every lock of a "may hold" set comes earlier in MOCK_LOCK_TABLE, so the
 *   table order is the one lock order: locks are always taken top to bottom, and no
 *   two threads can wait for each other. Two locks of the same class (two streams,
 *   two events) are never held together; a lock is never taken again by its holder,
 *   except a recursive mutex (LIFECYCLE) and a read lock taken shared again (the
 *   write gate: two access brackets). No lock is held while user code runs
 *   (callbacks, host functions, stream tasks) except MOCK_LOCK_LIFECYCLE, and a
 *   condition wait is only done on the innermost lock the thread holds.
 *
 * Machine-checked
 *   In the test builds (CMake MOCK_LOCK_CHECK, ON with MOCK_BUILD_TESTS) every
 *   core_mutex_lock / core_rwlock_* checks the rule against the locks the calling
 *   thread holds, core_lock_check_none runs before user code, and a violation aborts
 *   with both lock names (core/lock_order.c). tests/c/test_lock_order.c tests that
 *   checker, checks that the "may hold" sets only name earlier locks, and has a
 *   stress test for each pair of locks that can nest (run plain, asan and tsan);
 *   tests/test_mock_c.py checks that every lock declared under src/ uses an id of
 *   this table (no raw pthread_mutex_t / pthread_rwlock_t elsewhere), that every
 *   pair has its stress test, and the single unlock below. Release builds (the
 *   Python package's copy) compile the wrappers to the plain pthread calls.
 *
 * Adding a lock (a new subsystem: kernels, graphs, IPC, timing, ...)
 *   Add an entry at the place in the table that its nesting requires, with the
 *   locks that may be held when it is taken, declare it with MOCK_MUTEX_INIT(id) /
 *   core_mutex_init(&m, id) (or the rwlock forms), and for each new "may hold" pair
 *   add a stress test to tests/c/test_lock_order.c. The ids of libmsprofiler.so,
 *   libascend_dump.so, libacl_tdt_channel.so and libacl_tdt_queue.so are listed too;
 *   those libraries are leaves (they never call libascendcl.so while holding their
 *   locks) and are not checked at run time.
 *
 * Not locks: pthread_once (configuration, device table and condition-variable set-up;
 * their init routines take no lock) and the atomics that counters and flags use.
 * Every function that takes a lock and has more than two exits leaves through one
 * unlock: it decides under the lock and reports errors after it (or a `goto out`).
 */
#ifndef MOCK_LOCK_ORDER_H
#define MOCK_LOCK_ORDER_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* MOCK_LOCK_TABLE(X): X(id, where, guards, may_hold) for every lock, in lock order.
 *   where     the declaration ("file variable" or "file struct.member" for one lock
 *             per object: a lock class)
 *   guards    what it protects
 *   may_hold  the locks that may be held when it is taken: MOCK_HOLDS(a) | ..., or
 *             MOCK_HOLDS_NONE */
#define MOCK_HOLDS_NONE 0ull
#define MOCK_HOLDS(id) (1ull << (id))

/* aclInit/aclFinalize hold MOCK_LOCK_LIFECYCLE while they tear everything down and while
 * init/finalize callbacks (user code, which may call any API) run: it may be held when
 * taking any lock of libascendcl.so. */
#define MOCK_HOLDS_LIFECYCLE MOCK_HOLDS(MOCK_LOCK_LIFECYCLE)
/* Every lock before `id` in the table. */
#define MOCK_HOLDS_EARLIER(id) (MOCK_HOLDS(id) - 1ull)

#define MOCK_LOCK_TABLE(X)                                                                              \
    /* ------------------------------------------------------ core: lifecycle */                       \
    X(MOCK_LOCK_LIFECYCLE, "core/init.c g_lifecycle (recursive)",                                      \
      "aclInit / aclFinalize / aclFinalizeReference as a whole: the reference count, the config "     \
      "text, the initialized transitions, the teardown and the init/finalize callbacks",             \
      MOCK_HOLDS_NONE)                                                                                  \
    X(MOCK_LOCK_INIT_CALLBACKS, "core/init.c g_cb_lock", "the init and finalize callback tables",      \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_LEAK_SNAPSHOT, "core/init.c g_leak_lock", "the leak snapshot of the last aclFinalize", \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    /* --------------------------------------------- core: devices, contexts */                       \
    X(MOCK_LOCK_DEVICE_CALLBACKS, "core/device.c g_cb_lock",                                            \
      "the device state and task-abort callback lists (copied out; called without it)",              \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_DEVICE, "core/device.c mock_device.lock",                                               \
      "one device: its aclrtSetDevice count, primary context and resource limits (the primary "       \
      "context is created and destroyed without it)", MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_CONTEXTS, "core/context.c g_reg_lock", "the registry of live contexts and their ids",  \
      MOCK_HOLDS_LIFECYCLE | MOCK_HOLDS(MOCK_LOCK_DEVICE))                                              \
    X(MOCK_LOCK_SYSPARAMS, "core/context.c g_opt_lock, mock_context.opt_lock",                          \
      "the process-wide and the per-context system parameter tables", MOCK_HOLDS_LIFECYCLE)             \
    X(MOCK_LOCK_GATE, "core/gate.c g_gate_mu",                                                          \
      "the resource gate of the snapshot state machine (closed: resource calls wait at their entry)", \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    /* -------------------------------------------------------------- stream */                        \
    X(MOCK_LOCK_STREAM_REGISTRY, "stream/stream.c g_reg_mu",                                            \
      "the registry of live streams, the per-device stream counts and the orphan list",               \
      MOCK_HOLDS_LIFECYCLE)                                              \
    X(MOCK_LOCK_STREAM, "stream/stream.c mock_stream.mu",                                               \
      "one stream: its task ring, counters, error, sync waiters and captured tasks",                  \
      MOCK_HOLDS_LIFECYCLE)                                              \
    X(MOCK_LOCK_STREAM_STATE_CALLBACKS, "stream/stream.c g_state_mu",                                   \
      "the stream state callbacks (copied out; called without it)", MOCK_HOLDS_LIFECYCLE)              \
    X(MOCK_LOCK_STREAM_CONFIGS, "stream/stream.c g_cfg_mu", "the live stream config handles",          \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_EVENT_REGISTRY, "stream/event.c g_ev_mu",                                               \
      "the registry of live events and the per-device event counts", MOCK_HOLDS_LIFECYCLE)              \
    X(MOCK_LOCK_EVENT, "stream/event.c ev_t.mu", "one event: its record sequence, timestamp, waiters", \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_CALLBACKS, "stream/callback.c g_cb_mu",                                                 \
      "report subscriptions, their queues and the state of every queued report",                      \
      MOCK_HOLDS_LIFECYCLE)                                              \
    /* ----------------------------------------------------------------- mem */                        \
    X(MOCK_LOCK_VMM_RESERVATIONS, "mem/vmm.c g_vmm_rw (rwlock)", "the reserved virtual address ranges",\
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_VMM_HANDLES, "mem/vmm.c g_vmm_mu", "physical memory handles and their map counts",     \
      MOCK_HOLDS_LIFECYCLE | MOCK_HOLDS(MOCK_LOCK_VMM_RESERVATIONS))                                    \
    X(MOCK_LOCK_MEM_REGION, "mem/memory.c dev_region.lock",                                             \
      "one device's address-space region: its extents and used capacity",                             \
      MOCK_HOLDS_LIFECYCLE | MOCK_HOLDS(MOCK_LOCK_VMM_HANDLES))                                         \
    X(MOCK_LOCK_COPY_GATE, "mem/copy.c g_gate (rwlock)",                                                \
      "device writes (shared, for the length of an access bracket; a holder may take it shared "      \
      "again for a second bracket) against value-wait reads (exclusive)", MOCK_HOLDS_LIFECYCLE)       \
    X(MOCK_LOCK_MEM_REGISTRY, "mem/memory.c g_reg_lock (rwlock)", "the registry of live memory ranges",\
      MOCK_HOLDS_LIFECYCLE | MOCK_HOLDS(MOCK_LOCK_COPY_GATE))                                           \
    X(MOCK_LOCK_MEM_ISOLATION, "mem/memory.c g_iso_lock",                                               \
      "the isolation access counts of records and their mprotect calls",                              \
      MOCK_HOLDS_LIFECYCLE | MOCK_HOLDS(MOCK_LOCK_COPY_GATE))                                           \
    X(MOCK_LOCK_VALUE_NOTIFY, "mem/copy.c g_notify_mu", "the wake-ups of value waits (write generation)",\
      MOCK_HOLDS_LIFECYCLE | MOCK_HOLDS(MOCK_LOCK_COPY_GATE))                                           \
    X(MOCK_LOCK_COPY_OP, "mem/copy.c copy_op.mu", "one queued copy: its done flag and result",         \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_PEER, "mem/peer.c g_peer_mu", "the enabled peer-access pairs", MOCK_HOLDS_LIFECYCLE)   \
    X(MOCK_LOCK_MANAGED, "mem/managed.c g_managed_mu", "the advice fields of managed memory records",  \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_ALLOCATOR_DESCS, "mem/allocator.c g_descs (handle set)",                                \
      "the allocator descriptors and the allocators registered on streams", MOCK_HOLDS_LIFECYCLE)                                              \
    /* ---------------------------------------------------------------- misc */                        \
    X(MOCK_LOCK_DATA_BUFFERS, "misc/util.c g_buffers (handle set)", "the live aclDataBuffer handles",  \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_OVERFLOW, "misc/overflow.c g_ovf_mu", "the saturation mode of each device",            \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_EXCEPTION_CALLBACKS, "misc/exception.c g_exc_mu",                                       \
      "the exception-info callbacks (copied out; called without it)", MOCK_HOLDS_LIFECYCLE)             \
    X(MOCK_LOCK_EXCEPTION_INFOS, "misc/exception.c g_infos (handle set)",                               \
      "the exception infos live during a callback", MOCK_HOLDS_LIFECYCLE)                               \
    X(MOCK_LOCK_DUMP, "misc/dump.c dump_state.mu", "the dump session and the aclInit dump config",     \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_MBUFS, "misc/mbuf.c g_mbufs (handle set)",                                              \
      "the live shared buffers (aclrtAllocBuf) and their chains", MOCK_HOLDS_LIFECYCLE)                \
    X(MOCK_LOCK_SNAPSHOT, "misc/snapshot.c g_snap_mu",                                                  \
      "the process snapshot state, its memory image and the stage callbacks (copied out; called "    \
      "without it)", MOCK_HOLDS_LIFECYCLE)                                                             \
    X(MOCK_LOCK_GROUP_INFOS, "misc/groups.c g_infos (handle set)", "the live aclrtGroupInfo handles",  \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_OVERFLOW_AREAS, "misc/overflow_addr.c g_area_mu",                                       \
      "the overflow status area of each context (allocated and freed without it)",                    \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    /* -------------------------------------------------------------- notify */                        \
    X(MOCK_LOCK_NOTIFY_REGISTRY, "notify/notify.c g_nt_mu",                                             \
      "the registry of live notifies and the per-device notify counts",         \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_CNT_NOTIFY_REGISTRY, "notify/cnt_notify.c g_cnt_mu",                                    \
      "the registry of live count notifies and their per-device counts", MOCK_HOLDS_LIFECYCLE)          \
    /* ----------------------------------------------------------------- ipc */                        \
    X(MOCK_LOCK_IPC_TABLE, "ipc/broker.c g_table_mu",                                                   \
      "what this process exports (keys, ids, whitelists) and the broker thread's state (its "         \
      "connections are the thread's own while it runs)", MOCK_HOLDS_LIFECYCLE)                                   \
    X(MOCK_LOCK_IPC_IMPORTS, "ipc/share_mem.c g_imports_mu", "the memory this process imported, by key",\
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_IPC_CLIENTS, "ipc/client.c g_clients_mu",                                               \
      "the connections to other processes' brokers and their user counts", MOCK_HOLDS_LIFECYCLE)       \
    X(MOCK_LOCK_IPC_CONNECTION, "ipc/client.c ipc_conn.mu",                                             \
      "one connection to another process's broker: a request and its reply (held across that "        \
      "exchange; a broker never waits for another process, so this cannot deadlock)",                 \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    /* -------------------------------------------------------------- kernel */                        \
    X(MOCK_LOCK_KERNEL, "kernel/binary.c kernel_mu",                                                    \
      "the registries of binaries, functions, argument lists and host twins, and the mutable state "  \
      "of those objects (device copy, exception callback, list contents); also the fault-signal "     \
      "handlers being (re)installed", MOCK_HOLDS_LIFECYCLE)                                              \
    X(MOCK_LOCK_KERNEL_POOL, "kernel/run.c g_pool_mu",                                                  \
      "the block worker pool: its threads and the queue of launches whose blocks it runs",            \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    /* --------------------------------------------------------------- graph */                        \
    X(MOCK_LOCK_GRAPH, "graph/model.c g_graph_mu",                                                       \
      "models, their streams and tasks, captures, stream bindings, event marks, task groups, labels",  \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_GRAPH_EXEC, "graph/model.c graph_model.xmu",                                             \
      "one model's runs: activations, record generations, task arguments swapped by an update",       \
      MOCK_HOLDS_LIFECYCLE | MOCK_HOLDS(MOCK_LOCK_GRAPH))                                               \
    /* ---------------------------------------------------------------- diag */                        \
    X(MOCK_LOCK_DIAG_STATE, "diag/timing.c g_state_mu",                                                 \
      "the diagnostics' model of the streams: timing cursors and engines, event records, the race "    \
      "sanitizer's clocks, shadow and reports", MOCK_HOLDS_LIFECYCLE)                                  \
    X(MOCK_LOCK_DIAG_PROF, "diag/prof.c g_prof_mu",                                                     \
      "the running profile collection, its ranges and the op-info subscriptions", MOCK_HOLDS_LIFECYCLE) \
    X(MOCK_LOCK_DIAG_DUMP, "diag/dump.c g_dump_mu", "the dump writer's index file", MOCK_HOLDS_LIFECYCLE) \
    /* ------------------------------------------- core: leaves taken anywhere */                     \
    X(MOCK_LOCK_SHM_SLOTS, "core/shm.c g_shm_mu", "the arenas of process-shared words and their free slots",\
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_SUBSYSTEMS, "core/subsystem.c g_subsys_lock",                                           \
      "the registered subsystem descriptors (copied out; hooks run without it)", MOCK_HOLDS_LIFECYCLE)                                              \
    X(MOCK_LOCK_FAULTS, "core/error.c g_fault_lock", "the injected faults and their call counters",     \
      MOCK_HOLDS_LIFECYCLE)                                                                             \
    X(MOCK_LOCK_DIAG_LOG, "diag/devlog.c g_log_mu",                                                     \
      "the device logs and their files; taken under any lock (every recorded error is logged)",        \
      MOCK_HOLDS_EARLIER(MOCK_LOCK_DIAG_LOG))                                                           \
    X(MOCK_LOCK_ERROR_PROCESS, "core/error.c g_proc_lock",                                              \
      "the process-level recent error message (err_msg_mode 1); the last lock: an error may be "     \
      "recorded with any other lock of libascendcl.so held (today: events, VMM, managed, dump)",      \
      MOCK_HOLDS_EARLIER(MOCK_LOCK_ERROR_PROCESS))                                   \
    /* ------------------------------------------- libmsprofiler.so, libascend_dump.so */              \
    X(MOCK_LOCK_PROF, "msprofiler/prof.c g_mu", "the profiling session: path, config, profiled devices",\
      MOCK_HOLDS_NONE)                                                                                  \
    X(MOCK_LOCK_PROF_CONFIGS, "msprofiler/prof.c g_configs (handle set)", "the live aclprofConfig handles",\
      MOCK_HOLDS_NONE)                                                                                  \
    X(MOCK_LOCK_PROF_STEPS, "msprofiler/prof.c g_steps (handle set)", "the live aclprofStepInfo handles",\
      MOCK_HOLDS_NONE)                                                                                  \
    X(MOCK_LOCK_PROF_STAMPS, "msprofiler/prof.c g_stamps (handle set)", "the live msproftx stamps",    \
      MOCK_HOLDS_NONE)                                                                                  \
    X(MOCK_LOCK_PROF_SUBSCRIBE, "msprofiler/prof.c g_subcfgs (handle set)",                             \
      "the live aclprofSubscribeConfig handles", MOCK_HOLDS_NONE)                                       \
    X(MOCK_LOCK_DUMP_CALLBACK, "ascend_dump/dump_api.c g_cb_mu", "the acldumpRegCallback callback",    \
      MOCK_HOLDS_NONE)                                                                                  \
    /* ------------------------------------ libacl_tdt_channel.so, libacl_tdt_queue.so */              \
    X(MOCK_LOCK_TDT_HANDLES, "acl_tdt_channel/channel.c g_handles_mu",                                  \
      "the live TDT data items, datasets and channels (a channel is pinned, then used without it)",   \
      MOCK_HOLDS_NONE)                                                                                  \
    X(MOCK_LOCK_TDT_CHANNEL, "acl_tdt_channel/channel.c acltdtChannelHandle.mu",                        \
      "one channel: its queued datasets, stop flag and the calls in progress", MOCK_HOLDS_NONE)       \
    X(MOCK_LOCK_TDT_QUEUES, "acl_tdt_queue/queue.c g_mu",                                               \
      "every queue (elements, waiters), the bound routes and the attribute/route/list/query handles", \
      MOCK_HOLDS_NONE)


typedef enum mock_lock_id {
#define MOCK_LOCK_ENUM_(id, where, guards, may_hold) id,
    MOCK_LOCK_TABLE(MOCK_LOCK_ENUM_)
#undef MOCK_LOCK_ENUM_
    MOCK_LOCK_COUNT
} mock_lock_id;

/* "may hold" sets are 64-bit masks: widen them (two words) before the 65th lock. */
_Static_assert(MOCK_LOCK_COUNT <= 64, "more than 64 lock ids: widen the may-hold masks");

/* ------------------------------------------------------------------ checker */

#ifndef MOCK_LOCK_CHECK
#define MOCK_LOCK_CHECK 0
#endif

/* How a lock is taken: exclusively, shared (read lock of an rwlock: its holder may take it
 * shared again), or as a recursive mutex (its holder may take it again). */
typedef enum mock_lock_mode { MOCK_LOCK_EXCLUSIVE, MOCK_LOCK_SHARED, MOCK_LOCK_RECURSIVE } mock_lock_mode;

#if MOCK_LOCK_CHECK
#define MOCK_LOCK_HIDDEN __attribute__((visibility("hidden")))
/* core/lock_order.c: per-thread list of held locks; abort on a violation. */
MOCK_LOCK_HIDDEN void core_lock_check_take(mock_lock_id id, const void *lock, mock_lock_mode mode);
MOCK_LOCK_HIDDEN void core_lock_check_drop(mock_lock_id id, const void *lock);
MOCK_LOCK_HIDDEN void core_lock_check_wait(mock_lock_id id, const void *lock);
/* Aborts when the calling thread holds a lock other than MOCK_LOCK_LIFECYCLE: call right
 * before running user code (callbacks, host functions, stream tasks). */
MOCK_LOCK_HIDDEN void core_lock_check_none(const char *what);
#else
static inline void core_lock_check_take(mock_lock_id id, const void *lock, mock_lock_mode mode)
{
    (void)id;
    (void)lock;
    (void)mode;
}
static inline void core_lock_check_drop(mock_lock_id id, const void *lock)
{
    (void)id;
    (void)lock;
}
static inline void core_lock_check_wait(mock_lock_id id, const void *lock)
{
    (void)id;
    (void)lock;
}
static inline void core_lock_check_none(const char *what)
{
    (void)what;
}
#endif

/* ----------------------------------------------------------------- wrappers */

typedef struct mock_mutex {
    pthread_mutex_t mu;
    mock_lock_id id;
    bool recursive;
} mock_mutex;

typedef struct mock_rwlock {
    pthread_rwlock_t rw;
    mock_lock_id id;
} mock_rwlock;

#define MOCK_MUTEX_INIT(lock_id) { PTHREAD_MUTEX_INITIALIZER, (lock_id), false }
#define MOCK_RECURSIVE_MUTEX_INIT(lock_id) { PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP, (lock_id), true }
#define MOCK_RWLOCK_INIT(lock_id) { PTHREAD_RWLOCK_INITIALIZER, (lock_id) }

/* For locks inside heap objects (one per stream, event, device, ...). */
static inline void core_mutex_init(mock_mutex *m, mock_lock_id id)
{
    pthread_mutex_init(&m->mu, NULL);
    m->id = id;
    m->recursive = false;
}
static inline void core_mutex_destroy(mock_mutex *m)
{
    pthread_mutex_destroy(&m->mu);
}

static inline void core_mutex_lock(mock_mutex *m)
{
    core_lock_check_take(m->id, m, m->recursive ? MOCK_LOCK_RECURSIVE : MOCK_LOCK_EXCLUSIVE);
    pthread_mutex_lock(&m->mu);
}
static inline void core_mutex_unlock(mock_mutex *m)
{
    core_lock_check_drop(m->id, m);
    pthread_mutex_unlock(&m->mu);
}

static inline void core_rwlock_rdlock(mock_rwlock *l)
{
    core_lock_check_take(l->id, l, MOCK_LOCK_SHARED);
    pthread_rwlock_rdlock(&l->rw);
}
static inline void core_rwlock_wrlock(mock_rwlock *l)
{
    core_lock_check_take(l->id, l, MOCK_LOCK_EXCLUSIVE);
    pthread_rwlock_wrlock(&l->rw);
}
static inline void core_rwlock_unlock(mock_rwlock *l)
{
    core_lock_check_drop(l->id, l);
    pthread_rwlock_unlock(&l->rw);
}

/* Condition waits on a held mock_mutex (the innermost lock of the thread). */
static inline void core_cond_wait(pthread_cond_t *cv, mock_mutex *m)
{
    core_lock_check_wait(m->id, m);
    pthread_cond_wait(cv, &m->mu);
}
/* One wait until signalled or `deadline` (absolute CLOCK_MONOTONIC; NULL = none).
 * Returns 0 (recheck your predicate) or ETIMEDOUT. Use in a loop:
 *     while (!ready) if (core_cond_wait_until(cv, m, dl) == ETIMEDOUT && !ready) -> timeout */
static inline int core_cond_wait_until(pthread_cond_t *cv, mock_mutex *m, const struct timespec *deadline)
{
    core_lock_check_wait(m->id, m);
    if (deadline == NULL) {
        pthread_cond_wait(cv, &m->mu);
        return 0;
    }
    return pthread_cond_timedwait(cv, &m->mu, deadline) == ETIMEDOUT ? ETIMEDOUT : 0;
}

#endif /* MOCK_LOCK_ORDER_H */
