/*
 * pyacl_rt._dlpack_c - DLPack capsules: making them (export) and taking them (import).
 *
 * Used by pyacl_rt/_dlpack.py only; all policy (devices, streams, dtypes, bounds, what
 * keeps memory alive) lives there. This file does the C-level parts Python cannot:
 *
 * Export: make_capsule() allocates one block holding a managed tensor (the legacy
 *   DLManagedTensor or, for DLPack >= 1.0 consumers, DLManagedTensorVersioned) plus its
 *   shape and strides, and wraps it in a PyCapsule named "dltensor" /
 *   "dltensor_versioned". The block keeps a strong reference to a Python callable
 *   ("release"). The tensor's deleter - called by whoever owns the tensor, from any
 *   thread, with or without the GIL - takes the GIL, calls release() exactly once, drops
 *   the reference and frees the block. The capsule destructor calls the deleter only
 *   while the capsule still has its original name (never consumed); a consumer that
 *   took ownership renamed it to "used_dltensor[_versioned]" and calls the deleter
 *   itself later.
 *
 * Import: consume() reads and checks the structure of a capsule's tensor, renames the
 *   capsule "used_..." (ownership taken) and returns an Imported handle plus the
 *   tensor's fields. Imported.release() calls the producer's deleter exactly once; so
 *   does deallocating an Imported that was never released. In a forked child neither
 *   does (the tensor belongs to the parent; the child forgets it).
 *
 * The struct declarations are written from the DLPack specification (ABI of v1.0, the
 * same in v1.1): field order and widths below; static asserts pin the sizes on LP64.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ DLPack ABI */
typedef struct {
    uint32_t major;
    uint32_t minor;
} dl_version;

typedef struct {
    int32_t device_type; /* a C enum in the spec: 4 bytes */
    int32_t device_id;
} dl_device;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} dl_dtype;

typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape;   /* ndim entries */
    int64_t *strides; /* ndim entries, in elements; NULL = compact row-major */
    uint64_t byte_offset;
} dl_tensor;

typedef struct dl_managed {
    dl_tensor tensor;
    void *manager_ctx;
    void (*deleter)(struct dl_managed *self);
} dl_managed;

typedef struct dl_managed_v {
    dl_version version;
    void *manager_ctx;
    void (*deleter)(struct dl_managed_v *self);
    uint64_t flags;
    dl_tensor tensor;
} dl_managed_v;

_Static_assert(sizeof(dl_tensor) == 48, "DLTensor layout");
_Static_assert(sizeof(dl_managed) == 64, "DLManagedTensor layout");
_Static_assert(sizeof(dl_managed_v) == 80, "DLManagedTensorVersioned layout");

#define DLPACK_MAJOR 1u
#define DLPACK_MINOR 0u
/* Arbitrary but generous: pyacl_rt buffers are 1-D; numpy allows 64 dimensions. */
#define MAX_NDIM 64

static const char NAME[] = "dltensor";
static const char NAME_V[] = "dltensor_versioned";
static const char USED[] = "used_dltensor";
static const char USED_V[] = "used_dltensor_versioned";

/* ------------------------------------------------------------ helpers */
static int interpreter_gone(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return !Py_IsInitialized() || Py_IsFinalizing();
#else
    return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

/* Save / restore the error indicator around code run from a destructor. */
typedef struct {
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc;
#else
    PyObject *type, *value, *tb;
#endif
} saved_error;

static void save_error(saved_error *s)
{
#if PY_VERSION_HEX >= 0x030C0000
    s->exc = PyErr_GetRaisedException();
#else
    PyErr_Fetch(&s->type, &s->value, &s->tb);
#endif
}

static void restore_error(saved_error *s)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(s->exc);
#else
    PyErr_Restore(s->type, s->value, s->tb);
#endif
}

/* ------------------------------------------------------------ export */
typedef struct {
    union {
        dl_managed legacy;
        dl_managed_v versioned;
    } mt;
    PyObject *release; /* called once by the deleter */
    int64_t dims[];    /* shape[ndim], then strides[ndim] */
} export_block;

static atomic_llong g_live_exports; /* blocks made and not yet deleted (tests) */

static void export_block_free(export_block *b)
{
    if (interpreter_gone()) {
        /* Too late to run Python code: leave the block (and its references) alone. */
        return;
    }
    PyGILState_STATE g = PyGILState_Ensure();
    saved_error err;
    save_error(&err);
    PyObject *release = b->release;
    b->release = NULL;
    if (release != NULL) {
        PyObject *r = PyObject_CallNoArgs(release);
        if (r == NULL) {
            PyErr_WriteUnraisable(release);
        } else {
            Py_DECREF(r);
        }
        Py_DECREF(release);
    }
    restore_error(&err);
    PyGILState_Release(g);
    free(b);
    atomic_fetch_sub(&g_live_exports, 1);
}

