/*
 * pyacl_rt._raw._fastcall - hand-written CPython fast paths for the hottest raw calls.
 *
 * Why: cffi wraps a C function of >= 2 arguments as METH_VARARGS (an argument tuple
 * and PyArg_UnpackTuple per call, ~40 ns) and an out-parameter must be read back from
 * a cdata array (~35 ns). Here each function is METH_NOARGS / METH_O / METH_FASTCALL,
 * converts its arguments inline and returns the out-parameter directly.
 *
 * One table: the functions call through the dispatch table of pyacl_rt._raw._lowlevel_cffi
 * (filled once by pyacl_rt.lowlevel.load()). At import this module asks the cffi module
 * for a C-level accessor (lib.pyacl_lowlevel_api() -> struct pyacl_lowlevel_api *),
 * checks its magic/version/size and finds its functions' slots by name. Each call loads
 * the pointer from that table (no copy, nothing cached).
 *
 * Conventions (documented in pyacl_rt/lowlevel.py and pyacl_rt/_raw/_fastcall.pyi): these are
 * *checked* calls, doing exactly what a hand-written extension does ("call, check rc,
 * return the value"):
 *   - success: the out-parameter's value (int), or None when the function has none;
 *   - a nonzero aclError raises the pyacl_rt error of that code, built by
 *     pyacl_rt.lowlevel.check(rc, "aclrtXxx") (reads aclGetRecentErrMsg at once, on the
 *     failing thread);
 *   - a symbol the loaded library lacks raises FunctionNotFoundError (through the same
 *     sentinel path as the raw layer: the slot index is recorded in the cffi module's
 *     thread-local and lowlevel.check(MISSING_SYMBOL, name) raises). A call before the
 *     library is loaded loads it first (lowlevel.load()), like lowlevel's attributes.
 *   - handles / device pointers / sizes are non-negative ints < 2**64 (int subclasses
 *     and __index__ objects accepted, bool refused): otherwise TypeError / OverflowError
 *     naming the function and the argument; nothing reaches C.
 *   - GIL: released around every call that can block (anything that takes a runtime
 *     lock, talks to the driver or waits for the device). Kept only for get_device()
 *     and get_current_context(), which read per-thread runtime state and never wait
 *     for device work; see GIL_HELD and scripts/bench_overhead.py for the measurement.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define PYACL_LIKELY(x) __builtin_expect(!!(x), 1)
#define PYACL_UNLIKELY(x) __builtin_expect(!!(x), 0)

_Static_assert(sizeof(unsigned long) == sizeof(uintptr_t), "LP64 platform expected");
_Static_assert(sizeof(size_t) == sizeof(uintptr_t), "size_t and uintptr_t differ");

/* Must match pyacl_rt/_raw/_lowlevel_build.py (checked at import through magic/version/size). */
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
#define PYACL_API_MAGIC 0x5041434Cu
#define PYACL_API_VERSION 1u

/* The binding's ABI types (see scripts/gen_acl.py): aclError and enums are 32-bit ints,
 * handles and pointers cross as uintptr_t. */
typedef int32_t (*fn_p_t)(int32_t *);                 /* GetDevice */
typedef int32_t (*fn_pu_t)(uintptr_t *);              /* GetCurrentContext */
typedef int32_t (*fn_u_t)(uintptr_t);                 /* Synchronize*, SetCurrentContext */
typedef int32_t (*fn_ui_t)(uintptr_t, int32_t);       /* Synchronize*WithTimeout */
typedef int32_t (*fn_up_t)(uintptr_t, int32_t *);     /* StreamQuery, QueryEventStatus */
typedef int32_t (*fn_uu_t)(uintptr_t, uintptr_t);     /* RecordEvent, StreamWaitEvent */
typedef int32_t (*fn_uuu_t)(uintptr_t, uintptr_t, uintptr_t); /* LaunchHostFunc */
typedef int32_t (*fn_copy_t)(uintptr_t, size_t, uintptr_t, size_t, int32_t, uintptr_t);
typedef int32_t (*fn_copysync_t)(uintptr_t, size_t, uintptr_t, size_t, int32_t);
typedef int32_t (*fn_memset_t)(uintptr_t, size_t, int32_t, size_t, uintptr_t);
typedef int32_t (*fn_paraupdate_t)(uintptr_t, uintptr_t, void *, size_t); /* KernelArgsParaUpdate */
typedef int32_t (*fn_launchcfg_t)(uintptr_t, uint32_t, uintptr_t, void *, uintptr_t, uintptr_t);
typedef int32_t (*fn_v_t)(void);                      /* SynchronizeDevice */
typedef int32_t (*fn_i_t)(int32_t);                   /* SynchronizeDeviceWithTimeout */

enum {
    S_GET_DEVICE,
    S_GET_CURRENT_CONTEXT,
    S_SET_CURRENT_CONTEXT,
    S_STREAM_QUERY,
    S_QUERY_EVENT_STATUS,
    S_SYNCHRONIZE_STREAM,
    S_SYNCHRONIZE_STREAM_WITH_TIMEOUT,
    S_SYNCHRONIZE_EVENT,
    S_SYNCHRONIZE_EVENT_WITH_TIMEOUT,
    S_RECORD_EVENT,
    S_STREAM_WAIT_EVENT,
    S_LAUNCH_HOST_FUNC,
    S_MEMCPY_ASYNC,
    S_MEMCPY,
    S_MEMSET_ASYNC,
    S_ARGS_PARA_UPDATE,
    S_ARGS_FINALIZE,
    S_LAUNCH_WITH_CONFIG,
    S_SYNCHRONIZE_DEVICE,
    S_SYNCHRONIZE_DEVICE_WITH_TIMEOUT,
    S_COUNT
};
static const char *const slot_names[S_COUNT] = {
    "aclrtGetDevice",
    "aclrtGetCurrentContext",
    "aclrtSetCurrentContext",
    "aclrtStreamQuery",
    "aclrtQueryEventStatus",
    "aclrtSynchronizeStream",
    "aclrtSynchronizeStreamWithTimeout",
    "aclrtSynchronizeEvent",
    "aclrtSynchronizeEventWithTimeout",
    "aclrtRecordEvent",
    "aclrtStreamWaitEvent",
    "aclrtLaunchHostFunc",
    "aclrtMemcpyAsync",
    "aclrtMemcpy",
    "aclrtMemsetAsync",
    "aclrtKernelArgsParaUpdate",
    "aclrtKernelArgsFinalize",
    "aclrtLaunchKernelWithConfig",
    "aclrtSynchronizeDevice",
    "aclrtSynchronizeDeviceWithTimeout",
};

static const struct pyacl_lowlevel_api *g_api;
static void *const *g_table;
static int g_index[S_COUNT];

/* ------------------------------------------------------------ missing symbols */

/* Cold path of every call: the slot is NULL. Load the library if nobody did yet and
 * retry; otherwise record the miss and let lowlevel.check() raise FunctionNotFoundError
 * (same error, same library label as the raw layer). Returns NULL with an exception. */
static void *slot_resolve(int slot)
{
    int idx = g_index[slot];
    PyObject *ll = PyImport_ImportModule("pyacl_rt.lowlevel");
    if (ll == NULL) {
        return NULL;
    }
    if (!g_api->is_loaded()) {
        PyObject *r = PyObject_CallMethod(ll, "load", NULL);
        if (r == NULL) {
            Py_DECREF(ll);
            return NULL;
        }
        Py_DECREF(r);
        void *p = g_table[idx];
        if (p != NULL) {
            Py_DECREF(ll);
            return p;
        }
    }
    g_api->set_missing(idx);
    PyObject *r = PyObject_CallMethod(ll, "check", "is", -1, g_api->names[idx]);
    Py_DECREF(ll);
    if (r != NULL) {
        Py_DECREF(r);
        PyErr_Format(PyExc_RuntimeError, "%s is missing from the loaded library",
                     g_api->names[idx]);
    }
    return NULL;
}

#define GET_FN(var, type, slot)                                  \
    type var = (type)g_table[g_index[slot]];                     \
    if (PYACL_UNLIKELY(var == NULL)) {                           \
        var = (type)slot_resolve(slot);                          \
        if (var == NULL) {                                       \
            return NULL;                                         \
        }                                                        \
    }

/* --------------------------------------------------------- argument conversion */

static int bad_type(const char *func, const char *arg, const char *what, PyObject *o)
{
    PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be an int (%s), not %.100s", func,
                 arg, what, Py_TYPE(o)->tp_name);
    return -1;
}

