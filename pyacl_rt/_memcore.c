/*
 * pyacl_rt._memcore - allocation records and the buffer base types of pyacl_rt._memory.
 *
 * Why C: a DeviceBuffer / HostBuffer served from the caching allocator must cost less
 * than the runtime's own allocate + free pair. In Python its life took ~30 frames, a
 * weakref.finalize (with its atexit registration), a re-entrant lock taken four times, a
 * registry dict and counters. Here:
 *
 *   Mem         one allocation record (what pyacl_rt._memory.records calls _Mem), shared by
 *               a buffer and its views. Live records sit in a C registry (a linked list
 *               with per-device counters) that finalize, Context close and fork walk; each
 *               state change that must be atomic (hold for an operation, claim for close,
 *               take the base address, add a DLPack export) is one C call, atomic under the
 *               GIL, so the hit paths take no lock.
 *   DeviceBase  base types of DeviceBuffer / HostBuffer (pyacl_rt/_memory/buffers.py adds
 *   HostBase    the Python methods). They own their record: close() and deallocation (GC
 *               of an unclosed buffer) free it, with no weakref.finalize. HostBase exports
 *               the buffer protocol itself and counts its exports.
 *
 * Hit paths. Creating a buffer whose memory the cache can serve, closing it and
 * collecting it run in C only: the calling thread's pyacl_rt state (pyacl_rt._state's
 * ThreadState, cached in the thread's dict) and the stream / context objects are read
 * through their slots (offsets taken from the classes at bind time), the stream's cache
 * is found by the identity of the stream's private state token in a small table the
 * allocator fills (remember_device / remember_host), the runtime's current context is
 * checked with one direct aclrtGetCurrentContext through the raw layer's dispatch table
 * (a foreign context switch is still noticed), and the block comes from / goes back to
 * the C bookkeeping of pyacl_rt._cachecore through its capsule (pyacl_rt/_cacheapi.h).
 * Everything else - a miss, the native backend, an explicit Context, a device or stream
 * argument of another kind, frees deferred from host-callback threads, memory used on
 * other streams, exports, history recording, a finalized runtime, a finalize in progress
 * (its gate closed: the Python path passes the gate, see below) - takes the Python slow
 * path registered by bind() / bind_buffers(), which is the complete implementation: the
 * hit path only ever does what the slow path would have done.
 *
 * The finalize gate (pyacl_rt/_raw/_fastcall.c): finalize closes it, waits for the calls
 * in flight, then releases streams, caches and contexts while other threads may still
 * create, close or collect buffers. The hit paths read the gate first (one load) and
 * take the Python path while it is closed: creation raises RuntimeFinalizedError there,
 * close() and collection leave the memory to finalize's release. A hit path holds the
 * GIL from that check to its end and finalize closes the gate holding the GIL, so a hit
 * path either ends before the gate closes or does not start.
 *
 * Thread safety: everything here runs with the GIL held and never releases it; the hit
 * paths call back into Python only after their state changes are complete (trimming the
 * cache), and allocate Python objects before they change any state (a collection
 * triggered by the allocation may free other buffers into the same cache).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030C0000
#include <structmember.h>
#define Py_T_OBJECT_EX T_OBJECT_EX
#define Py_READONLY READONLY
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "_cacheapi.h"

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* base / ptr of a zero-byte DeviceBuffer (pyacl_rt._memory.records.ZERO_SIZE_BASE):
 * nonzero (the buffer is open) but never passed to the runtime. */
#define ZERO_SIZE_BASE ((uint64_t)1 << 63)
/* Sizes above this take the Python path (its overflow checks, its errors). */
#define FAST_MAX ((long long)1 << 48)
/* Device indices counted in the per-device statistics (-1 is pinned host memory). */
#define MAX_DEVICES 1024
/* Streams whose caches the hit path knows at once. */
#define NHOT 16

#if PY_VERSION_HEX >= 0x030C0000
#define SAVE_EXC PyObject *saved_exc_ = PyErr_GetRaisedException()
#define RESTORE_EXC PyErr_SetRaisedException(saved_exc_)
#else
#define SAVE_EXC                                       \
    PyObject *saved_t_, *saved_v_, *saved_tb_;         \
    PyErr_Fetch(&saved_t_, &saved_v_, &saved_tb_)
#define RESTORE_EXC PyErr_Restore(saved_t_, saved_v_, saved_tb_)
#endif

/* ================================================================ bound state */
/* Set by bind() (pyacl_rt._memory.records) */
static PyObject *g_rt;            /* pyacl_rt._runtime's globals */
static PyObject *g_stg;           /* pyacl_rt._state's globals */
static PyObject *g_local;         /* pyacl_rt._state._local */
static PyTypeObject *g_ts_type;   /* pyacl_rt._state.ThreadState */
static Py_ssize_t off_ts_device, off_ts_active, off_ts_in_callback, off_ts_streams, off_ts_ctx;
static PyTypeObject *g_ctx_type;  /* pyacl_rt._state.CtxRef */
static Py_ssize_t off_ctx_device, off_ctx_handle, off_ctx_owner;
static PyObject *g_deferred;      /* records._deferred: frees waiting for the releaser */
static PyObject *g_free_mem;      /* records.free_mem(m): the complete free */
static PyObject *g_raise_closed;  /* records._raise_closed(m, what) */
static PyObject *g_unknown_block; /* logs "freeing unknown block" (base) */
static PyObject *g_host_read;     /* _sanitize.host_read(ptr, n), or NULL (sanitizer off) */
static void *const *g_table;      /* the raw layer's dispatch table */
static int g_idx_get_ctx = -1;    /* aclrtGetCurrentContext's slot in it */
/* Set by bind_buffers() (pyacl_rt._memory.buffers) */
static PyTypeObject *g_stream_type; /* pyacl_rt._stream.Stream */
static Py_ssize_t off_s_ctx, off_s_device, off_s_state;
static PyObject *g_primary_defaults; /* pyacl_rt._stream.primary_defaults */
static PyObject *g_dev_init, *g_dev_close, *g_host_init, *g_host_close;
static PyObject *g_default_policy;
/* Set by the allocator (a higher layer) */
static const PyaclCacheAPI *g_cache;
static int g_tracing;
/* The finalize gate's `closed` flag (pyacl_rt._raw._fastcall, set by bind()). */
static const int g_gate_never_closed = 0;
static const int *g_gate_closed = &g_gate_never_closed;
#define GATE_CLOSED() UNLIKELY(__atomic_load_n(g_gate_closed, __ATOMIC_RELAXED))

static PyObject *s_generation, *s_fallback_device, *s_st, *s_tls_key;
static PyObject *s_default_dead, *s_forked, *s_close;
static PyObject *s_nbytes, *s_device, *s_policy, *s_stream;

/* How often the hit paths ran (tests check that they do). */
static uint64_t g_fast[4]; /* device alloc, device free, host alloc, host free */

static inline PyObject *SLOT(PyObject *o, Py_ssize_t off)
{
    return *(PyObject **)((char *)o + off);
}

/* *out = the value of an exact int `v`; 0 (no exception) when it is not one or too big. */
static inline int as_long(PyObject *v, long *out)
{
    if (v == NULL || !PyLong_CheckExact(v)) {
        return 0;
    }
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)v)) { /* one digit: no call */
        *out = (long)PyUnstable_Long_CompactValue((PyLongObject *)v);
        return 1;
    }
#else
    Py_ssize_t ndigits = Py_SIZE(v);
    if (ndigits >= -1 && ndigits <= 1) { /* one digit (or zero): no call */
        *out = ndigits == 0 ? 0 : (long)ndigits * (long)((PyLongObject *)v)->ob_digit[0];
        return 1;
    }
#endif
    long x = PyLong_AsLong(v);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = x;
    return 1;
}

/* Recently used thread states by thread-state id: borrowed references, valid while that
 * thread state is current (its dict holds the object; ids are never reused). */
#define NTS 16
static struct {
    uint64_t id;
    PyInterpreterState *interp;
    PyObject *st;
} g_ts_cache[NTS];

static PyObject *thread_state_slow(PyThreadState *ts);

/* The calling thread's pyacl_rt._state.ThreadState (borrowed), kept in the thread's
 * dict (dropped with the thread); NULL (no exception) when it cannot be had. */
static inline PyObject *thread_state(void)
{
    PyThreadState *ts = PyThreadState_Get();
    unsigned slot = (unsigned)(ts->id % NTS); /* ids are unique, never reused */
    if (LIKELY(g_ts_cache[slot].id == ts->id && g_ts_cache[slot].interp == ts->interp)) {
        return g_ts_cache[slot].st;
    }
    return thread_state_slow(ts);
}

static PyObject *thread_state_slow(PyThreadState *ts)
{
    uint64_t id = ts->id;
    PyInterpreterState *interp = ts->interp;
    unsigned slot = (unsigned)(id % NTS);
    if (g_local == NULL) {
        return NULL;
    }
    PyObject *d = PyThreadState_GetDict();
    if (d == NULL) {
        return NULL;
    }
    PyObject *st = PyDict_GetItemWithError(d, s_tls_key);
    if (st == NULL) {
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return NULL;
        }
        st = PyObject_GetAttr(g_local, s_st);
        if (st == NULL) {
            PyErr_Clear();
            return NULL;
        }
        int rc = PyDict_SetItem(d, s_tls_key, st);
        Py_DECREF(st); /* the dict holds it */
        if (rc < 0) {
            PyErr_Clear();
            return NULL;
        }
    }
    if (!Py_IS_TYPE(st, g_ts_type)) {
        return NULL;
    }
    g_ts_cache[slot].id = id;
    g_ts_cache[slot].interp = interp;
    g_ts_cache[slot].st = st;
    return st;
}

/* Runtime generations up to this one are finalized (end_generation(), called by the
 * memory layer's finalize hook before it frees every record, and at fork): their records
 * and caches take the Python path. Caches are remembered only for later generations. */
static int64_t g_dead_gen;

/* The runtime's current context of this thread (one aclrtGetCurrentContext, GIL held,
 * as lowlevel.fast.get_current_context does). 0 when unknown. */
static int runtime_context(uint64_t *out)
{
    if (g_table == NULL || g_idx_get_ctx < 0) {
        return 0;
    }
    int32_t (*fn)(uintptr_t *) = (int32_t(*)(uintptr_t *))g_table[g_idx_get_ctx];
    if (fn == NULL) {
        return 0; /* library not loaded yet */
    }
    uintptr_t h = 0;
    if (fn(&h) != 0) {
        return 0; /* no context: the slow path reports it */
    }
    *out = (uint64_t)h;
    return 1;
}

/* The handle of a live context (ctx.device >= 0), from a one-entry cache (a context's
 * handle never changes while it is live; killing it sets device < 0). */
static PyObject *g_handle_ctx; /* strong */
static uint64_t g_handle;