static void deleter_legacy(dl_managed *self)
{
    if (self != NULL) {
        export_block_free((export_block *)self->manager_ctx);
    }
}

static void deleter_versioned(dl_managed_v *self)
{
    if (self != NULL) {
        export_block_free((export_block *)self->manager_ctx);
    }
}

/* Our capsules' destructor: a capsule nobody consumed still owns its tensor. */
static void capsule_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, NAME_V)) {
        dl_managed_v *mt = PyCapsule_GetPointer(cap, NAME_V);
        if (mt != NULL && mt->deleter != NULL) {
            mt->deleter(mt);
        }
    } else if (PyCapsule_IsValid(cap, NAME)) {
        dl_managed *mt = PyCapsule_GetPointer(cap, NAME);
        if (mt != NULL && mt->deleter != NULL) {
            mt->deleter(mt);
        }
    }
    /* else renamed "used_...": the consumer owns the tensor and calls the deleter. */
}

static int get_u64(PyObject *o, const char *what, unsigned long long *out)
{
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyLong_AsUnsignedLongLong(o);
    if (*out == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be in [0, 2**64)", what);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(make_capsule_doc,
             "make_capsule(data, device_type, device_id, shape, code, bits, lanes, flags,\n"
             "             versioned, release) -> capsule\n\n"
             "A 'dltensor' (versioned=False) or 'dltensor_versioned' capsule of a compact\n"
             "row-major tensor at address ``data``. ``release()`` is called exactly once when\n"
             "the tensor is deleted (by its consumer, or by the capsule if never consumed);\n"
             "it is not called when this function raises.");

static PyObject *f_make_capsule(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *data_o, *shape_o, *release;
    int device_type, device_id, code, bits, lanes, versioned;
    unsigned long long flags;
    if (!PyArg_ParseTuple(args, "OiiO!iiiKpO:make_capsule", &data_o, &device_type, &device_id,
                          &PyTuple_Type, &shape_o, &code, &bits, &lanes, &flags, &versioned,
                          &release)) {
        return NULL;
    }
    unsigned long long data;
    if (get_u64(data_o, "data", &data) < 0) {
        return NULL;
    }
    if (!PyCallable_Check(release)) {
        PyErr_SetString(PyExc_TypeError, "release must be callable");
        return NULL;
    }
    if (code < 0 || code > 255 || bits <= 0 || bits > 255 || lanes <= 0 || lanes > 65535) {
        PyErr_SetString(PyExc_ValueError, "dtype code/bits/lanes out of range");
        return NULL;
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape_o);
    if (ndim > MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "ndim %zd > %d", ndim, MAX_NDIM);
        return NULL;
    }
    int64_t shape[MAX_NDIM];
    for (Py_ssize_t i = 0; i < ndim; i++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(shape_o, i));
        if (v == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (v < 0) {
            PyErr_SetString(PyExc_ValueError, "shape entries must be >= 0");
            return NULL;
        }
        shape[i] = v;
    }
    export_block *b = malloc(sizeof(export_block) + 2 * (size_t)ndim * sizeof(int64_t));
    if (b == NULL) {
        return PyErr_NoMemory();
    }
    memset(b, 0, sizeof(export_block));
    int64_t *sh = b->dims;
    int64_t *st = b->dims + ndim;
    int64_t stride = 1;
    for (Py_ssize_t i = ndim - 1; i >= 0; i--) {
        sh[i] = shape[i];
        st[i] = stride;
        if (shape[i] > 1) {
            stride *= shape[i]; /* the caller checked the product fits the buffer */
        }
    }
    dl_tensor *t = versioned ? &b->mt.versioned.tensor : &b->mt.legacy.tensor;
    t->data = (void *)(uintptr_t)data;
    t->device.device_type = device_type;
    t->device.device_id = device_id;
    t->ndim = (int32_t)ndim;
    t->dtype.code = (uint8_t)code;
    t->dtype.bits = (uint8_t)bits;
    t->dtype.lanes = (uint16_t)lanes;
    t->shape = ndim ? sh : NULL;
    t->strides = ndim ? st : NULL;
    t->byte_offset = 0;
    void *ptr;
    const char *name;
    if (versioned) {
        b->mt.versioned.version.major = DLPACK_MAJOR;
        b->mt.versioned.version.minor = DLPACK_MINOR;
        b->mt.versioned.manager_ctx = b;
        b->mt.versioned.deleter = deleter_versioned;
        b->mt.versioned.flags = flags;
        ptr = &b->mt.versioned;
        name = NAME_V;
    } else {
        b->mt.legacy.manager_ctx = b;
        b->mt.legacy.deleter = deleter_legacy;
        ptr = &b->mt.legacy;
        name = NAME;
    }
    PyObject *cap = PyCapsule_New(ptr, name, capsule_destructor);
    if (cap == NULL) {
        free(b);
        return NULL;
    }
    Py_INCREF(release);
    b->release = release;
    atomic_fetch_add(&g_live_exports, 1);
    return cap;
}