/* A non-negative int < 2**64 (handle, device pointer, size). */
static int to_u64_slow(PyObject *o, unsigned long *out, const char *func, const char *arg,
                       const char *what)
{
    if (PyBool_Check(o) || !(PyLong_Check(o) || PyIndex_Check(o))) {
        return bad_type(func, arg, what, o);
    }
    PyObject *i = PyNumber_Index(o);
    if (i == NULL) {
        return -1;
    }
    unsigned long v = PyLong_AsUnsignedLong(i);
    if (v == (unsigned long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError,
                         "%s(): argument '%s' = %R is out of range for %s (0 <= value < 2**64)",
                         func, arg, i, what);
        }
        Py_DECREF(i);
        return -1;
    }
    Py_DECREF(i);
    *out = v;
    return 0;
}

static inline int to_u64(PyObject *o, unsigned long *out, const char *func, const char *arg,
                         const char *what)
{
    if (PYACL_LIKELY(PyLong_CheckExact(o))) {
        unsigned long v = PyLong_AsUnsignedLong(o);
        if (PYACL_LIKELY(v != (unsigned long)-1 || !PyErr_Occurred())) {
            *out = v;
            return 0;
        }
        PyErr_Clear();
    }
    return to_u64_slow(o, out, func, arg, what);
}

/* An int in [INT32_MIN, INT32_MAX] (enum values, timeouts, memset byte value). */
static int to_i32(PyObject *o, int32_t *out, const char *func, const char *arg, const char *what)
{
    if (PyBool_Check(o) || !(PyLong_Check(o) || PyIndex_Check(o))) {
        return bad_type(func, arg, what, o);
    }
    int overflow = 0;
    long v = PyLong_AsLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow || v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError,
                     "%s(): argument '%s' = %R is out of range for %s (a 32-bit signed int)",
                     func, arg, o, what);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

#define HANDLE(o, var, func, arg, what)                            \
    unsigned long var;                                             \
    if (PYACL_UNLIKELY(to_u64((o), &var, func, arg, what) < 0)) {  \
        return NULL;                                               \
    }

#define INT32(o, var, func, arg, what)                            \
    int32_t var;                                                  \
    if (PYACL_UNLIKELY(to_i32((o), &var, func, arg, what) < 0)) { \
        return NULL;                                              \
    }