static int ctx_handle(PyObject *ctx, uint64_t *out)
{
    long d;
    if (!as_long(SLOT(ctx, off_ctx_device), &d) || d < 0) {
        return 0;
    }
    if (ctx != g_handle_ctx) {
        PyObject *h = SLOT(ctx, off_ctx_handle);
        if (h == NULL || !PyLong_CheckExact(h)) {
            return 0;
        }
        uint64_t v = PyLong_AsUnsignedLongLong(h);
        if (v == (uint64_t)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        Py_XSETREF(g_handle_ctx, Py_NewRef(ctx));
        g_handle = v;
    }
    *out = g_handle;
    return 1;
}

/* ====================================================================== Mem */
typedef struct PoolObject PoolObject;

typedef struct MemObject {
    PyObject_HEAD
    uint64_t base;    /* what aclrtFree / the cache gets back; 0 once freed */
    uint64_t ptr;     /* what Python may use; 0 once closed / freed / inert */
    uint64_t nbytes;
    int64_t gen;      /* runtime generation at allocation */
    int device;       /* -1: pinned host memory */
    char registered;  /* in the live registry (which holds a reference) */
    char counted;     /* in the per-device statistics */
    Py_ssize_t inuse; /* synchronous operations using the memory now */
    PyObject *ctx, *last, *streams, *dead, *keep, *rel, *release, *exports;
    PyObject *owner;  /* the owning HostBuffer (borrowed; cleared by its deallocation) */
    PyObject *base_o, *nbytes_o; /* their int objects once read (see SET_U64) */
    PyObject *ptr_o, *device_o; /* always set: attributes `ptr`, `device` (set_ptr) */
    PoolObject *pool; /* the cache serving the block (hit path), or NULL */
    size_t slot;      /* pinned: the block's entry in the pool's HostCore (a hint) */
    char tracked;     /* tracked by the garbage collector (see mem_track) */
    struct MemObject *prev, *next; /* registry links */
} MemObject;

static PyTypeObject MemType;

/* The int fields Python reads on hot paths (Mem.base / ptr / nbytes, a buffer's _n /
 * _off) keep the int object of their value once read, so that reading them allocates
 * nothing (like a __slots__ attribute). Every write from C goes through SET_U64. */
#define SET_U64(obj, field, value)                 \
    do {                                           \
        uint64_t v_ = (value);                     \
        if ((obj)->field != v_) {                  \
            (obj)->field = v_;                     \
            Py_CLEAR((obj)->field##_o);            \
        }                                          \
    } while (0)

static PyObject *get_u64(uint64_t v, PyObject **cache)
{
    if (*cache == NULL && (*cache = PyLong_FromUnsignedLongLong(v)) == NULL) {
        return NULL;
    }
    return Py_NewRef(*cache);
}

static int u64_value(PyObject *o, uint64_t *out, const char *what);

/* Int objects of recently used addresses: a block handed out again (the cache is LIFO)
 * gets the same object, so `ptr` costs no allocation on the hit path. */
#define NADDR 16
static PyObject *g_addr_obj[NADDR];
static uint64_t g_addr_val[NADDR];

static inline __attribute__((always_inline)) PyObject *addr_object(uint64_t v)
{
    unsigned i = (unsigned)((v >> 9) % NADDR);
    if (g_addr_obj[i] != NULL && g_addr_val[i] == v) {
        return Py_NewRef(g_addr_obj[i]);
    }
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    if (o != NULL) {
        Py_XSETREF(g_addr_obj[i], Py_NewRef(o));
        g_addr_val[i] = v;
    }
    return o;
}

static PyObject *g_zero, *g_minus_one; /* the ints 0 and -1 */

/* Mem.ptr (C value and attribute). Only 0 cannot fail. */
static inline __attribute__((always_inline)) int set_ptr(MemObject *m, uint64_t v)
{
    PyObject *o = v ? addr_object(v) : Py_NewRef(g_zero);
    if (o == NULL) {
        return -1;
    }
    m->ptr = v;
    Py_XSETREF(m->ptr_o, o);
    return 0;
}

/* A Python write: the value, and the object itself when it is an exact int. */
static int set_u64(PyObject *v, uint64_t *field, PyObject **cache, const char *what)
{
    uint64_t x;
    if (v == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete %s", what);
        return -1;
    }
    if (u64_value(v, &x, what) < 0) {
        return -1;
    }
    *field = x;
    Py_XSETREF(*cache, PyLong_CheckExact(v) ? Py_NewRef(v) : NULL);
    return 0;
}

typedef struct {
    int64_t allocated, peak, allocs, frees, bytes_allocated, bytes_freed;
} DevStats;

/* index device + 1 (0: pinned host memory) */
static DevStats g_stats[MAX_DEVICES + 1];
static MemObject *g_first, *g_last;
static Py_ssize_t g_nlive;

static DevStats *stats_of(int device)
{
    return (device >= -1 && device < MAX_DEVICES) ? &g_stats[device + 1] : NULL;
}

static void mem_register(MemObject *m)
{
    if (m->registered) {
        return;
    }
    Py_INCREF(m);
    m->registered = 1;
    m->prev = g_last;
    m->next = NULL;
    if (g_last != NULL) {
        g_last->next = m;
    } else {
        g_first = m;
    }
    g_last = m;
    g_nlive++;
    DevStats *st = stats_of(m->device);
    m->counted = (m->release == NULL || m->release == Py_None) && st != NULL;
    if (m->counted) {
        st->allocated += (int64_t)m->nbytes;
        st->allocs += 1;
        st->bytes_allocated += (int64_t)m->nbytes;
        if (st->allocated > st->peak) {
            st->peak = st->allocated;
        }
    }
}

static void mem_unlink(MemObject *m)
{
    if (m->prev != NULL) {
        m->prev->next = m->next;
    } else {
        g_first = m->next;
    }
    if (m->next != NULL) {
        m->next->prev = m->prev;
    } else {
        g_last = m->prev;
    }
    m->prev = m->next = NULL;
    m->registered = 0;
    g_nlive--;
}

/* Forget a freed allocation. Drops the registry's reference: the caller holds another. */
static void mem_unregister(MemObject *m)
{
    if (!m->registered) {
        return;
    }
    mem_unlink(m);
    if (m->counted) {
        DevStats *st = stats_of(m->device);
        st->allocated -= (int64_t)m->nbytes;
        st->frees += 1;
        st->bytes_freed += (int64_t)m->nbytes;
        m->counted = 0;
    }
    Py_DECREF(m);
}

/* Freed objects kept for reuse (as CPython does for its own small objects): a buffer
 * life allocates no memory on the hit path. Untracked, fields cleared; reinitialised
 * with PyObject_Init and tracked again when reused. */
#define NFREE 64
static PyObject *g_free_mems[NFREE];
static int g_nfree_mems;

/* A reused object's new life: what PyObject_Init does, without the call in release
 * builds (its type is set by the caller). */
static inline void revive(PyObject *o, PyTypeObject *tp)
{
#if defined(Py_TRACE_REFS) || defined(Py_REF_DEBUG) || defined(Py_GIL_DISABLED) || \
    PY_VERSION_HEX >= 0x030E0000
    PyObject_Init(o, tp);
#else
    Py_SET_TYPE(o, tp);
    if (tp->tp_flags & Py_TPFLAGS_HEAPTYPE) {
        Py_INCREF(tp);
    }
    Py_SET_REFCNT(o, 1);
#endif
}

/* A new record, not tracked by the garbage collector: the fields set on the hit path
 * (ctx, rel, pool: none of them leads back to a record) cannot close a cycle; the
 * setters of those that can (last, streams, exports, keep, release) track it. */
static MemObject *mem_alloc(void)
{
    MemObject *m;
    if (g_nfree_mems > 0) {
        m = (MemObject *)g_free_mems[--g_nfree_mems];
        memset((char *)m + sizeof(PyObject), 0, sizeof(MemObject) - sizeof(PyObject));
        revive((PyObject *)m, &MemType);
    } else {
        m = PyObject_GC_New(MemObject, &MemType);
        if (m == NULL) {
            return NULL;
        }
        memset((char *)m + sizeof(PyObject), 0, sizeof(MemObject) - sizeof(PyObject));
    }
    m->slot = (size_t)-1;
    m->device = -1;
    m->ptr_o = Py_NewRef(g_zero);
    m->device_o = Py_NewRef(g_minus_one);
    m->last = Py_NewRef(Py_None);
    return m;
}

static inline void mem_track(MemObject *m)
{
    if (!m->tracked) {
        m->tracked = 1;
        PyObject_GC_Track(m);
    }
}

static int u64_value(PyObject *o, uint64_t *out, const char *what)
{
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "_memcore: %s must be an int, not %.80s", what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
    *out = v;
    return 0;
}

/* Mem(base, nbytes, device, ctx): a record of an allocation made now (generation of the
 * runtime now; keeps an explicit Context of ctx alive). Not registered. */
static PyObject *mem_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *base_o, *nbytes_o, *ctx;
    int device;
    static char *kwlist[] = {"base", "nbytes", "device", "ctx", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOiO:Mem", kwlist, &base_o, &nbytes_o, &device,
                                     &ctx)) {
        return NULL;
    }
    uint64_t base, nbytes;
    if (u64_value(base_o, &base, "base") < 0 || u64_value(nbytes_o, &nbytes, "nbytes") < 0) {
        return NULL;
    }
    PyObject *keep = NULL;
    if (ctx != Py_None) {
        PyObject *owner = PyObject_GetAttrString(ctx, "owner");
        if (owner == NULL) {
            return NULL;
        }
        if (owner != Py_None) {
            keep = PyObject_CallNoArgs(owner); /* a weakref to the explicit Context */
            if (keep == NULL) {
                Py_DECREF(owner);
                return NULL;
            }
        }
        Py_DECREF(owner);
    }
    int64_t gen = 0;
    if (g_rt != NULL) {
        long g;
        PyObject *v = PyDict_GetItemWithError(g_rt, s_generation);
        if (as_long(v, &g)) {
            gen = g;
        } else if (PyErr_Occurred()) {
            Py_XDECREF(keep);
            return NULL;
        }
    }
    (void)type; /* Mem cannot be subclassed */
    MemObject *m = mem_alloc();
    if (m == NULL) {
        Py_XDECREF(keep);
        return NULL;
    }
    mem_track(m);
    SET_U64(m, base, base);
    SET_U64(m, nbytes, nbytes);
    m->device = device;
    Py_SETREF(m->device_o, PyLong_FromLong(device));
    if (m->device_o == NULL || set_ptr(m, base) < 0) {
        Py_DECREF(m);
        Py_XDECREF(keep);
        return NULL;
    }
    m->gen = gen;
    m->ctx = Py_NewRef(ctx);
    if (keep == Py_None) { /* the Context is gone already */
        Py_CLEAR(keep);
    }
    m->keep = keep;
    return (PyObject *)m;
}

static int mem_traverse(MemObject *m, visitproc visit, void *arg)
{
    Py_VISIT(m->ctx);
    Py_VISIT(m->last);
    Py_VISIT(m->streams);
    Py_VISIT(m->dead);
    Py_VISIT(m->keep);
    Py_VISIT(m->rel);
    Py_VISIT(m->release);
    Py_VISIT(m->exports);
    Py_VISIT((PyObject *)m->pool);
    return 0;
}

/* Only what can close a reference cycle; a registered record (the only kind with memory)
 * is referenced by the registry and never collected as garbage. */
static int mem_clear(MemObject *m)
{
    Py_CLEAR(m->last);
    Py_CLEAR(m->streams);
    Py_CLEAR(m->keep);
    Py_CLEAR(m->exports);
    return 0;
}

