/*
 * pyacl_rt._reportcore - the GIL-free half of host-callback completion.
 *
 * ReportLoop: the body of a report thread (pyacl_rt._callbacks.ReportThread). run()
 * loops aclrtProcessReport(poll_ms) with the GIL released until stop() was called, the
 * runtime returned an error, or a Python host callback ran on this thread (the cffi
 * trampoline calls attention(): the thread then has Python work to do - its graveyard,
 * its current context). A C callback (below) never brings the loop back to Python.
 *
 * Inbox: completions on their way to one asyncio loop, without the GIL. An awaited
 * device point gets a *record* (arm(): an address, the user data of a host callback
 * whose function is callback_address()); when the device passes the point the
 * runtime calls on_done(record) on the report thread, which appends the record's token
 * to the inbox's queue and writes the inbox's eventfd only when it was not already
 * signalled. The loop reads the fd (add_reader) and take()s the tokens. No Python, no
 * GIL on that path.
 *
 * Lifetime: an inbox's C core is counted by its owner (the Python object, until
 * detach() or its deallocation) and by each armed record; the fd is closed when the
 * last reference goes, so no write ever reaches a closed or reused fd. A detached
 * inbox drops what arrives. abandon() orphans records the runtime will no longer call
 * back (their stream is gone: context close, finalize): they stop counting against
 * their inbox; free_orphans() frees them once no report thread can run them any more.
 * after_fork() forgets everything inherited by a forked child (closing its copies of
 * the fds; no lock is taken - a parent thread may have held it at the fork).
 *
 * One process-wide mutex guards records, queues and counts (short sections, no
 * allocation on the callback side: arm() reserves queue room for every record).
 *
 * timer_fd() / timer_set(): a CLOCK_MONOTONIC timerfd armed at an absolute time, for
 * pyacl_rt._completion to wake an asyncio loop exactly at its next timer (asyncio's epoll
 * rounds a timeout up to whole milliseconds).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(unsigned long long) == sizeof(uint64_t), "64-bit unsigned long long expected");

/* ------------------------------------------------------------------ report loop */

typedef int32_t (*process_fn_t)(int32_t);

/* Set (GIL held) by a Python callback running inside aclrtProcessReport on this thread. */
static _Thread_local int tl_attention;

typedef struct {
    PyObject_HEAD
    process_fn_t process;
    int32_t timeout_code;
    int stop;
} LoopObject;

static int loop_init(LoopObject *self, PyObject *args, PyObject *kwds)
{
    unsigned long long addr = 0;
    int timeout_code = 0;
    static char *kwlist[] = {"process_address", "timeout_code", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Ki", kwlist, &addr, &timeout_code)) {
        return -1;
    }
    if (addr == 0) {
        PyErr_SetString(PyExc_ValueError, "ReportLoop(): process_address must not be 0");
        return -1;
    }
    self->process = (process_fn_t)(uintptr_t)addr;
    self->timeout_code = timeout_code;
    __atomic_store_n(&self->stop, 0, __ATOMIC_SEQ_CST);
    return 0;
}

/* run(poll_ms) -> rc: 0 when stopped or when a Python callback ran; else the error
 * code of aclrtProcessReport (never its timeout code). */
static PyObject *loop_run(LoopObject *self, PyObject *arg)
{
    long poll = PyLong_AsLong(arg);
    if (poll == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (poll <= 0 || poll > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "ReportLoop.run(): poll_ms must be > 0");
        return NULL;
    }
    if (self->process == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ReportLoop.run(): not initialised");
        return NULL;
    }
    int32_t rc = 0;
    tl_attention = 0;
    Py_BEGIN_ALLOW_THREADS
    while (!__atomic_load_n(&self->stop, __ATOMIC_SEQ_CST)) {
        rc = self->process((int32_t)poll);
        if (rc != 0 && rc != self->timeout_code) {
            break;
        }
        rc = 0;
        if (tl_attention) {
            break;
        }
    }
    Py_END_ALLOW_THREADS
    tl_attention = 0;
    return PyLong_FromLong(rc);
}

static PyObject *loop_stop(LoopObject *self, PyObject *unused)
{
    (void)unused;
    __atomic_store_n(&self->stop, 1, __ATOMIC_SEQ_CST);
    Py_RETURN_NONE;
}

static PyObject *loop_stopped(LoopObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(__atomic_load_n(&self->stop, __ATOMIC_SEQ_CST));
}