static int check_nargs(const char *func, Py_ssize_t n, Py_ssize_t want)
{
    if (PYACL_LIKELY(n == want)) {
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd arguments (%zd given)", func, want, n);
    return -1;
}

/* Cold path of every call: rc != 0. lowlevel.check() raises the pyacl_rt error of the
 * code (reading aclGetRecentErrMsg at once, on this, the failing thread). */
static PyObject *raise_rc(int32_t rc, int slot)
{
    PyObject *ll = PyImport_ImportModule("pyacl_rt.lowlevel");
    if (ll == NULL) {
        return NULL;
    }
    PyObject *r = PyObject_CallMethod(ll, "check", "is", (int)rc, slot_names[slot]);
    Py_DECREF(ll);
    if (r != NULL) {
        Py_DECREF(r);
        PyErr_Format(PyExc_RuntimeError, "%s failed with %d", slot_names[slot], (int)rc);
    }
    return NULL;
}

#define CHECK(rc, slot)                        \
    if (PYACL_UNLIKELY((rc) != 0)) {           \
        return raise_rc((rc), (slot));         \
    }

#define NOGIL(stmt)              \
    do {                         \
        Py_BEGIN_ALLOW_THREADS   \
        stmt;                    \
        Py_END_ALLOW_THREADS     \
    } while (0)

/* ------------------------------------------------------------------ functions */

/* GIL kept: aclrtGetDevice reads the calling thread's current context. */
static PyObject *f_get_device(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    GET_FN(fn, fn_p_t, S_GET_DEVICE);
    int32_t dev = 0;
    int32_t rc = fn(&dev);
    CHECK(rc, S_GET_DEVICE);
    return PyLong_FromLong(dev);
}

/* GIL kept: aclrtGetCurrentContext reads the calling thread's current context. */
static PyObject *f_get_current_context(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    GET_FN(fn, fn_pu_t, S_GET_CURRENT_CONTEXT);
    uintptr_t ctx = 0;
    int32_t rc = fn(&ctx);
    CHECK(rc, S_GET_CURRENT_CONTEXT);
    return PyLong_FromUnsignedLong((unsigned long)ctx);
}

/* The wrappers below share one shape: convert the arguments (HANDLE / INT32: return NULL
 * with a TypeError/OverflowError naming the argument), look up the slot (GET_FN), call it
 * with the GIL released, raise on rc != 0 (CHECK), return None or the out-parameter.
 * The macros expand to exactly the code a hand-written wrapper would contain. */

/* Tail of every wrapper without an out-parameter. */
#define CALL_RETURN_NONE(type, slot, ...)  \
    GET_FN(fn_, type, slot);               \
    int32_t rc_;                           \
    NOGIL(rc_ = fn_(__VA_ARGS__));         \
    CHECK(rc_, slot);                      \
    Py_RETURN_NONE

/* Head of every METH_FASTCALL wrapper: `name` (the Python name) and the argument count. */
#define FASTCALL_HEAD(pyname, n)                     \
    (void)self;                                      \
    static const char name[] = #pyname;              \
    if (check_nargs(name, nargs, (n)) < 0) {         \
        return NULL;                                 \
    }

/* METH_O: f(handle) -> None. */
#define DEFINE_HANDLE_TO_NONE(pyname, slot, arg, what)        \
    static PyObject *f_##pyname(PyObject *self, PyObject *o)  \
    {                                                         \
        (void)self;                                           \
        HANDLE(o, h_, #pyname, arg, what);                    \
        CALL_RETURN_NONE(fn_u_t, slot, h_);                   \
    }

/* METH_O: f(handle) -> the int32 status out-parameter. */
#define DEFINE_HANDLE_TO_STATUS(pyname, slot, arg, what)      \
    static PyObject *f_##pyname(PyObject *self, PyObject *o)  \
    {                                                         \
        (void)self;                                           \
        HANDLE(o, h_, #pyname, arg, what);                    \
        GET_FN(fn_, fn_up_t, slot);                           \
        int32_t status_ = 0;                                  \
        int32_t rc_;                                          \
        NOGIL(rc_ = fn_(h_, &status_));                       \
        CHECK(rc_, slot);                                     \
        return PyLong_FromLong(status_);                      \
    }

/* METH_FASTCALL: f(handle, x) -> None, x converted by CONV1 (HANDLE or INT32). */
#define DEFINE_HANDLE2_TO_NONE(pyname, type, slot, arg0, what0, CONV1, arg1, what1)         \
    static PyObject *f_##pyname(PyObject *self, PyObject *const *args, Py_ssize_t nargs) \
    {                                                                                    \
        FASTCALL_HEAD(pyname, 2)                                                         \
        HANDLE(args[0], a0_, name, arg0, what0);                                         \
        CONV1(args[1], a1_, name, arg1, what1);                                          \
        CALL_RETURN_NONE(type, slot, a0_, a1_);                                          \
    }

DEFINE_HANDLE_TO_NONE(set_current_context, S_SET_CURRENT_CONTEXT, "context",
                      "an aclrtContext handle")
DEFINE_HANDLE_TO_STATUS(stream_query, S_STREAM_QUERY, "stream", "an aclrtStream handle")
DEFINE_HANDLE_TO_STATUS(query_event_status, S_QUERY_EVENT_STATUS, "event", "an aclrtEvent handle")
DEFINE_HANDLE_TO_NONE(synchronize_stream, S_SYNCHRONIZE_STREAM, "stream", "an aclrtStream handle")
DEFINE_HANDLE2_TO_NONE(synchronize_stream_with_timeout, fn_ui_t, S_SYNCHRONIZE_STREAM_WITH_TIMEOUT,
                       "stream", "an aclrtStream handle", INT32, "timeout",
                       "milliseconds, -1 = forever")
DEFINE_HANDLE_TO_NONE(synchronize_event, S_SYNCHRONIZE_EVENT, "event", "an aclrtEvent handle")
DEFINE_HANDLE2_TO_NONE(synchronize_event_with_timeout, fn_ui_t, S_SYNCHRONIZE_EVENT_WITH_TIMEOUT,
                       "event", "an aclrtEvent handle", INT32, "timeout",
                       "milliseconds, -1 = forever")
DEFINE_HANDLE2_TO_NONE(record_event, fn_uu_t, S_RECORD_EVENT, "event", "an aclrtEvent handle",
                       HANDLE, "stream", "an aclrtStream handle")
DEFINE_HANDLE2_TO_NONE(stream_wait_event, fn_uu_t, S_STREAM_WAIT_EVENT, "stream",
                       "an aclrtStream handle", HANDLE, "event", "an aclrtEvent handle")

/* wait_then_host_func(stream, event, fn, arg) -> None: aclrtStreamWaitEvent(stream,
 * event), then aclrtLaunchHostFunc(stream, fn, arg) - an await's launch on its
 * companion stream, one call (the GIL released once). The first failure raises (a
 * failed wait launches nothing; a runtime without aclrtLaunchHostFunc raises
 * FunctionNotFoundError before anything is queued). */
static PyObject *f_wait_then_host_func(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    FASTCALL_HEAD(wait_then_host_func, 4)
    HANDLE(args[0], stream, name, "stream", "an aclrtStream handle");
    HANDLE(args[1], event, name, "event", "an aclrtEvent handle");
    HANDLE(args[2], fn, name, "fn", "the address of a C function");
    HANDLE(args[3], arg, name, "arg", "an address");
    if (fn == 0) {
        PyErr_SetString(PyExc_ValueError, "wait_then_host_func(): fn is NULL");
        return NULL;
    }
    GET_FN(wait_, fn_uu_t, S_STREAM_WAIT_EVENT);
    GET_FN(launch_, fn_uuu_t, S_LAUNCH_HOST_FUNC);
    int32_t rc_wait = 0, rc_launch = 0;
    NOGIL({
        rc_wait = wait_(stream, event);
        if (rc_wait == 0) {
            rc_launch = launch_(stream, fn, arg);
        }
    });
    CHECK(rc_wait, S_STREAM_WAIT_EVENT);
    CHECK(rc_launch, S_LAUNCH_HOST_FUNC);
    Py_RETURN_NONE;
}

/* The leading (dst, dst_max, src, count, kind) of memcpy and memcpy_async. */
#define COPY_ARGS                                                  \
    HANDLE(args[0], dst, name, "dst", "an address");               \
    HANDLE(args[1], dst_max, name, "dst_max", "a size in bytes");  \
    HANDLE(args[2], src, name, "src", "an address");               \
    HANDLE(args[3], count, name, "count", "a size in bytes");      \
    INT32(args[4], kind, name, "kind", "an aclrtMemcpyKind");

static PyObject *f_memcpy_async(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    FASTCALL_HEAD(memcpy_async, 6)
    COPY_ARGS
    HANDLE(args[5], stream, name, "stream", "an aclrtStream handle");
    CALL_RETURN_NONE(fn_copy_t, S_MEMCPY_ASYNC, dst, dst_max, src, count, kind, stream);
}

static PyObject *f_memcpy(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    FASTCALL_HEAD(memcpy, 5)
    COPY_ARGS
    CALL_RETURN_NONE(fn_copysync_t, S_MEMCPY, dst, dst_max, src, count, kind);
}

static PyObject *f_memset_async(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    FASTCALL_HEAD(memset_async, 5)
    HANDLE(args[0], dst, name, "dst", "an address");
    HANDLE(args[1], dst_max, name, "dst_max", "a size in bytes");
    INT32(args[2], value, name, "value", "the byte value");
    HANDLE(args[3], count, name, "count", "a size in bytes");
    HANDLE(args[4], stream, name, "stream", "an aclrtStream handle");
    CALL_RETURN_NONE(fn_memset_t, S_MEMSET_ASYNC, dst, dst_max, value, count, stream);
}

/* ------------------------------------------------------------ kernel launches
 * launch_with_args(func, num_blocks, stream, cfg, args, plan, values) -> None
 *
 * One launch through a reusable argument list: for each argument, aclrtKernelArgsParaUpdate
 * when its bytes differ from what the list holds, aclrtKernelArgsFinalize when anything
 * changed, then aclrtLaunchKernelWithConfig(func, num_blocks, stream, cfg, args, NULL) -
 * all with the GIL released once. `args` is an aclrtArgsHandle built with one
 * aclrtKernelArgsAppend per argument; `plan` a bytearray of one PlanEntry per argument
 * (the param handle, the appended size, and what the list holds now, updated here);
 * `values` a tuple or list of the arguments: an int (any size up to 8 bytes, signed or
 * unsigned range), a float (2, 4 or 8 bytes), or an object exporting a buffer of
 * exactly the appended size (numpy and ctypes scalars, ctypes structures). Converted
 * before the GIL is released; nothing is allocated for arguments of up to 2 KiB total. */
typedef struct PlanEntry {
    uint64_t param;  /* aclrtParamHandle */
    uint32_t size;   /* bytes appended */
    uint32_t valid;  /* 1: `last` is what the finalized list holds (size <= 8 only) */
    uint8_t last[8];
} PlanEntry;
_Static_assert(sizeof(PlanEntry) == 24, "PlanEntry layout");

#define LAUNCH_STACK_BYTES 2048

static int pack_value(PyObject *o, uint32_t size, uint8_t *out, Py_ssize_t i)
{
    static const char name[] = "launch_with_args";
    if (PyLong_Check(o) && !PyBool_Check(o)) {
        if (size != 1 && size != 2 && size != 4 && size != 8) {
            PyErr_Format(PyExc_TypeError, "%s(): argument %zd is an int but the parameter takes %u bytes",
                         name, i, size);
            return -1;
        }
        int overflow = 0;
        long long sv = PyLong_AsLongLongAndOverflow(o, &overflow);
        unsigned long long uv;
        if (sv == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (overflow > 0) {
            uv = PyLong_AsUnsignedLongLong(o);
            if (uv == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                goto range;
            }
        } else if (overflow < 0) {
            goto range;
        } else {
            if (size < 8) {
                long long lo = -(1LL << (8 * size - 1));
                long long hi = (long long)((1ULL << (8 * size)) - 1);
                if (sv < lo || sv > hi) {
                    goto range;
                }
            }
            uv = (unsigned long long)sv;
        }
        memcpy(out, &uv, size); /* little endian: the low `size` bytes */
        return 0;
    range:
        PyErr_Format(PyExc_OverflowError, "%s(): argument %zd = %R does not fit in %u bytes", name, i, o,
                     size);
        return -1;
    }
    if (PyFloat_Check(o)) {
        double d = PyFloat_AS_DOUBLE(o);
        if (size == 8) {
            memcpy(out, &d, 8);
        } else if (size == 4) {
            float f = (float)d;
            memcpy(out, &f, 4);
        } else if (size == 2) {
            if (PyFloat_Pack2(d, (char *)out, 1) < 0) {
                return -1;
            }
        } else {
            PyErr_Format(PyExc_TypeError, "%s(): argument %zd is a float but the parameter takes %u bytes",
                         name, i, size);
            return -1;
        }
        return 0;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(o, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s(): argument %zd must be an int, a float or an object exporting %u bytes "
                     "(a numpy or ctypes scalar), not %.100s",
                     name, i, size, Py_TYPE(o)->tp_name);
        return -1;
    }
    if (view.len != (Py_ssize_t)size) {
        PyErr_Format(PyExc_TypeError, "%s(): argument %zd (%.100s) has %zd bytes but the parameter takes %u",
                     name, i, Py_TYPE(o)->tp_name, view.len, size);
        PyBuffer_Release(&view);
        return -1;
    }
    memcpy(out, view.buf, size);
    PyBuffer_Release(&view);
    return 0;
}

/* The tail of both launch functions: `buf` holds the packed arguments (plan order);
 * update the slots whose bytes changed, finalize if any did, launch - with the GIL
 * released once - then record what the list holds. Frees `buf` unless it is `stack`. */
static PyObject *launch_packed(unsigned long func, unsigned long blocks, unsigned long stream,
                               unsigned long cfg, unsigned long handle, PyObject *plan, Py_ssize_t n,
                               uint8_t *buf, const uint8_t *stack)
{
    fn_paraupdate_t update = (fn_paraupdate_t)g_table[g_index[S_ARGS_PARA_UPDATE]];
    fn_u_t finalize = (fn_u_t)g_table[g_index[S_ARGS_FINALIZE]];
    fn_launchcfg_t launch = (fn_launchcfg_t)g_table[g_index[S_LAUNCH_WITH_CONFIG]];
    PlanEntry *ent = (PlanEntry *)PyByteArray_AS_STRING(plan);
    uint8_t dirty[128];
    int any = 0;
    size_t off = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t sz = ent[i].size;
        dirty[i] = !(sz <= 8 && ent[i].valid && memcmp(ent[i].last, buf + off, sz) == 0);
        any |= dirty[i];
        off += sz;
    }
    int32_t rc = 0;
    int slot = S_LAUNCH_WITH_CONFIG;
    Py_BEGIN_ALLOW_THREADS
    if (any) {
        size_t o = 0;
        for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
            if (dirty[i]) {
                rc = update(handle, (uintptr_t)ent[i].param, buf + o, ent[i].size);
                slot = S_ARGS_PARA_UPDATE;
            }
            o += ent[i].size;
        }
        if (rc == 0) {
            rc = finalize(handle);
            slot = S_ARGS_FINALIZE;
        }
    }
    if (rc == 0) {
        rc = launch(func, (uint32_t)blocks, stream, (void *)cfg, handle, 0);
        slot = S_LAUNCH_WITH_CONFIG;
    }
    Py_END_ALLOW_THREADS
    if (slot != S_LAUNCH_WITH_CONFIG) {
        /* the list is not finalized: update everything next time */
        for (Py_ssize_t i = 0; i < n; i++) {
            ent[i].valid = 0;
        }
    } else if (any) {
        size_t o = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (ent[i].size <= 8) {
                memcpy(ent[i].last, buf + o, ent[i].size);
                ent[i].valid = 1;
            }
            o += ent[i].size;
        }
    }
    if (buf != stack) {
        PyMem_Free(buf);
    }
    CHECK(rc, slot);
    Py_RETURN_NONE;
}

/* Common head: the handles, the plan, the values sequence; resolves the three slots. */
#define LAUNCH_HEAD                                                                                 \
    HANDLE(args[0], func, name, "func", "an aclrtFuncHandle");                                      \
    HANDLE(args[1], blocks, name, "num_blocks", "a block count");                                   \
    HANDLE(args[2], stream, name, "stream", "an aclrtStream handle");                               \
    HANDLE(args[3], cfg, name, "cfg", "an aclrtLaunchKernelCfg address or 0");                      \
    HANDLE(args[4], handle, name, "args", "an aclrtArgsHandle");                                    \
    if (blocks > UINT32_MAX) {                                                                      \
        PyErr_Format(PyExc_OverflowError, "%s(): argument 'num_blocks' = %lu does not fit in 32 bits", \
                     name, blocks);                                                                 \
        return NULL;                                                                                \
    }                                                                                               \
    {                                                                                               \
        GET_FN(u_, fn_paraupdate_t, S_ARGS_PARA_UPDATE);                                            \
        GET_FN(f_, fn_u_t, S_ARGS_FINALIZE);                                                        \
        GET_FN(l_, fn_launchcfg_t, S_LAUNCH_WITH_CONFIG);                                           \
        (void)u_;                                                                                   \
        (void)f_;                                                                                   \
        (void)l_;                                                                                   \
    }                                                                                               \
    PyObject *plan = args[5];                                                                       \
    if (!PyByteArray_CheckExact(plan) ||                                                            \
        PyByteArray_GET_SIZE(plan) % (Py_ssize_t)sizeof(PlanEntry) != 0) {                         \
        PyErr_Format(PyExc_TypeError, "%s(): argument 'plan' must be a bytearray of plan entries", \
                     name);                                                                         \
        return NULL;                                                                                \
    }                                                                                               \
    Py_ssize_t np_ = PyByteArray_GET_SIZE(plan) / (Py_ssize_t)sizeof(PlanEntry);

/* items/n of a tuple or list (borrowed), or NULL with a TypeError. */
static PyObject *const *seq_items(PyObject *seq, Py_ssize_t *n, const char *func, const char *arg)
{
    if (PyTuple_CheckExact(seq)) {
        *n = PyTuple_GET_SIZE(seq);
        return &PyTuple_GET_ITEM(seq, 0);
    }
    if (PyList_CheckExact(seq)) {
        *n = PyList_GET_SIZE(seq);
        return (PyObject *const *)((PyListObject *)seq)->ob_item;
    }
    PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be a tuple or a list", func, arg);
    return NULL;
}

static uint8_t *launch_buffer(PyObject *plan, Py_ssize_t n, uint8_t *stack)
{
    const PlanEntry *ent = (const PlanEntry *)PyByteArray_AS_STRING(plan);
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        total += ent[i].size;
    }
    if (total <= LAUNCH_STACK_BYTES) {
        return stack;
    }
    uint8_t *buf = PyMem_Malloc(total);
    if (buf == NULL) {
        PyErr_NoMemory();
    }
    return buf;
}