static void mem_dealloc(MemObject *m)
{
    if (m->tracked) {
        PyObject_GC_UnTrack(m);
        m->tracked = 0;
    }
    if (m->registered) { /* cannot happen: the registry holds a reference */
        mem_unlink(m);
    }
    mem_clear(m);
    Py_CLEAR(m->ctx);
    Py_CLEAR(m->dead);
    Py_CLEAR(m->rel);
    Py_CLEAR(m->release);
    Py_CLEAR(m->pool);
    Py_CLEAR(m->base_o);
    Py_CLEAR(m->ptr_o);
    Py_CLEAR(m->nbytes_o);
    Py_CLEAR(m->device_o);
    Py_CLEAR(m->last);
    if (Py_IS_TYPE(m, &MemType) && g_nfree_mems < NFREE) {
        g_free_mems[g_nfree_mems++] = (PyObject *)m;
        return;
    }
    Py_TYPE(m)->tp_free((PyObject *)m);
}

/* ---- methods: the state changes that must be atomic */
static PyObject *mem_hold(MemObject *m, PyObject *Py_UNUSED(ignored))
{
    if (m->ptr) {
        m->inuse++;
    }
    return Py_NewRef(m->ptr_o);
}

static PyObject *mem_unhold(MemObject *m, PyObject *Py_UNUSED(ignored))
{
    if (m->inuse > 0) {
        m->inuse--;
    }
    Py_RETURN_NONE;
}

static Py_ssize_t list_len(PyObject *l)
{
    return (l != NULL && PyList_Check(l)) ? PyList_GET_SIZE(l) : 0;
}

/* The close() refusals, or 0 (nothing changed). */
static int refuse_close(MemObject *m, PyObject *what, Py_ssize_t nexports)
{
    if (!m->ptr) {
        return 0;
    }
    Py_ssize_t n = list_len(m->exports);
    if (n) {
        PyErr_Format(PyExc_BufferError,
                     "cannot close %U: %zd DLPack export(s) still use its memory (e.g. an "
                     "array made by numpy.from_dlpack / pyacl_rt.from_dlpack); release them "
                     "first",
                     what, n);
        return -1;
    }
    if (m->inuse) {
        PyErr_Format(PyExc_BufferError,
                     "cannot close %U: a synchronous operation (copy / memset) on another "
                     "thread is still using its memory (%zd in flight); wait for it to finish "
                     "(e.g. join that thread), then close",
                     what, m->inuse);
        return -1;
    }
    if (nexports) {
        PyErr_Format(PyExc_BufferError,
                     "cannot close %U: %zd exported view(s) (memoryview / numpy array) still "
                     "use its memory; release them first",
                     what, nexports);
        return -1;
    }
    return 0;
}

/* claim_close(what, nexports=0) -> former address (0: already closed). */
static PyObject *mem_claim_close(MemObject *m, PyObject *args)
{
    PyObject *what;
    Py_ssize_t nexports = 0;
    if (!PyArg_ParseTuple(args, "U|n:claim_close", &what, &nexports)) {
        return NULL;
    }
    if (refuse_close(m, what, nexports) < 0) {
        return NULL;
    }
    PyObject *p = Py_NewRef(m->ptr_o);
    set_ptr(m, 0);
    return p;
}

static PyObject *mem_invalidate(MemObject *m, PyObject *Py_UNUSED(ignored))
{
    set_ptr(m, 0);
    Py_RETURN_NONE;
}

static PyObject *mem_take_base(MemObject *m, PyObject *Py_UNUSED(ignored))
{
    uint64_t b = m->base;
    if (b) {
        SET_U64(m, base, 0);
        mem_unregister(m);
    }
    return PyLong_FromUnsignedLongLong(b);
}

static PyObject *mem_register_py(MemObject *m, PyObject *Py_UNUSED(ignored))
{
    mem_register(m);
    Py_RETURN_NONE;
}

static PyObject *mem_add_export(MemObject *m, PyObject *token)
{
    if (!m->ptr) {
        return PyLong_FromLong(0);
    }
    if (m->exports == NULL && (m->exports = PyList_New(0)) == NULL) {
        return NULL;
    }
    mem_track(m);
    if (PyList_Append(m->exports, token) < 0) {
        return NULL;
    }
    return Py_NewRef(m->ptr_o);
}

static PyMethodDef mem_methods[] = {
    {"hold", (PyCFunction)mem_hold, METH_NOARGS,
     "hold() -> address: mark the memory in use by an operation of the calling thread "
     "(close() refuses until unhold()); 0 (nothing marked) when closed."},
    {"unhold", (PyCFunction)mem_unhold, METH_NOARGS, "unhold(): drop one hold() mark."},
    {"claim_close", (PyCFunction)mem_claim_close, METH_VARARGS,
     "claim_close(what, nexports=0) -> former address (0: already closed): no new "
     "operation can start. BufferError (nothing changed) while DLPack exports, operations "
     "of other threads or nexports buffer-protocol exports use the memory."},
    {"invalidate", (PyCFunction)mem_invalidate, METH_NOARGS,
     "invalidate(): ptr = 0 (no new operation can start), without the checks of "
     "claim_close (freeing a collected buffer, finalize)."},
    {"take_base", (PyCFunction)mem_take_base, METH_NOARGS,
     "take_base() -> base address once (0 afterwards); the record leaves the registry."},
    {"register", (PyCFunction)mem_register_py, METH_NOARGS,
     "register(): enter the registry of live allocations (and the statistics)."},
    {"add_export", (PyCFunction)mem_add_export, METH_O,
     "add_export(token) -> address: a DLPack export, atomic with close(); 0 (not added) "
     "when closed."},
    {NULL, NULL, 0, NULL},
};