static PyObject *f_live_exports(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    return PyLong_FromLongLong(atomic_load(&g_live_exports));
}

/* ------------------------------------------------------------ import */
typedef struct {
    PyObject_HEAD
    void *mt; /* dl_managed * or dl_managed_v *; NULL once released */
    int versioned;
    pid_t pid; /* the process that took ownership */
} Imported;

static void imported_release_now(Imported *self)
{
    void *mt = self->mt;
    self->mt = NULL;
    if (mt == NULL || self->pid != getpid()) {
        return; /* a forked child never calls its parent's deleters */
    }
    if (self->versioned) {
        dl_managed_v *v = mt;
        if (v->deleter != NULL) {
            v->deleter(v);
        }
    } else {
        dl_managed *l = mt;
        if (l->deleter != NULL) {
            l->deleter(l);
        }
    }
}

static PyObject *imported_release(PyObject *self, PyObject *unused)
{
    (void)unused;
    imported_release_now((Imported *)self);
    Py_RETURN_NONE;
}

static PyObject *imported_released(PyObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(((Imported *)self)->mt == NULL);
}

/* The release callable of a tensor made by make_capsule (None for a foreign one). */
static PyObject *imported_own_release(PyObject *self, void *closure)
{
    (void)closure;
    Imported *im = (Imported *)self;
    export_block *b = NULL;
    if (im->mt != NULL) {
        if (im->versioned && ((dl_managed_v *)im->mt)->deleter == deleter_versioned) {
            b = ((dl_managed_v *)im->mt)->manager_ctx;
        } else if (!im->versioned && ((dl_managed *)im->mt)->deleter == deleter_legacy) {
            b = ((dl_managed *)im->mt)->manager_ctx;
        }
    }
    if (b == NULL || b->release == NULL) {
        Py_RETURN_NONE;
    }
    return Py_NewRef(b->release);
}

static void imported_dealloc(PyObject *self)
{
    saved_error err;
    save_error(&err);
    imported_release_now((Imported *)self);
    restore_error(&err);
    Py_TYPE(self)->tp_free(self);
}