static PyObject *f_launch_with_args(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    FASTCALL_HEAD(launch_with_args, 7)
    LAUNCH_HEAD
    Py_ssize_t n;
    PyObject *const *items = seq_items(args[6], &n, name, "values");
    if (items == NULL) {
        return NULL;
    }
    if (n != np_ || n > 128) {
        PyErr_Format(PyExc_TypeError, "%s(): %zd values for a plan of %zd arguments (at most 128)", name, n,
                     np_);
        return NULL;
    }
    uint8_t stack[LAUNCH_STACK_BYTES];
    uint8_t *buf = launch_buffer(plan, n, stack);
    if (buf == NULL) {
        return NULL;
    }
    const PlanEntry *ent = (const PlanEntry *)PyByteArray_AS_STRING(plan);
    size_t off = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t sz = ent[i].size;
        if (pack_value(items[i], sz, buf + off, i) < 0 ||
            PyByteArray_GET_SIZE(plan) != np_ * (Py_ssize_t)sizeof(PlanEntry)) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_RuntimeError, "%s(): the plan changed during the call", name);
            }
            if (buf != stack) {
                PyMem_Free(buf);
            }
            return NULL;
        }
        ent = (const PlanEntry *)PyByteArray_AS_STRING(plan);
        off += sz;
    }
    return launch_packed(func, blocks, stream, cfg, handle, plan, n, buf, stack);
}

/* launch_objects(func, num_blocks, stream, cfg, args, plan, sig, objs, token, marker)
 *   -> None | int
 * pyacl_rt.launch's hot path: `objs` are the Python arguments and `sig` their kinds:
 * `marker` for an owned buffer (an object with `_m` (ptr, last) and `_off`: its address
 * is passed), else the exact type of a scalar packed by pack_value. Launches and returns
 * None, or launches nothing and returns: k >= 0 when buffer argument k was not used on
 * this stream yet (its record's `last` is not `token`: the caller checks and notes it,
 * then calls again), -1 when an argument does not match `sig` (replan), -2 - k when
 * buffer argument k is closed. */
static PyObject *str_m, *str_ptr, *str_last, *str_off;

static PyObject *f_launch_objects(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    FASTCALL_HEAD(launch_objects, 10)
    LAUNCH_HEAD
    Py_ssize_t n, nsig;
    PyObject *const *sig = seq_items(args[6], &nsig, name, "sig");
    if (sig == NULL) {
        return NULL;
    }
    PyObject *const *objs = seq_items(args[7], &n, name, "objs");
    if (objs == NULL) {
        return NULL;
    }
    PyObject *token = args[8];
    PyObject *marker = args[9];
    if (n != nsig || n != np_ || n > 128) {
        return PyLong_FromLong(-1);
    }
    uint8_t stack[LAUNCH_STACK_BYTES];
    uint8_t *buf = launch_buffer(plan, n, stack);
    if (buf == NULL) {
        return NULL;
    }
    const PlanEntry *ent = (const PlanEntry *)PyByteArray_AS_STRING(plan);
    size_t off = 0;
    long verdict = 0; /* 0: launch; else the value to return (+1 for k >= 0) */
    for (Py_ssize_t i = 0; i < n && verdict == 0; i++) {
        PyObject *a = objs[i];
        uint32_t sz = ent[i].size;
        if (sig[i] == marker) {
            PyObject *m = PyObject_GetAttr(a, str_m);
            if (m == NULL) {
                PyErr_Clear();
                verdict = -1;
                break;
            }
            PyObject *p = PyObject_GetAttr(m, str_ptr);
            PyObject *last = p != NULL ? PyObject_GetAttr(m, str_last) : NULL;
            PyObject *o = last != NULL ? PyObject_GetAttr(a, str_off) : NULL;
            Py_DECREF(m);
            if (o == NULL) {
                Py_XDECREF(p);
                Py_XDECREF(last);
                goto fail;
            }
            unsigned long long pv = PyLong_AsUnsignedLongLong(p);
            unsigned long long ov = PyLong_AsUnsignedLongLong(o);
            int seen = last == token;
            Py_DECREF(p);
            Py_DECREF(last);
            Py_DECREF(o);
            if (PyErr_Occurred()) {
                goto fail;
            }
            if (pv == 0) {
                verdict = -2 - (long)i;
            } else if (!seen) {
                verdict = (long)i + 1;
            } else if (sz != 8) {
                verdict = -1;
            } else {
                pv += ov;
                memcpy(buf + off, &pv, 8);
            }
        } else if ((PyObject *)Py_TYPE(a) != sig[i]) {
            verdict = -1;
        } else if (pack_value(a, sz, buf + off, i) < 0) {
            goto fail;
        }
        if (PyByteArray_GET_SIZE(plan) != np_ * (Py_ssize_t)sizeof(PlanEntry)) {
            PyErr_Format(PyExc_RuntimeError, "%s(): the plan changed during the call", name);
            goto fail;
        }
        ent = (const PlanEntry *)PyByteArray_AS_STRING(plan);
        off += sz;
    }
    if (verdict != 0) {
        if (buf != stack) {
            PyMem_Free(buf);
        }
        return PyLong_FromLong(verdict > 0 ? verdict - 1 : verdict);
    }
    return launch_packed(func, blocks, stream, cfg, handle, plan, n, buf, stack);
fail:
    if (buf != stack) {
        PyMem_Free(buf);
    }
    return NULL;
}