/* ---- attributes */
#define MEM_U64(name)                                                                \
    static PyObject *mem_get_##name(MemObject *m, void *Py_UNUSED(c))                \
    {                                                                                \
        return get_u64(m->name, &m->name##_o);                                       \
    }                                                                                \
    static int mem_set_##name(MemObject *m, PyObject *v, void *Py_UNUSED(c))         \
    {                                                                                \
        return set_u64(v, &m->name, &m->name##_o, #name);                            \
    }
MEM_U64(base)
MEM_U64(nbytes)

static PyObject *mem_get_gen(MemObject *m, void *Py_UNUSED(c))
{
    return PyLong_FromLongLong(m->gen);
}

static int mem_set_gen(MemObject *m, PyObject *v, void *Py_UNUSED(c))
{
    long long g;
    if (v == NULL || ((g = PyLong_AsLongLong(v)) == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_AttributeError, "cannot delete gen");
        }
        return -1;
    }
    m->gen = g;
    return 0;
}

static PyObject *mem_get_inuse(MemObject *m, void *Py_UNUSED(c))
{
    return PyLong_FromSsize_t(m->inuse);
}

static PyObject *mem_get_owner(MemObject *m, void *Py_UNUSED(c))
{
    PyObject *o = m->owner;
    if (o == NULL || Py_REFCNT(o) <= 0) { /* being deallocated */
        Py_RETURN_NONE;
    }
    return Py_NewRef(o);
}

static PyObject *mem_get_registered(MemObject *m, void *Py_UNUSED(c))
{
    return PyBool_FromLong(m->registered);
}

static PyObject *mem_get_fast(MemObject *m, void *Py_UNUSED(c))
{
    return PyBool_FromLong(m->pool != NULL);
}

/* Object attributes; NULL reads as None, `dead` as its default. */
#define MEM_OBJ(name)                                                                \
    static PyObject *mem_get_##name(MemObject *m, void *Py_UNUSED(c))                \
    {                                                                                \
        return Py_NewRef(m->name != NULL ? m->name : Py_None);                       \
    }                                                                                \
    static int mem_set_##name(MemObject *m, PyObject *v, void *Py_UNUSED(c))         \
    {                                                                                \
        mem_track(m);                                                                \
        Py_XSETREF(m->name, (v == NULL || v == Py_None) ? NULL : Py_NewRef(v));      \
        return 0;                                                                    \
    }
MEM_OBJ(ctx)
MEM_OBJ(keep)
MEM_OBJ(rel)
MEM_OBJ(release)

/* Lists, created on first use. */
#define MEM_LIST(name)                                                               \
    static PyObject *mem_get_##name(MemObject *m, void *Py_UNUSED(c))                \
    {                                                                                \
        if (m->name == NULL && (m->name = PyList_New(0)) == NULL) {                  \
            return NULL;                                                             \
        }                                                                            \
        mem_track(m); /* the list may get anything */                                \
        return Py_NewRef(m->name);                                                   \
    }                                                                                \
    static int mem_set_##name(MemObject *m, PyObject *v, void *Py_UNUSED(c))         \
    {                                                                                \
        if (v != NULL && !PyList_CheckExact(v)) {                                    \
            PyErr_SetString(PyExc_TypeError, #name " must be a list");               \
            return -1;                                                               \
        }                                                                            \
        mem_track(m);                                                                \
        Py_XSETREF(m->name, Py_XNewRef(v));                                          \
        return 0;                                                                    \
    }
MEM_LIST(streams)
MEM_LIST(exports)

static PyObject *mem_get_dead(MemObject *m, void *Py_UNUSED(c))
{
    return Py_NewRef(m->dead != NULL ? m->dead : s_default_dead);
}

static int mem_set_dead(MemObject *m, PyObject *v, void *Py_UNUSED(c))
{
    if (v == NULL || !PyUnicode_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "dead must be a str");
        return -1;
    }
    Py_XSETREF(m->dead, Py_NewRef(v));
    return 0;
}

#define RW(name, doc) {#name, (getter)mem_get_##name, (setter)mem_set_##name, doc, NULL}
#define RO(name, doc) {#name, (getter)mem_get_##name, NULL, doc, NULL}
static PyGetSetDef mem_getset[] = {
    RW(base, "address given back (aclrtFree / the cache); 0 once freed"),
    RW(nbytes, "size of the allocation in bytes"),
    RW(gen, "runtime generation of the allocation"),
    RW(ctx, "the context (CtxRef) it was allocated in, or None"),
    RW(streams, "weak references to the streams that used it"),
    RW(dead, "why it is unusable once closed"),
    RW(keep, "the explicit Context kept alive by the allocation, or None"),
    RW(rel, "the allocation backend's releaser, or None (ordered aclrtFree)"),
    RW(release, "DLPack import: the producer's deleter, called instead of a free"),
    RW(exports, "live DLPack exports (close() refuses while any)"),
    RO(inuse, "synchronous operations using the memory now"),
    RO(owner, "the owning HostBuffer, or None"),
    RO(registered, "True while in the registry of live allocations"),
    RO(fast, "True when the C hit path may free it"),
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *mem_repr(MemObject *m)
{
    char text[128];
    snprintf(text, sizeof(text), "<Mem 0x%llx (%llu bytes) on %s %d%s>",
             (unsigned long long)m->base, (unsigned long long)m->nbytes,
             m->device < 0 ? "host" : "device", m->device, m->ptr ? "" : ", closed");
    return PyUnicode_FromString(text);
}

/* Read on the hot paths of the copy engine: plain slots (the interpreter's attribute
 * cache reads them directly). `last` is written from Python by keepalive.note, which
 * then reads `streams` (a getter that tracks the record for the garbage collector). */
static PyMemberDef mem_members[] = {
    {"ptr", Py_T_OBJECT_EX, offsetof(MemObject, ptr_o), Py_READONLY,
     "address Python may use; 0 once closed, freed or made inert"},
    {"device", Py_T_OBJECT_EX, offsetof(MemObject, device_o), Py_READONLY,
     "device index; -1 for pinned host memory"},
    {"last", Py_T_OBJECT_EX, offsetof(MemObject, last), 0,
     "private state token of the stream that used it last (hot-path test), or None"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject MemType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyacl_rt._memcore.Mem",
    .tp_basicsize = sizeof(MemObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Mem(base, nbytes, device, ctx): one allocation record (device or pinned "
              "host memory), shared by a buffer and its views.",
    .tp_new = mem_new,
    .tp_dealloc = (destructor)mem_dealloc,
    .tp_traverse = (traverseproc)mem_traverse,
    .tp_clear = (inquiry)mem_clear,
    .tp_methods = mem_methods,
    .tp_members = mem_members,
    .tp_getset = mem_getset,
    .tp_repr = (reprfunc)mem_repr,
};

static MemObject *g_dead; /* closed views point at it */

/* ===================================================================== Pool */
/* One cache the hit path may use: a stream's cache in a device's Core, or the pinned
 * host pool's HostCore. Filled by the allocator (remember_device / remember_host). */
struct PoolObject {
    PyObject_HEAD
    int host;
    PyObject *core;   /* _cachecore.Core / HostCore */
    PyObject *token;  /* device: the stream's private state (identity key) */
    PyObject *ctx;    /* device: the stream's (primary) context */
    PyObject *rel;    /* the Python releaser, m.rel of the records it serves */
    PyObject *trim;   /* device: called when a free leaves the cache over budget */
    uint64_t key;     /* device: the stream's cache key */
    uint64_t ctx_handle;
    int64_t gen;
    int device;
};

static int pool_traverse(PoolObject *p, visitproc visit, void *arg)
{
    Py_VISIT(p->core);
    Py_VISIT(p->token);
    Py_VISIT(p->ctx);
    Py_VISIT(p->rel);
    Py_VISIT(p->trim);
    return 0;
}

static int pool_clear(PoolObject *p)
{
    Py_CLEAR(p->core);
    Py_CLEAR(p->token);
    Py_CLEAR(p->ctx);
    Py_CLEAR(p->rel);
    Py_CLEAR(p->trim);
    return 0;
}

static void pool_dealloc(PoolObject *p)
{
    PyObject_GC_UnTrack(p);
    pool_clear(p);
    Py_TYPE(p)->tp_free((PyObject *)p);
}

static PyObject *pool_repr(PoolObject *p)
{
    if (p->host) {
        return PyUnicode_FromFormat("<pinned host pool (generation %lld)>", (long long)p->gen);
    }
    char text[128];
    snprintf(text, sizeof(text), "<cache of stream 0x%llx on device %d (generation %lld)>",
             (unsigned long long)p->key, p->device, (long long)p->gen);
    return PyUnicode_FromString(text);
}

static PyTypeObject PoolType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyacl_rt._memcore.Pool",
    .tp_basicsize = sizeof(PoolObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A cache the C hit path serves buffers from (see remember_device).",
    .tp_dealloc = (destructor)pool_dealloc,
    .tp_traverse = (traverseproc)pool_traverse,
    .tp_clear = (inquiry)pool_clear,
    .tp_repr = (reprfunc)pool_repr,
};

static PoolObject *g_hot[NHOT];
static int g_hot_next;
static PoolObject *g_host_pool;

static inline PoolObject *hot_find(PyObject *token)
{
    for (int i = 0; i < NHOT; i++) {
        PoolObject *p = g_hot[i];
        if (p != NULL && p->token == token) {
            return p;
        }
    }
    return NULL;
}

static void forget_all_pools(void)
{
    for (int i = 0; i < NHOT; i++) {
        Py_CLEAR(g_hot[i]);
    }
    g_hot_next = 0;
    Py_CLEAR(g_host_pool);
}

/* ================================================================== buffers */
typedef struct {
    PyObject_HEAD
    MemObject *m;         /* the allocation record (DEAD for an empty / closed view) */
    uint64_t n, off;      /* the window [off, off + n) of it this object covers */
    PyObject *n_o, *off_o; /* the same as int objects: attributes _n, _off */
    PyObject *parent;     /* a view's parent (kept alive), or None */
    PyObject *weakreflist;
    Py_ssize_t nexports;  /* HostBase: live buffer-protocol exports */
    char owner;           /* frees m (close, deallocation) */
} BufObject;

static PyTypeObject DeviceBaseType, HostBaseType;

/* Do the streams noted on m allow the hit path to free it? With `token` (a device
 * cache): every one is dead or is the allocation stream (others need guard events);
 * without (pinned memory, a zero-byte buffer): every one is dead or closed (others need
 * guard events or a wait). */
static int streams_allow_fast(MemObject *m, PyObject *token)
{
    PyObject *l = m->streams;
    if (l == NULL) {
        return 1;
    }
    if (!PyList_CheckExact(l)) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(l); i++) {
        PyObject *r = PyList_GET_ITEM(l, i);
        if (!PyWeakref_CheckRef(r)) {
            return 0;
        }
#if PY_VERSION_HEX >= 0x030D0000
        PyObject *s;
        if (PyWeakref_GetRef(r, &s) < 0) {
            PyErr_Clear();
            return 0;
        }
        if (s == NULL) {
            continue;
        }
        Py_DECREF(s); /* the list's weakref target stays alive: GIL held, no Python code */
#else
        PyObject *s = PyWeakref_GET_OBJECT(r);
        if (s == Py_None) {
            continue;
        }
#endif
        if (!Py_IS_TYPE(s, g_stream_type)) {
            return 0;
        }
        if (token != NULL) {
            if (SLOT(s, off_s_state) != token) {
                return 0;
            }
            continue;
        }
        PyObject *ctx = SLOT(s, off_s_ctx);
        long d;
        if (ctx == NULL || !Py_IS_TYPE(ctx, g_ctx_type) || !as_long(SLOT(ctx, off_ctx_device), &d) ||
            d >= 0) {
            return 0; /* an open stream used the pinned block */
        }
    }
    return 1;
}

/* Free m's block into its cache, if the hit path may: returns 1 (done) or 0 (the
 * caller takes the Python path; nothing changed). Never raises. */
static int fast_free(MemObject *m)
{
    PoolObject *p = m->pool;
    int zero = p == NULL && m->base == ZERO_SIZE_BASE && m->release == NULL;
    if (GATE_CLOSED() || (p == NULL && !zero) || m->base == 0 || m->gen <= g_dead_gen ||
        (p != NULL && (g_cache == NULL || (g_tracing && !p->host)))) {
        return 0;
    }
    PyObject *st = thread_state();
    if (st == NULL || SLOT(st, off_ts_in_callback) != Py_False) {
        return 0; /* a host-callback thread: the releaser thread frees it */
    }
    if (!streams_allow_fast(m, (p != NULL && !p->host) ? p->token : NULL)) {
        return 0;
    }
    if (zero) { /* DeviceBuffer(0): nothing was allocated */
        SET_U64(m, base, 0);
        set_ptr(m, 0);
        Py_INCREF(m);
        mem_unregister(m);
        Py_CLEAR(m->keep);
        Py_DECREF(m);
        g_fast[1]++;
        return 1;
    }
    uint64_t base = m->base;
    SET_U64(m, base, 0);
    set_ptr(m, 0);
    Py_INCREF(m);
    mem_unregister(m);
    Py_CLEAR(m->keep);
    if (p->host) {
        if (g_cache->host_give(p->core, base, m->slot) == 0) {
            PyErr_Clear(); /* the pool was torn down meanwhile */
        }
        g_fast[3]++;
        Py_DECREF(m);
        return 1;
    }
    int64_t r = g_cache->dev_free(p->core, base);
    g_fast[1]++;
    Py_INCREF(p);
    Py_DECREF(m);
    if (r == 0) {
        PyErr_Clear();
        if (g_unknown_block != NULL) {
            PyObject *res = PyObject_CallFunction(g_unknown_block, "K", (unsigned long long)base);
            Py_XDECREF(res);
            PyErr_Clear();
        }
    } else if (r < 0 && p->trim != NULL) {
        PyObject *res = PyObject_CallNoArgs(p->trim); /* never raises; if it did: ignored */
        Py_XDECREF(res);
        PyErr_Clear();
    }
    Py_DECREF(p);
    return 1;
}

/* self owns m (a reference is stolen) and covers all of it: n_obj (an exact int). */
static void buf_take(BufObject *self, MemObject *m, PyObject *n_obj)
{
    Py_SETREF(self->m, m);
    self->n = m->nbytes;
    Py_XSETREF(self->n_o, Py_NewRef(n_obj));
    if (self->off != 0 || self->off_o != g_zero) {
        self->off = 0;
        Py_XSETREF(self->off_o, Py_NewRef(g_zero));
    }
    if (self->parent != Py_None) {
        Py_XSETREF(self->parent, Py_NewRef(Py_None));
    }
    self->owner = 1;
}

/* ---- DeviceBuffer(nbytes, device=None, policy=0, *, stream=None), the hit path: returns
 * 1 (done), 0 (take the Python path; nothing changed) or -1 (error). */
static int device_fast_init(BufObject *self, PyObject *nbytes, PyObject *device,
                            PyObject *policy, PyObject *stream)
{
    if (GATE_CLOSED() || g_cache == NULL || g_tracing || g_stream_type == NULL ||
        g_local == NULL) {
        return 0;
    }
    long n;
    if (!as_long(nbytes, &n) || n < 0 || n > FAST_MAX) {
        return 0;
    }
    long v;
    if (policy != NULL && (!as_long(policy, &v) || v != 0)) {
        return 0; /* a non-default policy is one aclrtMalloc */
    }
    if (PyList_GET_SIZE(g_deferred) != 0) {
        return 0; /* the Python path frees those first */
    }
    PyObject *st = thread_state();
    if (st == NULL) {
        return 0;
    }
    long index;
    if (device == NULL || device == Py_None) {
        if (!as_long(SLOT(st, off_ts_device), &index)) {
            return 0;
        }
        if (index < 0 && !as_long(PyDict_GetItemWithError(g_stg, s_fallback_device), &index)) {
            PyErr_Clear();
            return 0;
        }
    } else if (!as_long(device, &index) || index < 0) {
        return 0;
    }
    PyObject *active = SLOT(st, off_ts_active);
    if (active == NULL) {
        return 0;
    }
    if (active != Py_None) {
        long ad;
        if (!Py_IS_TYPE(active, g_ctx_type) || !as_long(SLOT(active, off_ctx_device), &ad) ||
            ad == index) {
            return 0; /* an explicit Context allocates on its own */
        }
    }
    PyObject *s = stream;
    if (s == NULL || s == Py_None) { /* current_stream(index) */
        PyObject *streams = SLOT(st, off_ts_streams);
        if (streams == NULL || !PyDict_CheckExact(streams)) {
            return 0;
        }
        PyObject *key = PyLong_FromLong(index);
        if (key == NULL) {
            return -1;
        }
        s = PyDict_GetItemWithError(streams, key);
        if (s == NULL && !PyErr_Occurred() && active == Py_None) {
            s = PyDict_GetItemWithError(g_primary_defaults, key);
        }
        Py_DECREF(key);
        if (s == NULL) {
            PyErr_Clear();
            return 0;
        }
    }
    if (!Py_IS_TYPE(s, g_stream_type)) {
        return 0;
    }
    PoolObject *p = hot_find(SLOT(s, off_s_state));
    if (p == NULL) {
        return 0;
    }
    PyObject *ctx = p->ctx;
    long d, sd;
    uint64_t cur;
    if (SLOT(s, off_s_ctx) != ctx || SLOT(st, off_ts_ctx) != ctx ||
        !as_long(SLOT(ctx, off_ctx_device), &d) || d != index ||
        !as_long(SLOT(s, off_s_device), &sd) || sd != index || p->gen <= g_dead_gen ||
        !runtime_context(&cur) || cur != p->ctx_handle) {
        return 0;
    }
    MemObject *m = mem_alloc(); /* before the cache changes: GC may free into it */
    if (m == NULL) {
        return -1;
    }
    SET_U64(m, nbytes, (uint64_t)n);
    m->device = (int)index;
    Py_SETREF(m->device_o, Py_NewRef(SLOT(s, off_s_device))); /* the int index */
    m->gen = p->gen;
    m->ctx = Py_NewRef(ctx);
    if (n == 0) { /* an empty batch: nothing is allocated (ACL cannot allocate 0) */
        if (set_ptr(m, ZERO_SIZE_BASE) < 0) {
            Py_DECREF(m);
            return -1;
        }
        SET_U64(m, base, ZERO_SIZE_BASE);
    } else {
        uint64_t ptr = g_cache->dev_alloc(p->core, p->key, (uint64_t)n);
        if (ptr == 0) {
            PyErr_Clear();
            Py_DECREF(m);
            return 0; /* a miss: the Python path allocates a segment */
        }
        if (set_ptr(m, ptr) < 0) { /* out of memory: the block goes back */
            g_cache->dev_free(p->core, ptr);
            Py_DECREF(m);
            return -1;
        }
        SET_U64(m, base, ptr);
        m->rel = Py_NewRef(p->rel);
        m->pool = (PoolObject *)Py_NewRef(p);
    }
    mem_register(m);
    buf_take(self, m, nbytes);
    g_fast[0]++;
    return 1;
}

static int device_init(BufObject *self, PyObject *nbytes, PyObject *device, PyObject *policy,
                       PyObject *stream)
{
    if (self->owner) {
        PyErr_SetString(PyExc_RuntimeError,
                        "DeviceBuffer.__init__() called again on a buffer that owns memory");
        return -1;
    }
    int r = device_fast_init(self, nbytes, device, policy, stream);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    if (g_dev_init == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pyacl_rt._memcore is not bound");
        return -1;
    }
    PyObject *res = PyObject_CallFunctionObjArgs(
        g_dev_init, (PyObject *)self, nbytes, device ? device : Py_None,
        policy ? policy : g_default_policy, stream ? stream : Py_None, NULL);
    if (res == NULL) {
        return -1;
    }
    Py_DECREF(res);
    return 0;
}

static int device_tp_init(BufObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nbytes", "device", "policy", "stream", NULL};
    PyObject *nbytes, *device = NULL, *policy = NULL, *stream = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|OO$O:DeviceBuffer", kwlist, &nbytes,
                                     &device, &policy, &stream)) {
        return -1;
    }
    return device_init(self, nbytes, device, policy, stream);
}

/* ---- HostBuffer(nbytes), the hit path (same contract as device_fast_init). */
static int host_fast_init(BufObject *self, PyObject *nbytes)
{
    PoolObject *p = g_host_pool;
    long n;
    if (GATE_CLOSED() || p == NULL || g_cache == NULL || g_local == NULL || !as_long(nbytes, &n) ||
        n <= 0 ||
        n > FAST_MAX || PyList_GET_SIZE(g_deferred) != 0 || p->gen <= g_dead_gen) {
        return 0;
    }
    PyObject *st = thread_state();
    if (st == NULL) {
        return 0;
    }
    /* The thread's context, validated against the runtime (as the Python path does); a
     * primary context only (an explicit one is kept alive by the buffer: Python path). */
    PyObject *ctx = SLOT(st, off_ts_ctx);
    uint64_t handle, cur;
    if (ctx == NULL || !Py_IS_TYPE(ctx, g_ctx_type) || SLOT(ctx, off_ctx_owner) != Py_None ||
        !ctx_handle(ctx, &handle) || !runtime_context(&cur) || cur != handle) {
        return 0;
    }
    MemObject *m = mem_alloc();
    if (m == NULL) {
        return -1;
    }
    uint64_t ptr = g_cache->host_take(p->core, (uint64_t)n, &m->slot);
    if (ptr == 0) {
        PyErr_Clear();
        Py_DECREF(m);
        return 0;
    }
    if (set_ptr(m, ptr) < 0) {
        g_cache->host_give(p->core, ptr, m->slot);
        Py_DECREF(m);
        return -1;
    }
    SET_U64(m, base, ptr);
    SET_U64(m, nbytes, (uint64_t)n);
    m->gen = p->gen;
    m->ctx = Py_NewRef(ctx);
    m->rel = Py_NewRef(p->rel);
    m->pool = (PoolObject *)Py_NewRef(p);
    m->owner = (PyObject *)self;
    mem_register(m);
    buf_take(self, m, nbytes);
    g_fast[2]++;
    return 1;
}

static int host_init(BufObject *self, PyObject *nbytes)
{
    if (self->owner) {
        PyErr_SetString(PyExc_RuntimeError,
                        "HostBuffer.__init__() called again on a buffer that owns memory");
        return -1;
    }
    int r = host_fast_init(self, nbytes);
    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    if (g_host_init == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pyacl_rt._memcore is not bound");
        return -1;
    }
    PyObject *res = PyObject_CallFunctionObjArgs(g_host_init, (PyObject *)self, nbytes, NULL);
    if (res == NULL) {
        return -1;
    }
    Py_DECREF(res);
    return 0;
}

static int host_tp_init(BufObject *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"nbytes", NULL};
    PyObject *nbytes;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:HostBuffer", kwlist, &nbytes)) {
        return -1;
    }
    return host_init(self, nbytes);
}