static PyMethodDef imported_methods[] = {
    {"release", imported_release, METH_NOARGS,
     "Call the producer's deleter (once; later calls do nothing)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef imported_getset[] = {
    {"released", imported_released, NULL, "True once the deleter was called.", NULL},
    {"own_release", imported_own_release, NULL,
     "The release callable given to make_capsule if pyacl_rt made this tensor, else None.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject Imported_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "pyacl_rt._dlpack_c.Imported",
    .tp_basicsize = sizeof(Imported),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Ownership of an imported DLPack tensor: release() calls its deleter once.",
    .tp_dealloc = imported_dealloc,
    .tp_methods = imported_methods,
    .tp_getset = imported_getset,
};

PyDoc_STRVAR(consume_doc,
             "consume(capsule) -> (handle, fields)\n\n"
             "Take ownership of a 'dltensor' / 'dltensor_versioned' capsule (renamed\n"
             "'used_...') after checking its structure. ``handle`` is an Imported whose\n"
             "release() calls the deleter once. ``fields`` = (data, byte_offset,\n"
             "device_type, device_id, shape, strides or None, code, bits, lanes, flags,\n"
             "(major, minor) or None). Raises (capsule untouched) when it cannot be read.");

static PyObject *f_consume(PyObject *self, PyObject *cap)
{
    (void)self;
    if (!PyCapsule_CheckExact(cap)) {
        PyErr_Format(PyExc_TypeError, "expected a DLPack PyCapsule, not %.100s",
                     Py_TYPE(cap)->tp_name);
        return NULL;
    }
    const char *name = PyCapsule_GetName(cap);
    if (name == NULL && PyErr_Occurred()) {
        return NULL;
    }
    int versioned;
    if (name != NULL && strcmp(name, NAME_V) == 0) {
        versioned = 1;
    } else if (name != NULL && strcmp(name, NAME) == 0) {
        versioned = 0;
    } else if (name != NULL && (strcmp(name, USED) == 0 || strcmp(name, USED_V) == 0)) {
        PyErr_SetString(PyExc_BufferError,
                        "this DLPack capsule was already consumed (it can be imported once)");
        return NULL;
    } else {
        PyErr_Format(PyExc_TypeError, "not a DLPack capsule (name %s)", name ? name : "NULL");
        return NULL;
    }
    void *mt = PyCapsule_GetPointer(cap, name);
    if (mt == NULL) {
        return NULL;
    }
    dl_tensor *t;
    uint64_t flags = 0;
    PyObject *version;
    if (versioned) {
        dl_managed_v *v = mt;
        if (v->version.major != DLPACK_MAJOR) {
            PyErr_Format(PyExc_BufferError,
                         "DLPack tensor of version %u.%u: pyacl_rt reads major version %u",
                         v->version.major, v->version.minor, DLPACK_MAJOR);
            return NULL;
        }
        t = &v->tensor;
        flags = v->flags;
        version = Py_BuildValue("(II)", v->version.major, v->version.minor);
    } else {
        t = &((dl_managed *)mt)->tensor;
        version = Py_NewRef(Py_None);
    }
    if (version == NULL) {
        return NULL;
    }
    if (t->ndim < 0 || t->ndim > MAX_NDIM) {
        Py_DECREF(version);
        PyErr_Format(PyExc_BufferError, "DLPack tensor has ndim %d (supported: 0..%d)", t->ndim,
                     MAX_NDIM);
        return NULL;
    }
    if (t->ndim > 0 && t->shape == NULL) {
        Py_DECREF(version);
        PyErr_SetString(PyExc_BufferError, "DLPack tensor has ndim > 0 and a NULL shape");
        return NULL;
    }
    PyObject *shape = PyTuple_New(t->ndim);
    PyObject *strides = t->strides != NULL ? PyTuple_New(t->ndim) : Py_NewRef(Py_None);
    if (shape == NULL || strides == NULL) {
        Py_XDECREF(shape);
        Py_XDECREF(strides);
        Py_DECREF(version);
        return NULL;
    }
    for (int i = 0; i < t->ndim; i++) {
        PyObject *d = PyLong_FromLongLong(t->shape[i]);
        if (d == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(shape, i, d);
        if (t->strides != NULL) {
            PyObject *s = PyLong_FromLongLong(t->strides[i]);
            if (s == NULL) {
                goto fail;
            }
            PyTuple_SET_ITEM(strides, i, s);
        }
    }
    PyObject *fields = Py_BuildValue(
        "(KKiiNNiiiKN)", (unsigned long long)(uintptr_t)t->data, (unsigned long long)t->byte_offset,
        (int)t->device.device_type, (int)t->device.device_id, shape, strides, (int)t->dtype.code,
        (int)t->dtype.bits, (int)t->dtype.lanes, (unsigned long long)flags, version);
    shape = strides = version = NULL; /* stolen by "N" (also on failure) */
    if (fields == NULL) {
        return NULL;
    }
    Imported *im = PyObject_New(Imported, &Imported_Type);
    if (im == NULL) {
        Py_DECREF(fields);
        return NULL;
    }
    im->mt = NULL;
    im->versioned = versioned;
    im->pid = getpid();
    if (PyCapsule_SetName(cap, versioned ? USED_V : USED) < 0) {
        Py_DECREF(im);
        Py_DECREF(fields);
        return NULL;
    }
    im->mt = mt; /* ownership taken: from now on the deleter is ours to call */
    PyObject *res = PyTuple_Pack(2, (PyObject *)im, fields);
    Py_DECREF(im); /* on failure: releases the tensor (deleter) */
    Py_DECREF(fields);
    return res;
fail:
    Py_DECREF(shape);
    Py_DECREF(strides);
    Py_DECREF(version);
    return NULL;
}

/* ------------------------------------------------------------ module */
static PyMethodDef methods[] = {
    {"make_capsule", f_make_capsule, METH_VARARGS, make_capsule_doc},
    {"consume", f_consume, METH_O, consume_doc},
    {"live_exports", f_live_exports, METH_NOARGS,
     "live_exports() -> int: tensors made by make_capsule whose deleter has not run yet."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "pyacl_rt._dlpack_c",
    "DLPack capsules for pyacl_rt buffers (see pyacl_rt/_dlpack_c.c and pyacl_rt._dlpack).",
    -1,
    methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__dlpack_c(void)
{
    if (PyType_Ready(&Imported_Type) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "DLPACK_MAJOR", DLPACK_MAJOR) < 0 ||
        PyModule_AddIntConstant(m, "DLPACK_MINOR", DLPACK_MINOR) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&Imported_Type);
    if (PyModule_AddObject(m, "Imported", (PyObject *)&Imported_Type) < 0) {
        Py_DECREF(&Imported_Type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