static PyMethodDef loop_methods[] = {
    {"run", (PyCFunction)loop_run, METH_O,
     "run(poll_ms) -> rc: process reports (GIL released) until stop(), an error, or a "
     "Python callback ran; 0 or the runtime's error code."},
    {"stop", (PyCFunction)loop_stop, METH_NOARGS, "stop(): make run() return (within poll_ms)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loop_getset[] = {
    {"stopped", (getter)loop_stopped, NULL, "True once stop() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject LoopType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyacl_rt._reportcore.ReportLoop",
    .tp_basicsize = sizeof(LoopObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "ReportLoop(process_address, timeout_code): a report thread's C loop.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)loop_init,
    .tp_methods = loop_methods,
    .tp_getset = loop_getset,
};

/* attention(): a Python callback ran on this report thread (run() returns after it). */
static PyObject *f_attention(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    tl_attention = 1;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------ inbox */

typedef struct core core;
typedef struct rec rec;

struct rec {
    core *box; /* NULL: orphan (on g_orphans) */
    uint64_t token;
    long long group;
    rec *prev, *next;
};

struct core {
    int fd;
    long refs;     /* owner + armed records */
    int signalled; /* fd written, not yet taken */
    int detached;  /* the owner is gone: drop arrivals */
    uint64_t *q;
    size_t qlen, qcap;
    size_t nlive;
    rec *live; /* armed records */
    core *prev, *next; /* g_cores */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static core *g_cores;
static rec *g_orphans;
static size_t g_norphans;
static unsigned long g_generation; /* bumped by after_fork(): older objects are dead */

static void rec_unlink(rec **head, rec *r)
{
    if (r->prev != NULL) {
        r->prev->next = r->next;
    } else {
        *head = r->next;
    }
    if (r->next != NULL) {
        r->next->prev = r->prev;
    }
    r->prev = r->next = NULL;
}

static void rec_push(rec **head, rec *r)
{
    r->prev = NULL;
    r->next = *head;
    if (*head != NULL) {
        (*head)->prev = r;
    }
    *head = r;
}

/* Drop one reference (g_mu held); the last one closes the fd and frees the core. */
static void core_release_locked(core *b)
{
    if (--b->refs > 0) {
        return;
    }
    if (b->prev != NULL) {
        b->prev->next = b->next;
    } else {
        g_cores = b->next;
    }
    if (b->next != NULL) {
        b->next->prev = b->prev;
    }
    close(b->fd);
    free(b->q);
    free(b);
}

static void signal_locked(core *b)
{
    if (!b->signalled) {
        b->signalled = 1;
        const uint64_t one = 1;
        ssize_t n;
        do {
            n = write(b->fd, &one, sizeof(one));
        } while (n < 0 && errno == EINTR);
    }
}

/* The host callback of an awaited point (report thread, no GIL). */
static void on_done(void *arg)
{
    rec *r = (rec *)arg;
    pthread_mutex_lock(&g_mu);
    core *b = r->box;
    if (b == NULL) { /* orphaned meanwhile: only the record is left */
        rec_unlink(&g_orphans, r);
        g_norphans--;
    } else {
        rec_unlink(&b->live, r);
        b->nlive--;
        if (!b->detached) {
            b->q[b->qlen++] = r->token; /* room reserved by arm() */
            signal_locked(b);
        }
        core_release_locked(b);
    }
    pthread_mutex_unlock(&g_mu);
    free(r);
}

/* Room for every armed record and one more push (g_mu held): 0 or -1 (no memory). */
static int reserve_locked(core *b, size_t extra)
{
    size_t need = b->qlen + b->nlive + extra;
    if (need <= b->qcap) {
        return 0;
    }
    size_t cap = b->qcap ? b->qcap : 64;
    while (cap < need) {
        cap *= 2;
    }
    uint64_t *q = realloc(b->q, cap * sizeof(*q));
    if (q == NULL) {
        return -1;
    }
    b->q = q;
    b->qcap = cap;
    return 0;
}

typedef struct {
    PyObject_HEAD
    core *core; /* NULL once detached */
    unsigned long generation;
    PyObject *weakreflist;
} InboxObject;

/* Lock g_mu and return the live core of `self`; or NULL with ValueError set and g_mu
 * not held (the inbox is detached). */
static core *lock_live_core(InboxObject *self)
{
    pthread_mutex_lock(&g_mu);
    if (self->core == NULL || self->generation != g_generation) {
        pthread_mutex_unlock(&g_mu);
        PyErr_SetString(PyExc_ValueError, "the inbox is detached");
        return NULL;
    }
    return self->core;
}

static int inbox_init(InboxObject *self, PyObject *args, PyObject *kwds)
{
    int fd = -1;
    static char *kwlist[] = {"fd", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "i", kwlist, &fd)) {
        return -1;
    }
    if (self->core != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Inbox(): already initialised");
        return -1;
    }
    if (fd < 0) {
        PyErr_SetString(PyExc_ValueError, "Inbox(): fd must be >= 0");
        return -1;
    }
    core *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->fd = fd; /* owned from here on */
    b->refs = 1;
    pthread_mutex_lock(&g_mu);
    b->next = g_cores;
    if (g_cores != NULL) {
        g_cores->prev = b;
    }
    g_cores = b;
    self->generation = g_generation;
    pthread_mutex_unlock(&g_mu);
    self->core = b;
    return 0;
}

static void detach_locked(InboxObject *self)
{
    core *b = self->core;
    self->core = NULL;
    if (b == NULL || self->generation != g_generation) {
        return;
    }
    b->detached = 1;
    b->qlen = 0;
    core_release_locked(b);
}

static PyObject *inbox_detach(InboxObject *self, PyObject *unused)
{
    (void)unused;
    pthread_mutex_lock(&g_mu);
    detach_locked(self);
    pthread_mutex_unlock(&g_mu);
    Py_RETURN_NONE;
}

static void inbox_dealloc(InboxObject *self)
{
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    pthread_mutex_lock(&g_mu);
    detach_locked(self);
    pthread_mutex_unlock(&g_mu);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *inbox_fileno(InboxObject *self, PyObject *unused)
{
    (void)unused;
    core *b = lock_live_core(self);
    if (b == NULL) {
        return NULL;
    }
    int fd = b->fd;
    pthread_mutex_unlock(&g_mu);
    return PyLong_FromLong(fd);
}

/* arm(token, group) -> record address: the user data of a callback_address() callback. */
static PyObject *inbox_arm(InboxObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "Inbox.arm(token, group) takes 2 arguments");
        return NULL;
    }
    unsigned long long token = PyLong_AsUnsignedLongLong(args[0]);
    if (token == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    long long group = PyLong_AsLongLong(args[1]);
    if (group == -1 && PyErr_Occurred()) {
        return NULL;
    }
    rec *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return PyErr_NoMemory();
    }
    core *b = lock_live_core(self);
    if (b == NULL) {
        free(r);
        return NULL;
    }
    if (reserve_locked(b, 1) < 0) {
        pthread_mutex_unlock(&g_mu);
        free(r);
        return PyErr_NoMemory();
    }
    r->box = b;
    r->token = token;
    r->group = group;
    rec_push(&b->live, r);
    b->nlive++;
    b->refs++;
    pthread_mutex_unlock(&g_mu);
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)r);
}

/* disarm(record): its callback was never launched - forget it. */
static PyObject *inbox_disarm(InboxObject *self, PyObject *arg)
{
    unsigned long long addr = PyLong_AsUnsignedLongLong(arg);
    if (addr == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    core *b = lock_live_core(self);
    if (b == NULL) {
        return NULL;
    }
    rec *r = b->live;
    while (r != NULL && (uintptr_t)r != (uintptr_t)addr) {
        r = r->next;
    }
    if (r == NULL) {
        pthread_mutex_unlock(&g_mu);
        PyErr_SetString(PyExc_ValueError, "Inbox.disarm(): not an armed record of this inbox");
        return NULL;
    }
    rec_unlink(&b->live, r);
    b->nlive--;
    core_release_locked(b); /* never the last: the owner holds one */
    pthread_mutex_unlock(&g_mu);
    free(r);
    Py_RETURN_NONE;
}

/* push(token): deliver a token from Python (any thread), as a callback would. */
static PyObject *inbox_push(InboxObject *self, PyObject *arg)
{
    unsigned long long token = PyLong_AsUnsignedLongLong(arg);
    if (token == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    core *b = lock_live_core(self);
    if (b == NULL) {
        return NULL;
    }
    if (reserve_locked(b, 1) < 0) {
        pthread_mutex_unlock(&g_mu);
        return PyErr_NoMemory();
    }
    b->q[b->qlen++] = token;
    signal_locked(b);
    pthread_mutex_unlock(&g_mu);
    Py_RETURN_NONE;
}

/* take() -> list of tokens that arrived (in arrival order); resets the fd's signal. */
static PyObject *inbox_take(InboxObject *self, PyObject *unused)
{
    (void)unused;
    core *b = lock_live_core(self);
    if (b == NULL) {
        return NULL;
    }
    size_t n = b->qlen;
    uint64_t *copy = NULL;
    if (n > 0) {
        copy = malloc(n * sizeof(*copy));
        if (copy == NULL) { /* the fd stays readable: the loop retries */
            pthread_mutex_unlock(&g_mu);
            return PyErr_NoMemory();
        }
        memcpy(copy, b->q, n * sizeof(*copy));
        b->qlen = 0;
    }
    uint64_t counter;
    ssize_t got;
    do {
        got = read(b->fd, &counter, sizeof(counter));
    } while (got < 0 && errno == EINTR);
    b->signalled = 0;
    pthread_mutex_unlock(&g_mu);
    PyObject *out = PyList_New((Py_ssize_t)n);
    if (out != NULL) {
        for (size_t i = 0; i < n; i++) {
            PyObject *t = PyLong_FromUnsignedLongLong((unsigned long long)copy[i]);
            if (t == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, (Py_ssize_t)i, t);
        }
    }
    free(copy);
    return out;
}

/* stats() -> (references, armed records, queued tokens, signalled), or None if detached. */
static PyObject *inbox_stats(InboxObject *self, PyObject *unused)
{
    (void)unused;
    pthread_mutex_lock(&g_mu);
    core *b = self->generation == g_generation ? self->core : NULL;
    long refs = b ? b->refs : 0;
    size_t nlive = b ? b->nlive : 0, qlen = b ? b->qlen : 0;
    int sig = b ? b->signalled : 0;
    pthread_mutex_unlock(&g_mu);
    if (b == NULL) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(lnnO)", refs, (Py_ssize_t)nlive, (Py_ssize_t)qlen, sig ? Py_True : Py_False);
}

static PyMethodDef inbox_methods[] = {
    {"fileno", (PyCFunction)inbox_fileno, METH_NOARGS, "fileno() -> the eventfd the loop reads."},
    {"arm", (PyCFunction)(void (*)(void))inbox_arm, METH_FASTCALL,
     "arm(token, group) -> record address (the user data of a callback_address() callback)."},
    {"disarm", (PyCFunction)inbox_disarm, METH_O, "disarm(record): its callback was never launched."},
    {"push", (PyCFunction)inbox_push, METH_O, "push(token): deliver a token from Python."},
    {"take", (PyCFunction)inbox_take, METH_NOARGS, "take() -> the tokens that arrived (fd reset)."},
    {"detach", (PyCFunction)inbox_detach, METH_NOARGS,
     "detach(): the owner is gone (drop arrivals; the fd closes with the last record)."},
    {"stats", (PyCFunction)inbox_stats, METH_NOARGS,
     "stats() -> (references, armed records, queued tokens, signalled) or None once detached."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject InboxType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyacl_rt._reportcore.Inbox",
    .tp_basicsize = sizeof(InboxObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Inbox(fd): completions for one loop (takes ownership of the eventfd fd).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)inbox_init,
    .tp_dealloc = (destructor)inbox_dealloc,
    .tp_methods = inbox_methods,
    .tp_weaklistoffset = offsetof(InboxObject, weakreflist),
};

/* ------------------------------------------------------------- module functions */

static PyObject *f_callback_address(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)&on_done);
}

/* timer_fd() -> a non-blocking CLOCK_MONOTONIC timerfd (close-on-exec), owned by the caller. */
static PyObject *f_timer_fd(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLong(fd);
}

/* timer_set(fd, when): arm the timerfd `fd` to expire once at `when` seconds of
 * CLOCK_MONOTONIC (time.monotonic()); when <= 0 disarms. Either clears a pending
 * expiry (the fd is no longer readable). */
static PyObject *f_timer_set(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "timer_set(fd, when) takes 2 arguments");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    if (fd == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (fd < 0 || fd > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "timer_set(): fd out of range");
        return NULL;
    }
    double when = PyFloat_AsDouble(args[1]);
    if (when == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    if (when > 0) {
        if (!(when < 9.0e18 / 1e9)) {
            PyErr_SetString(PyExc_OverflowError, "timer_set(): when is too large");
            return NULL;
        }
        its.it_value.tv_sec = (time_t)when;
        its.it_value.tv_nsec = (long)((when - (double)its.it_value.tv_sec) * 1e9);
        if (its.it_value.tv_nsec >= 1000000000L) {
            its.it_value.tv_nsec = 999999999L;
        }
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) {
            its.it_value.tv_nsec = 1; /* all zeros would disarm */
        }
    }
    if (timerfd_settime((int)fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

/* abandon(group=None) -> n: orphan the armed records (of `group`, else all) whose
 * callbacks the runtime will not run (their stream is gone); their tokens never arrive. */
static PyObject *f_abandon(PyObject *self, PyObject *arg)
{
    (void)self;
    int all = arg == Py_None;
    long long group = 0;
    if (!all) {
        group = PyLong_AsLongLong(arg);
        if (group == -1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    Py_ssize_t n = 0;
    pthread_mutex_lock(&g_mu);
    core *b = g_cores;
    while (b != NULL) {
        core *next_core = b->next;
        rec *r = b->live;
        while (r != NULL) {
            rec *next = r->next;
            if (all || r->group == group) {
                rec_unlink(&b->live, r);
                b->nlive--;
                r->box = NULL;
                rec_push(&g_orphans, r);
                g_norphans++;
                n++;
                int last = b->refs == 1;
                core_release_locked(b);
                if (last) { /* b is freed (it had no other record) */
                    break;
                }
            }
            r = next;
        }
        b = next_core;
    }
    pthread_mutex_unlock(&g_mu);
    return PyLong_FromSsize_t(n);
}

/* free_orphans() -> n: free the orphaned records (no report thread can run them now). */
static PyObject *f_free_orphans(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pthread_mutex_lock(&g_mu);
    rec *r = g_orphans;
    size_t n = g_norphans;
    g_orphans = NULL;
    g_norphans = 0;
    pthread_mutex_unlock(&g_mu);
    while (r != NULL) {
        rec *next = r->next;
        free(r);
        r = next;
    }
    return PyLong_FromSize_t(n);
}

/* stats() -> (live inboxes (fds open), armed records, orphaned records). */
static PyObject *f_stats(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    Py_ssize_t cores = 0, live = 0;
    pthread_mutex_lock(&g_mu);
    for (core *b = g_cores; b != NULL; b = b->next) {
        cores++;
        live += (Py_ssize_t)b->nlive;
    }
    size_t orphans = g_norphans;
    pthread_mutex_unlock(&g_mu);
    return Py_BuildValue("(nnn)", cores, live, (Py_ssize_t)orphans);
}

/* after_fork(): in a forked child - forget every inherited inbox and record (their
 * device work stays in the parent); close the child's copies of the fds. */
static PyObject *f_after_fork(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    pthread_mutex_init(&g_mu, NULL); /* a parent thread may have held it at the fork */
    core *b = g_cores;
    while (b != NULL) {
        core *next = b->next;
        rec *r = b->live;
        while (r != NULL) {
            rec *rn = r->next;
            free(r);
            r = rn;
        }
        close(b->fd);
        free(b->q);
        free(b);
        b = next;
    }
    rec *r = g_orphans;
    while (r != NULL) {
        rec *rn = r->next;
        free(r);
        r = rn;
    }
    g_cores = NULL;
    g_orphans = NULL;
    g_norphans = 0;
    g_generation++;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"attention", f_attention, METH_NOARGS,
     "attention(): a Python callback ran on this report thread (ReportLoop.run returns)."},
    {"callback_address", f_callback_address, METH_NOARGS,
     "callback_address() -> address of the C host callback taking an Inbox record."},
    {"abandon", f_abandon, METH_O,
     "abandon(group|None) -> n: orphan armed records whose callbacks will not run."},
    {"free_orphans", f_free_orphans, METH_NOARGS, "free_orphans() -> n: free orphaned records."},
    {"stats", f_stats, METH_NOARGS, "stats() -> (live inboxes, armed records, orphans)."},
    {"after_fork", f_after_fork, METH_NOARGS, "after_fork(): a forked child forgets everything."},
    {"timer_fd", f_timer_fd, METH_NOARGS, "timer_fd() -> a non-blocking CLOCK_MONOTONIC timerfd."},
    {"timer_set", (PyCFunction)(void (*)(void))f_timer_set, METH_FASTCALL,
     "timer_set(fd, when): expire once at time.monotonic() == when (<= 0: disarm)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "pyacl_rt._reportcore",
    "GIL-free report loop and await completion inboxes (see the C source).", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__reportcore(void)
{
    if (PyType_Ready(&LoopType) < 0 || PyType_Ready(&InboxType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "ReportLoop", (PyObject *)&LoopType) < 0 ||
        PyModule_AddObjectRef(m, "Inbox", (PyObject *)&InboxType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