static PyObject *buf_alloc(PyTypeObject *tp);

static PyObject *buf_new(PyTypeObject *type, PyObject *Py_UNUSED(args),
                         PyObject *Py_UNUSED(kwds))
{
    return buf_alloc(type);
}

/* ---- calling the class: new + init in one step, no argument tuple (installed on the
 * Python classes by install_fast_call). Anything unusual goes through type.__call__. */
static PyObject *generic_call(PyObject *type, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    PyObject *tuple = PyTuple_New(nargs);
    if (tuple == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    }
    PyObject *kw = NULL;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames)) {
        kw = PyDict_New();
        for (Py_ssize_t i = 0; kw != NULL && i < PyTuple_GET_SIZE(kwnames); i++) {
            if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) {
                Py_CLEAR(kw);
            }
        }
        if (kw == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
    }
    PyObject *r = Py_TYPE(type)->tp_call(type, tuple, kw);
    Py_DECREF(tuple);
    Py_XDECREF(kw);
    return r;
}

static PyObject *device_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames)
{
    PyTypeObject *tp = (PyTypeObject *)type;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *v[4] = {NULL, NULL, NULL, NULL}; /* nbytes, device, policy, stream */
    if (tp->tp_init != (initproc)device_tp_init || tp->tp_new != buf_new || nargs > 3) {
        return generic_call(type, args, nargs, kwnames);
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        v[i] = args[i];
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        int at = k == s_stream ? 3 : k == s_device ? 1 : k == s_policy ? 2 : k == s_nbytes ? 0 : -1;
        if (at < 0 || v[at] != NULL) { /* not interned, unknown or twice: type.__call__ */
            return generic_call(type, args, nargs, kwnames);
        }
        v[at] = args[nargs + i];
    }
    if (v[0] == NULL) {
        return generic_call(type, args, nargs, kwnames);
    }
    PyObject *self = buf_alloc(tp);
    if (self == NULL) {
        return NULL;
    }
    if (device_init((BufObject *)self, v[0], v[1], v[2], v[3]) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

static PyObject *host_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames)
{
    PyTypeObject *tp = (PyTypeObject *)type;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (tp->tp_init != (initproc)host_tp_init || tp->tp_new != buf_new || nargs != 1 ||
        (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        return generic_call(type, args, nargs, kwnames);
    }
    PyObject *self = buf_alloc(tp);
    if (self == NULL) {
        return NULL;
    }
    if (host_init((BufObject *)self, args[0]) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

/* ---- close() */
static PyObject *call_slow(PyObject *fn, BufObject *self)
{
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pyacl_rt._memcore is not bound");
        return NULL;
    }
    return PyObject_CallOneArg(fn, (PyObject *)self);
}

/* Methods without arguments take METH_FASTCALL to name the class in the error. */
static int no_args(PyObject *self, Py_ssize_t nargs, const char *meth)
{
    if (LIKELY(nargs == 0)) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%.80s.%s() takes no positional arguments (%zd given)",
                 Py_TYPE(self)->tp_name, meth, nargs);
    return -1;
}

static PyObject *device_close(BufObject *self, PyObject *const *Py_UNUSED(args),
                              Py_ssize_t nargs)
{
    if (no_args((PyObject *)self, nargs, "close") < 0) {
        return NULL;
    }
    MemObject *m = self->m;
    if (!self->owner) { /* a view: drop it (keep the reason if its parent is closed) */
        if (self->parent != NULL && self->parent != Py_None) {
            if (m->ptr) {
                Py_SETREF(self->m, (MemObject *)Py_NewRef(g_dead));
            }
            Py_SETREF(self->parent, Py_NewRef(Py_None));
        }
        Py_RETURN_NONE;
    }
    if (m->ptr == 0 && m->base == 0) {
        Py_RETURN_NONE; /* closed, or made inert by finalize */
    }
    if (m->ptr != 0 && m->ptr == m->base && list_len(m->exports) == 0 && m->inuse == 0 &&
        fast_free(m)) {
        Py_RETURN_NONE;
    }
    return call_slow(g_dev_close, self);
}

static PyObject *host_close(BufObject *self, PyObject *const *Py_UNUSED(args),
                            Py_ssize_t nargs)
{
    if (no_args((PyObject *)self, nargs, "close") < 0) {
        return NULL;
    }
    MemObject *m = self->m;
    if (!self->owner || (m->ptr == 0 && m->base == 0)) {
        Py_RETURN_NONE;
    }
    if (m->ptr != 0 && m->ptr == m->base && list_len(m->exports) == 0 && m->inuse == 0 &&
        self->nexports == 0 && fast_free(m)) {
        Py_RETURN_NONE;
    }
    return call_slow(g_host_close, self);
}

static PyObject *buf_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self);
}