/* -------------------------------------------------------------- the finalize gate
 *
 * pyacl_rt.finalize() must never destroy a handle another thread is using, and no call
 * may reach the runtime with a handle finalize destroyed. So every runtime call pyacl_rt
 * makes passes this gate (pyacl_rt._state's gated views of the raw layer wrap each
 * function in a Gated object, below; the sliced waits pass it once per slice):
 *
 *   - open: the call counts itself in flight (g_inflight, and tl_depth of the calling
 *     thread) while it runs;
 *   - closed (from the start of finalize until the next init()): the call is refused
 *     with RuntimeFinalizedError before anything reaches the runtime - except on the
 *     finalizing thread itself (tl_exempt), and on a thread already inside the gate
 *     (tl_depth > 0: a release section that began before the gate closed finishes).
 *
 * finalize closes the gate, then waits until nothing is in flight on any other thread
 * (_gate_close), so whatever entered before has left before the first handle is
 * destroyed. The counters only change with the GIL held (entering before the GIL is
 * released for the call, leaving after it was taken back): on the hot path the gate is
 * a load, a branch and two increments - no lock, no atomic instruction (free-threaded
 * builds use sequentially consistent atomics instead). */
#ifdef Py_GIL_DISABLED
#define GATE_LOAD(x) __atomic_load_n(&(x), __ATOMIC_SEQ_CST)
#define GATE_STORE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_SEQ_CST)
#define GATE_ADD(x, v) ((void)__atomic_add_fetch(&(x), (v), __ATOMIC_SEQ_CST))
#else
#define GATE_LOAD(x) (x)
#define GATE_STORE(x, v) ((x) = (v))
#define GATE_ADD(x, v) ((void)((x) += (v)))
#endif

static int g_gate_closed;
static long g_inflight;
/* initial-exec: one thread-pointer-relative load, no __tls_get_addr call per access */
static _Thread_local int tl_depth __attribute__((tls_model("initial-exec")));
static _Thread_local int tl_exempt __attribute__((tls_model("initial-exec")));

/* CLOCK_MONOTONIC in milliseconds. */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Cold path: raise RuntimeFinalizedError naming what was refused. Returns NULL. */
static PyObject *gate_refuse(const char *what)
{
    PyObject *errors = PyImport_ImportModule("pyacl_rt.errors");
    if (errors == NULL) {
        return NULL;
    }
    PyObject *cls = PyObject_GetAttrString(errors, "RuntimeFinalizedError");
    Py_DECREF(errors);
    if (cls == NULL) {
        return NULL;
    }
    PyObject *args = Py_BuildValue(
        "(N)", PyUnicode_FromFormat(
                   "%s was not called: pyacl_rt.finalize() (or interpreter exit) is releasing, "
                   "or has released, the runtime's handles. Objects created before cannot be "
                   "used any more; create new ones after pyacl_rt.init().",
                   what));
    PyObject *kwargs = Py_BuildValue("{s:s,s:s}", "function", what, "explanation", "");
    PyObject *exc = NULL;
    if (args != NULL && kwargs != NULL) {
        exc = PyObject_Call(cls, args, kwargs);
    }
    Py_XDECREF(args);
    Py_XDECREF(kwargs);
    if (exc != NULL) {
        PyErr_SetObject(cls, exc);
        Py_DECREF(exc);
    }
    Py_DECREF(cls);
    return NULL;
}

/* Enter the gate (GIL held): 0, or -1 with RuntimeFinalizedError set. */
static inline int gate_enter(const char *what)
{
    GATE_ADD(g_inflight, 1);
    if (PYACL_UNLIKELY(GATE_LOAD(g_gate_closed)) && !tl_exempt && tl_depth == 0) {
        GATE_ADD(g_inflight, -1);
        gate_refuse(what);
        return -1;
    }
    tl_depth++;
    return 0;
}

static inline void gate_exit(void)
{
    tl_depth--;
    GATE_ADD(g_inflight, -1);
}

/* _gate_close(seconds) -> bool: close the gate (this thread stays exempt), then wait -
 * GIL released, polling - until no call is in flight on another thread: True, or False
 * after `seconds` (the gate stays closed; call again to keep waiting). A signal handler
 * that raises meanwhile (KeyboardInterrupt) reopens the gate and propagates: nothing was
 * released. */
static PyObject *f_gate_close(PyObject *self, PyObject *arg)
{
    (void)self;
    double seconds = PyFloat_AsDouble(arg);
    if (seconds == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    GATE_STORE(g_gate_closed, 1);
    tl_exempt = 1;
    const double deadline = now_ms() + seconds * 1e3;
    long pause_us = 20;
    while (GATE_LOAD(g_inflight) > tl_depth) {
        if (now_ms() >= deadline) {
            Py_RETURN_FALSE;
        }
        struct timespec ts = {0, pause_us * 1000L};
        Py_BEGIN_ALLOW_THREADS
        nanosleep(&ts, NULL);
        Py_END_ALLOW_THREADS
        if (pause_us < 2000) {
            pause_us *= 2;
        }
        if (PyErr_CheckSignals() < 0) {
            tl_exempt = 0;
            GATE_STORE(g_gate_closed, 0);
            return NULL;
        }
    }
    Py_RETURN_TRUE;
}

/* _gate_release(): the finalizing thread is done (the gate stays closed). */
static PyObject *f_gate_release(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    tl_exempt = 0;
    Py_RETURN_NONE;
}

/* _gate_open(): init() - calls are let through again. */
static PyObject *f_gate_open(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    GATE_STORE(g_gate_closed, 0);
    Py_RETURN_NONE;
}

/* _gate_enter(what): enter a section of Python code that must finish before finalize
 * releases anything (raises RuntimeFinalizedError when refused); _gate_exit() leaves it. */
static PyObject *f_gate_enter(PyObject *self, PyObject *what)
{
    (void)self;
    const char *text = PyUnicode_Check(what) ? PyUnicode_AsUTF8(what) : NULL;
    if (text == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "_gate_enter(): what must be a str");
        }
        return NULL;
    }
    if (gate_enter(text) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _gate_try_enter() -> bool: like _gate_enter but False (nothing entered) when refused. */
static PyObject *f_gate_try_enter(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    GATE_ADD(g_inflight, 1);
    if (PYACL_UNLIKELY(GATE_LOAD(g_gate_closed)) && !tl_exempt && tl_depth == 0) {
        GATE_ADD(g_inflight, -1);
        Py_RETURN_FALSE;
    }
    tl_depth++;
    Py_RETURN_TRUE;
}

static PyObject *f_gate_exit(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    if (tl_depth <= 0) {
        PyErr_SetString(PyExc_RuntimeError, "_gate_exit() without a matching _gate_enter()");
        return NULL;
    }
    gate_exit();
    Py_RETURN_NONE;
}

/* _gate_state() -> (closed, calls in flight, this thread's depth, this thread exempt). */
static PyObject *f_gate_state(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return Py_BuildValue("(Olii)", GATE_LOAD(g_gate_closed) ? Py_True : Py_False,
                         GATE_LOAD(g_inflight), tl_depth, tl_exempt);
}

/* _gate_after_fork(): in a forked child the parent's other threads are gone. */
static PyObject *f_gate_after_fork(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    GATE_STORE(g_inflight, 0);
    tl_depth = 0;
    tl_exempt = 0;
    Py_RETURN_NONE;
}

/* The gate's state for pyacl_rt's other C extensions (pyacl_rt._memcore: the C hit
 * paths of the buffer life never call the runtime through a Gated object, so they read
 * `closed` and leave everything to their gated Python path while it is set). Read-only;
 * its address is handed over as an int by _gate_api(). */
struct pyacl_gate_api {
    uint32_t magic; /* PYACL_GATE_API_MAGIC */
    uint32_t version;
    uint32_t size;
    const int *closed; /* nonzero from the start of finalize until the next init() */
};
#define PYACL_GATE_API_MAGIC 0x50474154u /* "PGAT" */
static const struct pyacl_gate_api g_gate_api = {PYACL_GATE_API_MAGIC, 1u,
                                                 (uint32_t)sizeof(struct pyacl_gate_api),
                                                 &g_gate_closed};

/* _gate_api() -> the address of g_gate_api. */
static PyObject *f_gate_api(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromVoidPtr((void *)&g_gate_api);
}

/* Gated: a callable running another one inside the gate (vectorcall, no tuple built). */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fn;
    PyObject *name; /* str */
    const char *cname;
    int task; /* made by gated_task: the call may enqueue a task (race sanitizer) */
} GatedObject;