static PyObject *buf_exit(PyObject *self, PyObject *const *Py_UNUSED(args),
                          Py_ssize_t Py_UNUSED(nargs))
{
    PyObject *r = PyObject_CallMethodNoArgs(self, s_close);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* _own(m): take the record m (a new allocation or a DLPack import): freed by close(),
 * garbage collection or finalize. */
static PyObject *buf_own(BufObject *self, PyObject *arg)
{
    if (!Py_IS_TYPE(arg, &MemType)) {
        PyErr_Format(PyExc_TypeError, "_own() needs a Mem, not %.80s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    if (self->owner) {
        PyErr_SetString(PyExc_RuntimeError, "this buffer already owns an allocation");
        return NULL;
    }
    MemObject *m = (MemObject *)arg;
    if (PyObject_TypeCheck(self, &HostBaseType)) {
        m->owner = (PyObject *)self;
    }
    if (m->pool == NULL && m->rel != NULL && m->release == NULL) {
        /* A block the Python path took from a cache the hit path knows: its free can
         * take the hit path too. */
        PoolObject *p = g_host_pool != NULL && g_host_pool->rel == m->rel ? g_host_pool : NULL;
        for (int i = 0; p == NULL && i < NHOT; i++) {
            if (g_hot[i] != NULL && g_hot[i]->rel == m->rel && g_hot[i]->gen == m->gen) {
                p = g_hot[i];
            }
        }
        if (p != NULL && p->gen == m->gen) {
            m->pool = (PoolObject *)Py_NewRef(p);
        }
    }
    PyObject *n = get_u64(m->nbytes, &m->nbytes_o);
    if (n == NULL) {
        return NULL;
    }
    buf_take(self, (MemObject *)Py_NewRef(m), n);
    Py_DECREF(n);
    mem_register(m);
    Py_RETURN_NONE;
}

static PyObject *host_exports(BufObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t(self->nexports);
}

static int buf_traverse(BufObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->m);
    Py_VISIT(self->parent);
    return 0;
}

static int buf_clear(BufObject *self)
{
    Py_CLEAR(self->parent); /* m stays: deallocation frees it */
    return 0;
}

/* Freed DeviceBuffer / HostBuffer objects of the classes install_fast_call() set up. */
static PyObject *g_free_bufs[NFREE];
static int g_nfree_bufs;

static void buf_release(BufObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    MemObject *m = self->m;
    if (m != NULL && m->owner == (PyObject *)self) {
        m->owner = NULL;
    }
    if (self->owner && m != NULL && m->base != 0) {
        /* An unclosed buffer was collected: free its memory (as weakref.finalize did). */
        SAVE_EXC;
        if (!fast_free(m) && g_free_mem != NULL) {
            PyObject *r = PyObject_CallOneArg(g_free_mem, (PyObject *)m);
            if (r == NULL) {
                PyErr_Clear(); /* free_mem never raises; interpreter shutdown */
            }
            Py_XDECREF(r);
        }
        RESTORE_EXC;
    }
    Py_CLEAR(self->m);
    Py_CLEAR(self->parent);
    Py_CLEAR(self->n_o);
    Py_CLEAR(self->off_o);
}

/* tp_dealloc of the C base types (their Python subclasses: through subtype_dealloc). */
static void buf_dealloc(BufObject *self)
{
    buf_release(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* tp_dealloc installed on DeviceBuffer / HostBuffer (Python classes without instance
 * dict, slots or finalizer: what subtype_dealloc would do is buf_release + free + type
 * reference), and inherited by subtype_dealloc of their own subclasses as the base's. */
static void buf_dealloc_heap(BufObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    buf_release(self);
    if (tp->tp_basicsize == sizeof(BufObject) && tp->tp_dealloc == (destructor)buf_dealloc_heap &&
        g_nfree_bufs < NFREE) {
        g_free_bufs[g_nfree_bufs++] = (PyObject *)self;
    } else {
        tp->tp_free((PyObject *)self);
    }
    Py_DECREF(tp);
}

/* A new, empty instance of `tp` (m = DEAD). */
static PyObject *buf_alloc(PyTypeObject *tp)
{
    PyObject *self;
    if (g_nfree_bufs > 0 && tp->tp_dealloc == (destructor)buf_dealloc_heap &&
        tp->tp_basicsize == sizeof(BufObject)) {
        self = g_free_bufs[--g_nfree_bufs];
        memset((char *)self + sizeof(PyObject), 0, sizeof(BufObject) - sizeof(PyObject));
        revive(self, tp); /* with a reference to the (heap) type */
        PyObject_GC_Track(self);
    } else {
        self = tp->tp_alloc(tp, 0);
        if (self == NULL) {
            return NULL;
        }
    }
    BufObject *b = (BufObject *)self;
    b->m = (MemObject *)Py_NewRef(g_dead);
    b->n_o = Py_NewRef(g_zero);
    b->off_o = Py_NewRef(g_zero);
    b->parent = Py_NewRef(Py_None);
    return self;
}

/* ---- attributes shared by both: plain slots for the interpreter's attribute cache */
static PyMemberDef buf_members[] = {
    {"mem", Py_T_OBJECT_EX, offsetof(BufObject, m), Py_READONLY, "the allocation record"},
    {"window_nbytes", Py_T_OBJECT_EX, offsetof(BufObject, n_o), Py_READONLY,
     "bytes this object covers"},
    {"mem_offset", Py_T_OBJECT_EX, offsetof(BufObject, off_o), Py_READONLY,
     "offset into the allocation"},
    {"_parent", Py_T_OBJECT_EX, offsetof(BufObject, parent), Py_READONLY,
     "a view's parent, or None"},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *buf_get_owns(BufObject *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->owner);
}

static PyGetSetDef buf_getset[] = {
    {"_owns", (getter)buf_get_owns, NULL, "True when this object frees the allocation", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* _view(start, nbytes): a view of bytes [start, start + nbytes) of this buffer (checked
 * by the caller, checked again here), sharing its record and keeping its parent alive. */
static PyObject *device_view(BufObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t start, n;
    if (nargs != 2 || u64_value(args[0], &start, "start") < 0 ||
        u64_value(args[1], &n, "nbytes") < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "_view(start, nbytes)");
        }
        return NULL;
    }
    if (start > self->n || n > self->n - start) {
        PyErr_Format(PyExc_IndexError, "view [%llu:%llu] outside a buffer of %llu bytes",
                     (unsigned long long)start, (unsigned long long)(start + n),
                     (unsigned long long)self->n);
        return NULL;
    }
    PyObject *off = PyLong_FromUnsignedLongLong(self->off + start);
    if (off == NULL) {
        return NULL;
    }
    BufObject *v = (BufObject *)buf_alloc(Py_TYPE(self));
    if (v == NULL) {
        Py_DECREF(off);
        return NULL;
    }
    Py_SETREF(v->m, (MemObject *)Py_NewRef(self->m));
    v->off = self->off + start;
    Py_SETREF(v->off_o, off);
    v->n = n;
    Py_SETREF(v->n_o, Py_NewRef(args[1]));
    PyObject *parent = (self->parent != NULL && self->parent != Py_None) ? self->parent
                                                                          : (PyObject *)self;
    Py_SETREF(v->parent, Py_NewRef(parent));
    return (PyObject *)v;
}

static PyMethodDef device_methods[] = {
    {"_view", (PyCFunction)(void (*)(void))device_view, METH_FASTCALL,
     "_view(start, nbytes): a view sharing this buffer's memory (bounds checked)."},
    {"close", (PyCFunction)(void (*)(void))device_close, METH_FASTCALL,
     "Free the memory (allocation) or drop the view. Idempotent (see DeviceBuffer.close)."},
    {"own_mem", (PyCFunction)buf_own, METH_O, "own_mem(m): take the allocation record m."},
    {"__enter__", buf_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))buf_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef host_methods[] = {
    {"close", (PyCFunction)(void (*)(void))host_close, METH_FASTCALL,
     "Free the memory. Idempotent (see HostBuffer.close)."},
    {"own_mem", (PyCFunction)buf_own, METH_O, "own_mem(m): take the allocation record m."},
    {"export_count", (PyCFunction)host_exports, METH_NOARGS,
     "Live buffer-protocol exports (memoryviews / numpy arrays) of the memory."},
    {"__enter__", buf_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))buf_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

/* ---- HostBase: the buffer protocol, exports counted (close() refuses while any). */
static int host_getbuffer(BufObject *self, Py_buffer *view, int flags)
{
    MemObject *m = self->m;
    view->obj = NULL;
    if (!self->owner || m->ptr == 0) {
        PyObject *r = g_raise_closed == NULL
                          ? NULL
                          : PyObject_CallFunction(g_raise_closed, "Os", (PyObject *)m, "HostBuffer");
        Py_XDECREF(r);
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_BufferError, "HostBuffer is closed");
        }
        return -1;
    }
    if (self->n > (uint64_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_BufferError, "HostBuffer too large to export");
        return -1;
    }
    if (g_host_read != NULL) { /* the race sanitizer: the host is about to read it */
        PyObject *r = PyObject_CallFunction(g_host_read, "KK", (unsigned long long)(m->ptr + self->off),
                                            (unsigned long long)self->n);
        if (r == NULL) {
            return -1;
        }
        Py_DECREF(r);
    }
    if (PyBuffer_FillInfo(view, (PyObject *)self, (void *)(uintptr_t)(m->ptr + self->off),
                          (Py_ssize_t)self->n, 0, flags) < 0) {
        return -1;
    }
    self->nexports++;
    return 0;
}

static void host_releasebuffer(BufObject *self, Py_buffer *Py_UNUSED(view))
{
    if (self->nexports > 0) {
        self->nexports--;
    }
}

static PyBufferProcs host_as_buffer = {(getbufferproc)host_getbuffer,
                                       (releasebufferproc)host_releasebuffer};

static PyTypeObject DeviceBaseType = {
    /* No module in the name: help(DeviceBuffer) lists its bases, and this one is not
     * something to import (pyacl_rt._memcore.DeviceBase). */
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "DeviceBufferBase",
    .tp_basicsize = sizeof(BufObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Base of pyacl_rt.DeviceBuffer: the allocation record, the window, close().",
    .tp_new = buf_new,
    .tp_init = (initproc)device_tp_init,
    .tp_dealloc = (destructor)buf_dealloc,
    .tp_traverse = (traverseproc)buf_traverse,
    .tp_clear = (inquiry)buf_clear,
    .tp_weaklistoffset = offsetof(BufObject, weakreflist),
    .tp_methods = device_methods,
    .tp_members = buf_members,
    .tp_getset = buf_getset,
};

static PyTypeObject HostBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "HostBufferBase", /* (see DeviceBufferBase) */
    .tp_basicsize = sizeof(BufObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Base of pyacl_rt.HostBuffer: the allocation record, close(), the buffer "
              "protocol (exports counted).",
    .tp_new = buf_new,
    .tp_init = (initproc)host_tp_init,
    .tp_dealloc = (destructor)buf_dealloc,
    .tp_traverse = (traverseproc)buf_traverse,
    .tp_clear = (inquiry)buf_clear,
    .tp_weaklistoffset = offsetof(BufObject, weakreflist),
    .tp_methods = host_methods,
    .tp_members = buf_members,
    .tp_getset = buf_getset,
    .tp_as_buffer = &host_as_buffer,
};

/* =========================================================== module functions */
static int slot_offset(PyTypeObject *tp, const char *name, Py_ssize_t *out)
{
    PyObject *d = PyObject_GetAttrString((PyObject *)tp, name);
    if (d == NULL) {
        return -1;
    }
    int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
             ((PyMemberDescrObject *)d)->d_member->type == Py_T_OBJECT_EX;
    if (ok) {
        *out = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    Py_DECREF(d);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "_memcore: %s.%s is not a __slots__ attribute",
                     tp->tp_name, name);
        return -1;
    }
    return 0;
}

/* Must match pyacl_rt/_raw/_fastcall.c (checked through magic/version/size). */
struct pyacl_gate_api {
    uint32_t magic;
    uint32_t version;
    uint32_t size;
    const int *closed;
};

/* Must match pyacl_rt/_raw/_lowlevel_build.py (checked through magic/version/size). */
struct pyacl_lowlevel_api {
    uint32_t magic;
    uint32_t version;
    uint32_t size;
    int32_t nfunc;
    void *const *table;
    const char *const *names;
    int (*is_loaded)(void);
    void (*set_missing)(int index);
};

static int set_obj(PyObject **slot, PyObject *v)
{
    Py_XSETREF(*slot, Py_NewRef(v));
    return 0;
}

static PyObject *mod_bind(PyObject *Py_UNUSED(mod), PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"runtime_globals", "state_globals", "thread_state", "ctx_ref",
                             "deferred", "free_mem", "raise_closed", "unknown_block",
                             "lowlevel_api", "gate_api", NULL};
    PyObject *rt, *stg, *ts, *ctx, *deferred, *free_mem, *raise_closed, *unknown;
    unsigned long long api_addr, gate_addr;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!O!O!O!OOOKK:bind", kwlist, &PyDict_Type,
                                     &rt, &PyDict_Type, &stg, &PyType_Type, &ts, &PyType_Type,
                                     &ctx, &PyList_Type, &deferred, &free_mem, &raise_closed,
                                     &unknown, &api_addr, &gate_addr)) {
        return NULL;
    }
    const struct pyacl_gate_api *gate = (const void *)(uintptr_t)gate_addr;
    if (gate == NULL || gate->magic != 0x50474154u || gate->version != 1u ||
        gate->size < sizeof(struct pyacl_gate_api) || gate->closed == NULL) {
        PyErr_SetString(PyExc_ImportError,
                        "pyacl_rt._memcore does not match pyacl_rt._raw._fastcall: rebuild the "
                        "package");
        return NULL;
    }
    const struct pyacl_lowlevel_api *api = (const void *)(uintptr_t)api_addr;
    if (api == NULL || api->magic != 0x5041434Cu || api->version != 1u ||
        api->size < sizeof(struct pyacl_lowlevel_api)) {
        PyErr_SetString(PyExc_ImportError,
                        "pyacl_rt._memcore does not match pyacl_rt._raw._lowlevel_cffi: rebuild "
                        "the package");
        return NULL;
    }
    int idx = -1;
    for (int i = 0; i < api->nfunc; i++) {
        if (strcmp(api->names[i], "aclrtGetCurrentContext") == 0) {
            idx = i;
            break;
        }
    }
    PyTypeObject *tst = (PyTypeObject *)ts, *ctt = (PyTypeObject *)ctx;
    Py_ssize_t o[8];
    if (slot_offset(tst, "device", &o[0]) < 0 || slot_offset(tst, "active", &o[1]) < 0 ||
        slot_offset(tst, "in_callback", &o[2]) < 0 || slot_offset(tst, "streams", &o[3]) < 0 ||
        slot_offset(tst, "ctx", &o[4]) < 0 || slot_offset(ctt, "device", &o[5]) < 0 ||
        slot_offset(ctt, "handle", &o[6]) < 0 || slot_offset(ctt, "owner", &o[7]) < 0) {
        return NULL;
    }
    PyObject *local = PyDict_GetItemString(stg, "_local");
    if (local == NULL) {
        PyErr_SetString(PyExc_TypeError, "bind: state_globals has no _local");
        return NULL;
    }
    off_ts_device = o[0];
    off_ts_active = o[1];
    off_ts_in_callback = o[2];
    off_ts_streams = o[3];
    off_ts_ctx = o[4];
    off_ctx_device = o[5];
    off_ctx_handle = o[6];
    off_ctx_owner = o[7];
    set_obj(&g_rt, rt);
    set_obj(&g_stg, stg);
    set_obj(&g_local, local);
    set_obj((PyObject **)&g_ts_type, ts);
    set_obj((PyObject **)&g_ctx_type, ctx);
    set_obj(&g_deferred, deferred);
    set_obj(&g_free_mem, free_mem);
    set_obj(&g_raise_closed, raise_closed);
    set_obj(&g_unknown_block, unknown);
    g_table = api->table;
    g_idx_get_ctx = idx;
    g_gate_closed = gate->closed;
    Py_RETURN_NONE;
}

static PyObject *mod_bind_buffers(PyObject *Py_UNUSED(mod), PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"stream", "primary_defaults", "device_init", "device_close",
                             "host_init", "host_close", "default_policy", NULL};
    PyObject *stream, *defaults, *dinit, *dclose, *hinit, *hclose, *policy;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!OOOOO!:bind_buffers", kwlist,
                                     &PyType_Type, &stream, &PyDict_Type, &defaults, &dinit,
                                     &dclose, &hinit, &hclose, &PyLong_Type, &policy)) {
        return NULL;
    }
    PyTypeObject *st = (PyTypeObject *)stream;
    Py_ssize_t o[3];
    if (slot_offset(st, "ctx_ref", &o[0]) < 0 || slot_offset(st, "dev_index", &o[1]) < 0 ||
        slot_offset(st, "stream_state", &o[2]) < 0) {
        return NULL;
    }
    off_s_ctx = o[0];
    off_s_device = o[1];
    off_s_state = o[2];
    set_obj((PyObject **)&g_stream_type, stream);
    set_obj(&g_primary_defaults, defaults);
    set_obj(&g_dev_init, dinit);
    set_obj(&g_dev_close, dclose);
    set_obj(&g_host_init, hinit);
    set_obj(&g_host_close, hclose);
    set_obj(&g_default_policy, policy);
    Py_RETURN_NONE;
}

static PyObject *mod_set_cache_api(PyObject *Py_UNUSED(mod), PyObject *capsule)
{
    const PyaclCacheAPI *api = PyCapsule_GetPointer(capsule, PYACL_CACHE_API_CAPSULE);
    if (api == NULL) {
        return NULL;
    }
    if (api->version != PYACL_CACHE_API_VERSION || api->size < sizeof(PyaclCacheAPI)) {
        PyErr_SetString(PyExc_ImportError,
                        "pyacl_rt._memcore does not match pyacl_rt._cachecore: rebuild the "
                        "package");
        return NULL;
    }
    g_cache = api;
    Py_RETURN_NONE;
}

/* set_host_read_hook(hook or None): hook(ptr, nbytes) runs before each export of a
 * HostBuffer (pyacl_rt._sanitize: declares the host read to the mock's race sanitizer). */
static PyObject *mod_set_host_read_hook(PyObject *Py_UNUSED(mod), PyObject *hook)
{
    if (hook != Py_None && !PyCallable_Check(hook)) {
        PyErr_Format(PyExc_TypeError, "set_host_read_hook(): hook must be callable or None, not %.100s",
                     Py_TYPE(hook)->tp_name);
        return NULL;
    }
    PyObject *old = g_host_read;
    g_host_read = hook == Py_None ? NULL : Py_NewRef(hook);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *mod_set_tracing(PyObject *Py_UNUSED(mod), PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    g_tracing = on;
    Py_RETURN_NONE;
}

static PoolObject *pool_new(void)
{
    PoolObject *p = PyObject_GC_New(PoolObject, &PoolType);
    if (p != NULL) {
        p->host = 0;
        p->core = p->token = p->ctx = p->rel = p->trim = NULL;
        p->key = p->ctx_handle = 0;
        p->gen = 0;
        p->device = -1;
        PyObject_GC_Track(p);
    }
    return p;
}

/* remember_device(core, key, token, ctx, rel, trim, gen): buffers of the stream whose
 * private state is `token` (a stream of the primary context `ctx`) come from `core`'s
 * cache `key`; their releaser is `rel`; `trim()` after a free over budget. */
static PyObject *mod_remember_device(PyObject *Py_UNUSED(mod), PyObject *const *args,
                                     Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "remember_device() takes 7 arguments");
        return NULL;
    }
    PyObject *core = args[0], *token = args[2], *ctx = args[3], *rel = args[4], *trim = args[5];
    uint64_t key;
    long long gen = PyLong_AsLongLong(args[6]);
    if ((gen == -1 && PyErr_Occurred()) || u64_value(args[1], &key, "key") < 0) {
        return NULL;
    }
    if (g_cache == NULL || g_ctx_type == NULL || !g_cache->is_core(core) ||
        !Py_IS_TYPE(ctx, g_ctx_type)) {
        Py_RETURN_FALSE; /* not something the hit path can serve (e.g. a stand-in Core) */
    }
    uint64_t handle;
    long device;
    if (u64_value(SLOT(ctx, off_ctx_handle), &handle, "ctx.handle") < 0) {
        return NULL;
    }
    if (!as_long(SLOT(ctx, off_ctx_device), &device) || device < 0 || gen <= g_dead_gen) {
        Py_RETURN_FALSE; /* a dead context / generation: nothing to serve */
    }
    int at = -1;
    for (int i = 0; i < NHOT; i++) {
        PoolObject *p = g_hot[i];
        if (p != NULL && p->token == token) {
            if (p->core == core && p->key == key && p->ctx == ctx && p->rel == rel &&
                p->gen == gen) {
                Py_RETURN_TRUE;
            }
            at = i;
            break;
        }
    }
    PoolObject *p = pool_new();
    if (p == NULL) {
        return NULL;
    }
    p->core = Py_NewRef(core);
    p->token = Py_NewRef(token);
    p->ctx = Py_NewRef(ctx);
    p->rel = Py_NewRef(rel);
    p->trim = Py_NewRef(trim);
    p->key = key;
    p->ctx_handle = handle;
    p->gen = gen;
    p->device = (int)device;
    if (at < 0) {
        at = g_hot_next;
        g_hot_next = (g_hot_next + 1) % NHOT;
    }
    Py_XSETREF(g_hot[at], p);
    Py_RETURN_TRUE;
}

/* remember_host(core, rel, gen): HostBuffers come from the HostCore `core`. */
static PyObject *mod_remember_host(PyObject *Py_UNUSED(mod), PyObject *const *args,
                                   Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "remember_host() takes 3 arguments");
        return NULL;
    }
    long long gen = PyLong_AsLongLong(args[2]);
    if (gen == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (g_cache == NULL || !g_cache->is_host_core(args[0]) || gen <= g_dead_gen) {
        Py_RETURN_FALSE;
    }
    PoolObject *cur = g_host_pool;
    if (cur != NULL && cur->core == args[0] && cur->rel == args[1] && cur->gen == gen) {
        Py_RETURN_TRUE;
    }
    PoolObject *p = pool_new();
    if (p == NULL) {
        return NULL;
    }
    p->host = 1;
    p->core = Py_NewRef(args[0]);
    p->rel = Py_NewRef(args[1]);
    p->gen = gen;
    Py_XSETREF(g_host_pool, p);
    Py_RETURN_TRUE;
}

static PyObject *mod_forget_pools(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    forget_all_pools();
    Py_RETURN_NONE;
}