/* The race sanitizer's hook (pyacl_rt._sanitize, set by set_task_hook while the mock's
 * sanitizer is on; NULL otherwise): a task call runs as task_hook(fn, *args) inside
 * the gate, so the hook tags the task with the user's line and checks for reports.
 * Off, a task call costs one load and branch more than any gated call. */
static PyObject *task_hook;

static PyObject *gated_task_call(GatedObject *g, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t total = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[16];
    PyObject **buf = total + 1 <= 16 ? small : PyMem_New(PyObject *, (size_t)total + 1);
    if (buf == NULL) {
        return PyErr_NoMemory();
    }
    buf[0] = g->fn;
    for (Py_ssize_t i = 0; i < total; i++) {
        buf[i + 1] = args[i];
    }
    PyObject *hook = Py_NewRef(task_hook);
    PyObject *r = PyObject_Vectorcall(hook, buf, (size_t)(nargs + 1), kwnames);
    Py_DECREF(hook);
    if (buf != small) {
        PyMem_Free(buf);
    }
    return r;
}

static PyObject *gated_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    GatedObject *g = (GatedObject *)self;
    if (gate_enter(g->cname) < 0) {
        return NULL;
    }
    PyObject *r = task_hook != NULL && g->task
                      ? gated_task_call(g, args, nargsf, kwnames)
                      : PyObject_Vectorcall(g->fn, args, nargsf, kwnames);
    gate_exit();
    return r;
}