/* The current runtime generation (pyacl_rt._runtime._generation), 0 if unknown. */
static int64_t current_generation(void)
{
    long g;
    if (g_rt != NULL && as_long(PyDict_GetItemWithError(g_rt, s_generation), &g)) {
        return g;
    }
    PyErr_Clear();
    return 0;
}

static PyObject *mod_end_generation(PyObject *Py_UNUSED(mod), PyObject *arg)
{
    long long gen = PyLong_AsLongLong(arg);
    if (gen == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (gen > g_dead_gen) {
        g_dead_gen = gen;
    }
    forget_all_pools();
    Py_CLEAR(g_handle_ctx);
    Py_RETURN_NONE;
}

static PyObject *mod_pools(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New(0);
    for (int i = 0; out != NULL && i < NHOT; i++) {
        if (g_hot[i] != NULL && PyList_Append(out, (PyObject *)g_hot[i]) < 0) {
            Py_CLEAR(out);
        }
    }
    if (out != NULL && g_host_pool != NULL && PyList_Append(out, (PyObject *)g_host_pool) < 0) {
        Py_CLEAR(out);
    }
    return out;
}

static PyObject *mod_live(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New(g_nlive);
    if (out == NULL) {
        return NULL;
    }
    Py_ssize_t i = 0;
    for (MemObject *m = g_first; m != NULL && i < g_nlive; m = m->next, i++) {
        PyList_SET_ITEM(out, i, Py_NewRef((PyObject *)m));
    }
    return out;
}

static PyObject *mod_live_count(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSsize_t(g_nlive);
}

static int index_arg(PyObject *arg, int *out)
{
    long d = PyLong_AsLong(arg);
    if (d == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (int)d;
    return 0;
}

static PyObject *mod_counters(PyObject *Py_UNUSED(mod), PyObject *arg)
{
    int d;
    if (index_arg(arg, &d) < 0) {
        return NULL;
    }
    DevStats z = {0, 0, 0, 0, 0, 0}, *st = stats_of(d);
    if (st == NULL) {
        st = &z;
    }
    return Py_BuildValue("{sLsLsLsLsLsL}", "allocated", (long long)st->allocated, "peak",
                         (long long)st->peak, "allocs", (long long)st->allocs, "frees",
                         (long long)st->frees, "bytes_allocated", (long long)st->bytes_allocated,
                         "bytes_freed", (long long)st->bytes_freed);
}

static PyObject *mod_reset_peak(PyObject *Py_UNUSED(mod), PyObject *arg)
{
    int d;
    if (index_arg(arg, &d) < 0) {
        return NULL;
    }
    DevStats *st = stats_of(d);
    if (st != NULL) {
        st->peak = st->allocated;
    }
    Py_RETURN_NONE;
}

static PyObject *mod_reset_totals(PyObject *Py_UNUSED(mod), PyObject *arg)
{
    int d;
    if (index_arg(arg, &d) < 0) {
        return NULL;
    }
    DevStats *st = stats_of(d);
    if (st != NULL) {
        st->bytes_allocated = st->bytes_freed = 0;
    }
    Py_RETURN_NONE;
}

/* In a forked child: every record forgets its memory (the parent's), unregistered, the
 * counters start from zero, the caches are forgotten. No runtime call. */
static PyObject *mod_after_fork(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    while (g_first != NULL) {
        MemObject *m = g_first;
        set_ptr(m, 0);
        SET_U64(m, base, 0);
        Py_XSETREF(m->dead, Py_NewRef(s_forked));
        m->counted = 0;
        mem_unlink(m);
        Py_DECREF(m);
    }
    memset(g_stats, 0, sizeof(g_stats));
    forget_all_pools();
    Py_CLEAR(g_handle_ctx);
    memset(g_ts_cache, 0, sizeof(g_ts_cache));
    int64_t gen = current_generation(); /* the parent's runtime is not ours */
    if (gen > g_dead_gen) {
        g_dead_gen = gen;
    }
    Py_RETURN_NONE;
}

static PyObject *mod_fast_counts(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{sKsKsKsK}", "device_alloc", (unsigned long long)g_fast[0],
                         "device_free", (unsigned long long)g_fast[1], "host_alloc",
                         (unsigned long long)g_fast[2], "host_free",
                         (unsigned long long)g_fast[3]);
}

static PyObject *mod_install_fast_call(PyObject *Py_UNUSED(mod), PyObject *arg)
{
    if (!PyType_Check(arg) || !(((PyTypeObject *)arg)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        PyErr_SetString(PyExc_TypeError, "install_fast_call() needs a Python class");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)arg;
    if (PyType_IsSubtype(tp, &DeviceBaseType)) {
        tp->tp_vectorcall = device_vectorcall;
    } else if (PyType_IsSubtype(tp, &HostBaseType)) {
        tp->tp_vectorcall = host_vectorcall;
    } else {
        PyErr_SetString(PyExc_TypeError,
                        "install_fast_call() needs a subclass of DeviceBase or HostBase");
        return NULL;
    }
    /* No instance dict, slots or finalizer: the C deallocation is the whole of it. */
    int managed = 0;
#ifdef Py_TPFLAGS_MANAGED_DICT
    managed |= (tp->tp_flags & Py_TPFLAGS_MANAGED_DICT) != 0;
#endif
#ifdef Py_TPFLAGS_MANAGED_WEAKREF
    managed |= (tp->tp_flags & Py_TPFLAGS_MANAGED_WEAKREF) != 0;
#endif
    if (!managed && tp->tp_basicsize == sizeof(BufObject) && tp->tp_itemsize == 0 &&
        tp->tp_dictoffset == 0 && tp->tp_finalize == NULL && tp->tp_del == NULL &&
        tp->tp_base != NULL && (tp->tp_base == &DeviceBaseType || tp->tp_base == &HostBaseType)) {
        tp->tp_dealloc = (destructor)buf_dealloc_heap;
    }
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"bind", (PyCFunction)(void (*)(void))mod_bind, METH_VARARGS | METH_KEYWORDS,
     "bind(*, runtime_globals, state_globals, thread_state, ctx_ref, deferred, free_mem, "
     "raise_closed, unknown_block, lowlevel_api, gate_api): the records layer (at its "
     "import)."},
    {"bind_buffers", (PyCFunction)(void (*)(void))mod_bind_buffers, METH_VARARGS | METH_KEYWORDS,
     "bind_buffers(*, stream, primary_defaults, device_init, device_close, host_init, "
     "host_close, default_policy): the buffer classes' Python paths."},
    {"set_cache_api", mod_set_cache_api, METH_O,
     "set_cache_api(capsule): the caching allocator's C hit paths (_cachecore._C_API)."},
    {"set_host_read_hook", mod_set_host_read_hook, METH_O,
     "set_host_read_hook(hook or None): hook(ptr, nbytes) before each HostBuffer export."},
    {"set_tracing", mod_set_tracing, METH_O,
     "set_tracing(on): while on, device buffers take the Python path (history events)."},
    {"remember_device", (PyCFunction)(void (*)(void))mod_remember_device, METH_FASTCALL,
     "remember_device(core, key, token, ctx, rel, trim, gen) -> bool: a stream's cache for "
     "the C hit path (False: not one it can serve)."},
    {"remember_host", (PyCFunction)(void (*)(void))mod_remember_host, METH_FASTCALL,
     "remember_host(core, rel, gen) -> bool: the pinned host pool for the C hit path."},
    {"forget_pools", mod_forget_pools, METH_NOARGS,
     "forget_pools(): the hit path serves nothing until caches are remembered again."},
    {"end_generation", mod_end_generation, METH_O,
     "end_generation(gen): runtime generation gen is being finalized: its records and "
     "caches take the Python path from now on."},
    {"pools", mod_pools, METH_NOARGS, "pools() -> the caches the hit path knows."},
    {"live", mod_live, METH_NOARGS, "live() -> the registered (live) allocation records."},
    {"live_count", mod_live_count, METH_NOARGS, "live_count() -> len(live())."},
    {"counters", mod_counters, METH_O,
     "counters(device) -> {allocated, peak, allocs, frees, bytes_allocated, bytes_freed} of "
     "the records of device (-1: pinned host memory); DLPack imports are not counted."},
    {"reset_peak", mod_reset_peak, METH_O, "reset_peak(device): peak = allocated."},
    {"reset_totals", mod_reset_totals, METH_O,
     "reset_totals(device): bytes_allocated = bytes_freed = 0."},
    {"after_fork", mod_after_fork, METH_NOARGS,
     "after_fork(): in a forked child, forget every record (no runtime call)."},
    {"fast_counts", mod_fast_counts, METH_NOARGS,
     "fast_counts() -> how often the C hit paths allocated / freed (for tests)."},
    {"install_fast_call", mod_install_fast_call, METH_O,
     "install_fast_call(cls): calling cls runs new + __init__ in one C call."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pyacl_rt._memcore",
    .m_doc = "Allocation records and buffer base types of pyacl_rt._memory (see the source).",
    .m_size = -1,
    .m_methods = module_methods,
};

static int intern(PyObject **slot, const char *s)
{
    *slot = PyUnicode_InternFromString(s);
    return *slot == NULL ? -1 : 0;
}

static int add_u64(PyObject *m, const char *name, uint64_t v)
{
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    int rc = o == NULL ? -1 : PyModule_AddObjectRef(m, name, o);
    Py_XDECREF(o);
    return rc;
}

PyMODINIT_FUNC PyInit__memcore(void)
{
    if (PyType_Ready(&MemType) < 0 || PyType_Ready(&PoolType) < 0 ||
        PyType_Ready(&DeviceBaseType) < 0 || PyType_Ready(&HostBaseType) < 0) {
        return NULL;
    }
    if (intern(&s_generation, "_generation") < 0 ||
        intern(&s_fallback_device, "_fallback_device") < 0 || intern(&s_st, "st") < 0 ||
        intern(&s_tls_key, "pyacl_rt._memcore.thread_state") < 0 ||
        intern(&s_default_dead, "buffer is closed") < 0 || intern(&s_forked, "forked") < 0 ||
        intern(&s_close, "close") < 0 || intern(&s_nbytes, "nbytes") < 0 ||
        intern(&s_device, "device") < 0 || intern(&s_policy, "policy") < 0 ||
        intern(&s_stream, "stream") < 0) {
        return NULL;
    }
    g_zero = PyLong_FromLong(0);
    g_minus_one = PyLong_FromLong(-1);
    if (g_zero == NULL || g_minus_one == NULL) {
        return NULL;
    }
    g_dead = mem_alloc();
    if (g_dead == NULL) {
        return NULL;
    }
    g_dead->device = -1;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Mem", (PyObject *)&MemType) < 0 ||
        PyModule_AddObjectRef(m, "Pool", (PyObject *)&PoolType) < 0 ||
        PyModule_AddObjectRef(m, "DeviceBase", (PyObject *)&DeviceBaseType) < 0 ||
        PyModule_AddObjectRef(m, "HostBase", (PyObject *)&HostBaseType) < 0 ||
        PyModule_AddObjectRef(m, "DEAD", (PyObject *)g_dead) < 0 ||
        add_u64(m, "ZERO_SIZE_BASE", ZERO_SIZE_BASE) < 0 ||
        PyModule_AddIntConstant(m, "FAST_MAX", (long)FAST_MAX) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DEVICES", MAX_DEVICES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