static void gated_dealloc(PyObject *self)
{
    GatedObject *g = (GatedObject *)self;
    Py_XDECREF(g->fn);
    Py_XDECREF(g->name);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *gated_repr(PyObject *self)
{
    return PyUnicode_FromFormat("<gated %U>", ((GatedObject *)self)->name);
}

static PyObject *gated_get_name(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(((GatedObject *)self)->name);
}

static PyObject *gated_get_wrapped(PyObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(((GatedObject *)self)->fn);
}

static PyGetSetDef gated_getset[] = {
    {"__name__", gated_get_name, NULL, "name of the wrapped function", NULL},
    {"__wrapped__", gated_get_wrapped, NULL, "the wrapped callable", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Gated_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyacl_rt._raw._fastcall.Gated",
    .tp_basicsize = sizeof(GatedObject),
    .tp_dealloc = gated_dealloc,
    .tp_vectorcall_offset = offsetof(GatedObject, vectorcall),
    .tp_repr = gated_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "fn run inside the finalize gate (made by _gated(fn)).",
    .tp_getset = gated_getset,
};

/* _gated(fn) -> a callable that calls fn inside the finalize gate. */
static PyObject *make_gated(PyObject *fn, int task)
{
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "_gated(): fn must be callable, not %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    PyObject *name = PyObject_GetAttrString(fn, "__name__");
    if (name == NULL || !PyUnicode_Check(name)) {
        PyErr_Clear();
        Py_XDECREF(name);
        name = PyObject_Repr(fn);
        if (name == NULL) {
            return NULL;
        }
    }
    const char *cname = PyUnicode_AsUTF8(name);
    if (cname == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    GatedObject *g = PyObject_New(GatedObject, &Gated_Type);
    if (g == NULL) {
        Py_DECREF(name);
        return NULL;
    }
    g->vectorcall = gated_vectorcall;
    g->fn = Py_NewRef(fn);
    g->name = name;
    g->cname = cname;
    g->task = task;
    return (PyObject *)g;
}

static PyObject *f_gated(PyObject *self, PyObject *fn)
{
    (void)self;
    return make_gated(fn, 0);
}

/* gated_task(fn): like _gated, for a call that may enqueue a task (see task_hook). */
static PyObject *f_gated_task(PyObject *self, PyObject *fn)
{
    (void)self;
    return make_gated(fn, 1);
}

/* set_task_hook(hook or None): install / remove the race sanitizer's task hook. */
static PyObject *f_set_task_hook(PyObject *self, PyObject *hook)
{
    (void)self;
    if (hook != Py_None && !PyCallable_Check(hook)) {
        PyErr_Format(PyExc_TypeError, "set_task_hook(): hook must be callable or None, not %.100s",
                     Py_TYPE(hook)->tp_name);
        return NULL;
    }
    PyObject *old = task_hook;
    task_hook = hook == Py_None ? NULL : Py_NewRef(hook);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ sliced waits
 *
 * A wait for the device (stream, event, device synchronize) is done in slices of at
 * most g_wait_slice_ms with the *WithTimeout call, GIL released; between two slices the
 * GIL is taken back, signal handlers run (PyErr_CheckSignals: Ctrl-C raises
 * KeyboardInterrupt within one slice, the work stays queued and the object usable) and
 * the finalize gate is passed again (a wait racing with finalize ends with
 * RuntimeFinalizedError within one slice instead of holding finalize up). A user
 * timeout is kept exact: it is one call when it fits into a slice, else the slices run
 * against a CLOCK_MONOTONIC deadline. An idle wait is one runtime call, as before.
 * Where the runtime lacks the *WithTimeout function, a wait without timeout falls back
 * to the plain call (not interruptible). */
static int32_t g_wait_slice_ms = 50;

enum { W_STREAM, W_EVENT, W_DEVICE };
static const int wait_slots[3][2] = {
    {S_SYNCHRONIZE_STREAM_WITH_TIMEOUT, S_SYNCHRONIZE_STREAM},
    {S_SYNCHRONIZE_EVENT_WITH_TIMEOUT, S_SYNCHRONIZE_EVENT},
    {S_SYNCHRONIZE_DEVICE_WITH_TIMEOUT, S_SYNCHRONIZE_DEVICE},
};

/* The slot's function, loading the library first if nobody did yet: NULL without an
 * exception when the loaded library lacks it, NULL with one when loading failed. */
static void *slot_try(int slot)
{
    void *p = g_table[g_index[slot]];
    if (PYACL_LIKELY(p != NULL) || g_api->is_loaded()) {
        return p;
    }
    PyObject *ll = PyImport_ImportModule("pyacl_rt.lowlevel");
    if (ll == NULL) {
        return NULL;
    }
    PyObject *r = PyObject_CallMethod(ll, "load", NULL);
    Py_DECREF(ll);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    return g_table[g_index[slot]];
}

/* A timed-out slice left its message in the thread's error state: consume it, so that
 * it is not taken for the message of a later genuine failure (lowlevel.clear_error). */
static int clear_runtime_error(void)
{
    PyObject *ll = PyImport_ImportModule("pyacl_rt.lowlevel");
    if (ll == NULL) {
        return -1;
    }
    PyObject *r = PyObject_CallMethod(ll, "clear_error", NULL);
    Py_DECREF(ll);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* Add a note to the exception being raised (never fails: a failure is ignored). */
static void add_note_to_current(const char *text)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (exc != NULL && tb != NULL) {
        PyException_SetTraceback(exc, tb);
    }
#endif
    if (exc != NULL) {
        PyObject *r = PyObject_CallMethod(exc, "add_note", "s", text);
        if (r == NULL) {
            PyErr_Clear();
        } else {
            Py_DECREF(r);
        }
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(type, exc, tb);
#endif
}

#define WAIT_TIMED_OUT(rc) ((rc) == 507046 || (rc) == 507047) /* STREAM/EVENT_SYNC_TIMEOUT */

static PyObject *sliced_wait(int kind, unsigned long handle, int32_t timeout_ms)
{
    const int slot = wait_slots[kind][0];
    void *fn = slot_try(slot);
    int32_t rc;
    if (PYACL_UNLIKELY(fn == NULL)) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        const int plain = wait_slots[kind][1];
        void *pf = slot_try(plain);
        if (timeout_ms > 0 || pf == NULL) {
            /* FunctionNotFoundError (or the load error) for what is missing */
            if (!PyErr_Occurred()) {
                slot_resolve(pf == NULL ? plain : slot);
            }
            return NULL;
        }
        if (gate_enter(slot_names[plain]) < 0) {
            return NULL;
        }
        NOGIL(rc = kind == W_DEVICE ? ((fn_v_t)pf)() : ((fn_u_t)pf)(handle));
        gate_exit();
        CHECK(rc, plain);
        Py_RETURN_NONE;
    }
    const int32_t slice = g_wait_slice_ms;
    const int sliced = timeout_ms <= 0 || timeout_ms > slice;
    const double deadline = timeout_ms > slice ? now_ms() + (double)timeout_ms : 0.0;
    for (;;) {
        int32_t ms;
        if (timeout_ms <= 0) {
            ms = slice;
        } else if (!sliced) {
            ms = timeout_ms; /* fits into one slice: exactly the user's timeout */
        } else {
            double left = deadline - now_ms();
            ms = left >= (double)slice ? slice : (int32_t)left;
            if ((double)ms < left) {
                ms++; /* round up: never return before the deadline */
            }
            if (ms < 1) {
                ms = 1;
            }
        }
        if (gate_enter(slot_names[slot]) < 0) {
            return NULL;
        }
        NOGIL(rc = kind == W_DEVICE ? ((fn_i_t)fn)(ms) : ((fn_ui_t)fn)(handle, ms));
        gate_exit();
        if (PYACL_LIKELY(rc == 0)) {
            Py_RETURN_NONE;
        }
        if (!WAIT_TIMED_OUT(rc)) {
            return raise_rc(rc, slot);
        }
        if (timeout_ms > 0 && (!sliced || now_ms() >= deadline)) {
            raise_rc(rc, slot); /* SyncTimeoutError, with the runtime's message */
            if (sliced) {
                char note[160];
                snprintf(note, sizeof note,
                         "pyacl_rt waited %d ms in total, in slices of at most %d ms "
                         "(so that signals are handled while waiting)",
                         (int)timeout_ms, (int)slice);
                add_note_to_current(note);
            }
            return NULL;
        }
        if (clear_runtime_error() < 0 || PyErr_CheckSignals() < 0) {
            return NULL;
        }
    }
}

/* The timeout argument of the waits: milliseconds, <= 0 = no timeout. */
static int wait_timeout_arg(PyObject *o, int32_t *out, const char *func)
{
    return to_i32(o, out, func, "timeout", "milliseconds, -1 = forever");
}

static PyObject *f_wait_stream(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    FASTCALL_HEAD(_wait_stream, 2)
    HANDLE(args[0], h, name, "stream", "an aclrtStream handle");
    int32_t ms;
    if (wait_timeout_arg(args[1], &ms, name) < 0) {
        return NULL;
    }
    return sliced_wait(W_STREAM, h, ms);
}

static PyObject *f_wait_event(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    FASTCALL_HEAD(_wait_event, 2)
    HANDLE(args[0], h, name, "event", "an aclrtEvent handle");
    int32_t ms;
    if (wait_timeout_arg(args[1], &ms, name) < 0) {
        return NULL;
    }
    return sliced_wait(W_EVENT, h, ms);
}

static PyObject *f_wait_device(PyObject *self, PyObject *o)
{
    (void)self;
    int32_t ms;
    if (wait_timeout_arg(o, &ms, "_wait_device") < 0) {
        return NULL;
    }
    return sliced_wait(W_DEVICE, 0, ms);
}

/* _wait_slice_ms([ms]) -> the slice length in ms (set it when given; tests). */
static PyObject *f_wait_slice_ms(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "_wait_slice_ms() takes at most 1 argument");
        return NULL;
    }
    int32_t old = g_wait_slice_ms;
    if (nargs == 1) {
        int32_t ms;
        if (to_i32(args[0], &ms, "_wait_slice_ms", "ms", "milliseconds") < 0) {
            return NULL;
        }
        if (ms < 1) {
            PyErr_SetString(PyExc_ValueError, "_wait_slice_ms(): ms must be >= 1");
            return NULL;
        }
        g_wait_slice_ms = ms;
    }
    return PyLong_FromLong(old);
}

/* ------------------------------------------------------------ BufferForwarder
 * A base class whose instances export, through the C buffer protocol, the buffer of
 * the object returned by their `_export_acquire()` method, and count their exports
 * explicitly: every export calls `_export_acquire()` once and, when it is released,
 * `_export_release()` once. The view's `obj` is the instance itself (it stays alive
 * while exported); the forwarded object's own export lives in `view->internal` and is
 * released with it. Python 3.11 has no PEP 688 (`__buffer__`), so a pure-Python class
 * cannot make `memoryview(obj)` work, and reference-count arithmetic to find live
 * exports breaks on CPython 3.14 (borrowed stack references); this works on both.
 * On 3.12+ the type also has `__buffer__` / `__release_buffer__` (slot wrappers). */
static void forwarder_call_release(PyObject *self)
{
    /* Never raises: keeps a pending exception, reports its own as unraisable. */
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *saved = PyErr_GetRaisedException();
#else
    PyObject *saved_type, *saved_value, *saved_tb;
    PyErr_Fetch(&saved_type, &saved_value, &saved_tb);
#endif
    PyObject *r = PyObject_CallMethod(self, "_export_release", NULL);
    if (r == NULL) {
        PyErr_WriteUnraisable(self);
    } else {
        Py_DECREF(r);
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(saved);
#else
    PyErr_Restore(saved_type, saved_value, saved_tb);
#endif
}

static int forwarder_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    view->obj = NULL;
    Py_buffer *inner = PyMem_Calloc(1, sizeof(Py_buffer));
    if (inner == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *target = PyObject_CallMethod(self, "_export_acquire", NULL);
    if (target == NULL) {
        PyMem_Free(inner);
        return -1;
    }
    int rc = PyObject_GetBuffer(target, inner, flags);
    Py_DECREF(target);
    if (rc < 0) {
        PyMem_Free(inner);
        forwarder_call_release(self); /* the acquire is undone */
        return -1;
    }
    *view = *inner; /* buf, len, format, shape, strides: valid while inner is held */
    Py_INCREF(self);
    view->obj = self;
    view->internal = inner;
    return 0;
}

static void forwarder_releasebuffer(PyObject *self, Py_buffer *view)
{
    Py_buffer *inner = (Py_buffer *)view->internal;
    if (inner != NULL) {
        view->internal = NULL;
        PyBuffer_Release(inner);
        PyMem_Free(inner);
    }
    forwarder_call_release(self);
}

static PyBufferProcs forwarder_as_buffer = {forwarder_getbuffer, forwarder_releasebuffer};

static PyTypeObject BufferForwarder_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyacl_rt._raw._fastcall.BufferForwarder",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Base class: memoryview(obj) exports the buffer of obj._export_acquire() and "
              "calls obj._export_release() when that export is released.",
    .tp_as_buffer = &forwarder_as_buffer,
    .tp_new = PyType_GenericNew,
};

/* Introspection for tests: the address of the table this module calls through. */
static PyObject *f_table_address(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromVoidPtr((void *)g_table);
}

#define FASTCALL(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef methods[] = {
    {"get_device", f_get_device, METH_NOARGS,
     "get_device() -> device: aclrtGetDevice (GIL kept: per-thread read)."},
    {"get_current_context", f_get_current_context, METH_NOARGS,
     "get_current_context() -> context: aclrtGetCurrentContext (GIL kept)."},
    {"set_current_context", f_set_current_context, METH_O,
     "set_current_context(context) -> None: aclrtSetCurrentContext (releases the GIL)."},
    {"stream_query", f_stream_query, METH_O,
     "stream_query(stream) -> status: aclrtStreamQuery (0 = complete; releases the GIL)."},
    {"query_event_status", f_query_event_status, METH_O,
     "query_event_status(event) -> status: aclrtQueryEventStatus (1 = complete; releases "
     "the GIL)."},
    {"synchronize_stream", f_synchronize_stream, METH_O,
     "synchronize_stream(stream) -> None: aclrtSynchronizeStream (releases the GIL)."},
    {"synchronize_stream_with_timeout", FASTCALL(f_synchronize_stream_with_timeout),
     METH_FASTCALL,
     "synchronize_stream_with_timeout(stream, timeout_ms) -> None (releases the GIL)."},
    {"synchronize_event", f_synchronize_event, METH_O,
     "synchronize_event(event) -> None: aclrtSynchronizeEvent (releases the GIL)."},
    {"synchronize_event_with_timeout", FASTCALL(f_synchronize_event_with_timeout),
     METH_FASTCALL,
     "synchronize_event_with_timeout(event, timeout_ms) -> None (releases the GIL)."},
    {"record_event", FASTCALL(f_record_event), METH_FASTCALL,
     "record_event(event, stream) -> None: aclrtRecordEvent (releases the GIL)."},
    {"stream_wait_event", FASTCALL(f_stream_wait_event), METH_FASTCALL,
     "stream_wait_event(stream, event) -> None: aclrtStreamWaitEvent (releases the GIL)."},
    {"wait_then_host_func", FASTCALL(f_wait_then_host_func), METH_FASTCALL,
     "wait_then_host_func(stream, event, fn, arg) -> None: aclrtStreamWaitEvent, then "
     "aclrtLaunchHostFunc of a C function on the same stream (releases the GIL once)."},
    {"memcpy_async", FASTCALL(f_memcpy_async), METH_FASTCALL,
     "memcpy_async(dst, dst_max, src, count, kind, stream) -> None: aclrtMemcpyAsync "
     "(releases the GIL)."},
    {"memcpy", FASTCALL(f_memcpy), METH_FASTCALL,
     "memcpy(dst, dst_max, src, count, kind) -> None: aclrtMemcpy (releases the GIL)."},
    {"memset_async", FASTCALL(f_memset_async), METH_FASTCALL,
     "memset_async(dst, dst_max, value, count, stream) -> None: aclrtMemsetAsync "
     "(releases the GIL)."},
    {"launch_with_args", FASTCALL(f_launch_with_args), METH_FASTCALL,
     "launch_with_args(func, num_blocks, stream, cfg, args, plan, values) -> None: "
     "aclrtKernelArgsParaUpdate (changed values), aclrtKernelArgsFinalize, "
     "aclrtLaunchKernelWithConfig (releases the GIL once)."},
    {"launch_objects", FASTCALL(f_launch_objects), METH_FASTCALL,
     "launch_objects(func, num_blocks, stream, cfg, args, plan, sig, objs, token, marker) -> "
     "None | int: pyacl_rt.launch's hot path (see _fastcall.c)."},
    {"_table_address", f_table_address, METH_NOARGS,
     "Address of the dispatch table this module calls through (tests)."},
    {"_gated", f_gated, METH_O,
     "_gated(fn) -> fn wrapped to run inside pyacl_rt's finalize gate (pyacl_rt._state)."},
    {"gated_task", f_gated_task, METH_O,
     "gated_task(fn) -> like _gated, for a call that may enqueue a task (race sanitizer)."},
    {"set_task_hook", f_set_task_hook, METH_O,
     "set_task_hook(hook or None): task calls run as hook(fn, *args) (pyacl_rt._sanitize)."},
    {"_gate_close", f_gate_close, METH_O,
     "_gate_close(seconds) -> bool: close the finalize gate and wait for the calls in "
     "flight on other threads (False: still waiting after `seconds`)."},
    {"_gate_release", f_gate_release, METH_NOARGS,
     "The finalizing thread is done; the gate stays closed."},
    {"_gate_open", f_gate_open, METH_NOARGS, "Open the finalize gate (init)."},
    {"_gate_enter", f_gate_enter, METH_O,
     "_gate_enter(what): enter a gated section (RuntimeFinalizedError when refused)."},
    {"_gate_try_enter", f_gate_try_enter, METH_NOARGS,
     "_gate_try_enter() -> bool: enter a gated section; False when refused."},
    {"_gate_exit", f_gate_exit, METH_NOARGS, "Leave a gated section."},
    {"_gate_state", f_gate_state, METH_NOARGS,
     "(closed, calls in flight, this thread's depth, this thread exempt)."},
    {"_gate_api", f_gate_api, METH_NOARGS,
     "_gate_api() -> address of the gate's state for pyacl_rt's C extensions (_memcore)."},
    {"_gate_after_fork", f_gate_after_fork, METH_NOARGS,
     "Reset the in-flight counters in a forked child."},
    {"_wait_stream", FASTCALL(f_wait_stream), METH_FASTCALL,
     "_wait_stream(stream, timeout_ms) -> None: sliced, interruptible, gated wait "
     "(timeout_ms <= 0: none)."},
    {"_wait_event", FASTCALL(f_wait_event), METH_FASTCALL,
     "_wait_event(event, timeout_ms) -> None: sliced, interruptible, gated wait."},
    {"_wait_device", f_wait_device, METH_O,
     "_wait_device(timeout_ms) -> None: sliced, interruptible, gated device synchronize."},
    {"_wait_slice_ms", FASTCALL(f_wait_slice_ms), METH_FASTCALL,
     "_wait_slice_ms([ms]) -> int: the wait slice in milliseconds (set when given)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "pyacl_rt._raw._fastcall",
    "Hand-written fast paths over pyacl_rt.lowlevel's dispatch table "
    "(use them as pyacl_rt.lowlevel.fast; see pyacl_rt/_raw/_fastcall.c).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int find_api(void)
{
    PyObject *mod = PyImport_ImportModule("pyacl_rt._raw._lowlevel_cffi");
    if (mod == NULL) {
        return -1;
    }
    PyObject *lib = PyObject_GetAttrString(mod, "lib");
    Py_DECREF(mod);
    if (lib == NULL) {
        return -1;
    }
    PyObject *addr = PyObject_CallMethod(lib, "pyacl_lowlevel_api", NULL);
    Py_DECREF(lib);
    if (addr == NULL) {
        return -1;
    }
    const struct pyacl_lowlevel_api *api = PyLong_AsVoidPtr(addr);
    Py_DECREF(addr);
    if (api == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ImportError, "pyacl_lowlevel_api() returned NULL");
        }
        return -1;
    }
    if (api->magic != PYACL_API_MAGIC || api->version != PYACL_API_VERSION ||
        api->size < sizeof(struct pyacl_lowlevel_api)) {
        PyErr_Format(PyExc_ImportError,
                     "pyacl_rt._raw._fastcall does not match pyacl_rt._raw._lowlevel_cffi "
                     "(api magic %#x version %u size %u): rebuild the package",
                     api->magic, api->version, api->size);
        return -1;
    }
    for (int s = 0; s < S_COUNT; s++) {
        g_index[s] = -1;
        for (int i = 0; i < api->nfunc; i++) {
            if (strcmp(api->names[i], slot_names[s]) == 0) {
                g_index[s] = i;
                break;
            }
        }
        if (g_index[s] < 0) {
            PyErr_Format(PyExc_ImportError, "%s is not in the dispatch table of "
                         "pyacl_rt._raw._lowlevel_cffi: rebuild the package", slot_names[s]);
            return -1;
        }
    }
    g_api = api;
    g_table = api->table;
    return 0;
}

PyMODINIT_FUNC PyInit__fastcall(void)
{
    if (find_api() < 0) {
        return NULL;
    }
    str_m = PyUnicode_InternFromString("mem");
    str_ptr = PyUnicode_InternFromString("ptr");
    str_last = PyUnicode_InternFromString("last");
    str_off = PyUnicode_InternFromString("mem_offset");
    if (str_m == NULL || str_ptr == NULL || str_last == NULL || str_off == NULL) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    if (PyType_Ready(&BufferForwarder_Type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyType_Ready(&Gated_Type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&BufferForwarder_Type);
    if (PyModule_AddObject(m, "BufferForwarder", (PyObject *)&BufferForwarder_Type) < 0) {
        Py_DECREF(&BufferForwarder_Type);
        Py_DECREF(m);
        return NULL;
    }
    PyObject *held = Py_BuildValue("(ss)", "get_device", "get_current_context");
    if (held == NULL || PyModule_AddObject(m, "GIL_HELD", held) < 0) {
        Py_XDECREF(held);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
