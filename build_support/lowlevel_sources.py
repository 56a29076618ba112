"""The C source and cffi cdef of ``pyacl_rt._raw._lowlevel_cffi``, generated from the
ABI tables (build time only; used by ``pyacl_rt/_raw/_lowlevel_build.py``, the cffi
build script, and sharing :data:`LIBS` with ``scripts/gen_acl.py``).

Design - a C dispatch table, no link-time dependency on libascendcl:

* The cdef is the generated ``CDEF_TYPES`` plus one declaration per entry of the
  generated ``BINDING_FUNCTIONS``, with the *binding* signature: handles and ``void *``
  cross as ``uintptr_t`` (plain Python ints, no ``ffi.cast`` per call), typed
  out-parameters stay typed pointers (pass preallocated cdata arrays, see
  ``pyacl_rt.lowlevel.scratch()``).
* For every function the C source defines a ``static`` wrapper of that name that loads
  a pointer from ``pyacl_table[i]`` and jumps through it. The table is filled by
  ``pyacl_lowlevel_load()`` (dlopen of the chosen libascendcl.so and, optionally,
  libmsprofiler.so / libascend_dump.so, then dlsym per function).
* A function the loaded library lacks (NULL slot) does not crash: the wrapper records
  the function's index in a thread-local (``pyacl_lowlevel_take_missing()``) and
  returns a sentinel: ``PYACL_MISSING_SYMBOL`` (-1) for ``aclError``-returning
  functions, 0 / NULL / 0.0 for the others (``void`` functions just return).
  ``pyacl_rt.lowlevel`` binds missing functions to Python stubs that raise
  ``FunctionNotFoundError`` instead, so only direct users of ``lowlevel.lib`` see it.
* cffi releases the GIL around every API-mode call (``Py_BEGIN_ALLOW_THREADS`` in the
  generated ``_cffi_f_*`` wrappers), so blocking calls (synchronize, ProcessReport,
  Memcpy) let other Python threads run.
* ``aclAppLog`` is variadic: the binding takes the message as its last argument and
  the wrapper calls ``aclAppLog(level, func, file, line, "%s", message)`` through the
  real variadic pointer type, so the message is never interpreted as a format.

Speed: the module is built against the full C API (not abi3); cffi's per-call errno
save/restore is compiled out (ACL never reports through errno, so ``ffi.errno`` means
nothing after these calls); exact ints convert inline, everything else falls back to
cffi's own converters (same errors).

The ABI equivalence of the binding types with the C prototypes (``uintptr_t`` <->
pointers and handles, ``int32_t`` <-> enums) is the contract of scripts/gen_acl.py.
"""

from __future__ import annotations

import re
from typing import Any

#: The libraries of the dispatch table, in index order (``BindingFunction.lib``).
LIBS = ("libascendcl.so", "libmsprofiler.so", "libascend_dump.so")

_FNPTR = re.compile(r"^(?P<ret>.*?)\(\s*\*\s*(?:const\s*)?\)\s*(?P<args>\(.*\))\s*$")


def _decl(ctype: str, name: str) -> str:
    """A C declarator for ``name`` of type ``ctype`` (handles function-pointer types)."""
    m = _FNPTR.match(ctype)
    if m:
        return f"{m['ret'].strip()} (*{name}){m['args']}"
    if ctype.endswith("*"):
        return f"{ctype}{name}"
    return f"{ctype} {name}"


def _sentinel(restype: str) -> str:
    r = restype.strip()
    if r == "void":
        return ""
    if r == "aclError":
        return "PYACL_MISSING_SYMBOL"
    if r.endswith("*"):
        return "NULL"
    if r in ("float", "double"):
        return "0.0f"
    return "0"


def build_sources(abi: Any) -> tuple[str, str, int]:
    """``(cdef, C source, number of functions)`` of ``_lowlevel_cffi`` from the generated
    tables (``pyacl_rt._raw._abi_data``: ``BINDING_FUNCTIONS``, ``CDEF_TYPES``)."""
    funcs = list(abi.BINDING_FUNCTIONS)
    cdef_lines = [
        abi.CDEF_TYPES,
        "#define PYACL_MISSING_SYMBOL -1",
        "int pyacl_lowlevel_load(const char *paths[], int n, char *err, size_t errlen);",
        "int pyacl_lowlevel_is_loaded(void);",
        "int pyacl_lowlevel_count(void);",
        "const char *pyacl_lowlevel_name(int i);",
        "int pyacl_lowlevel_lib_index(int i);",
        "int pyacl_lowlevel_resolved(int i);",
        "int pyacl_lowlevel_take_missing(void);",
        "uintptr_t pyacl_lowlevel_dlsym(int lib, const char *name);",
        "uintptr_t pyacl_lowlevel_handle(int lib);",
        "const char *pyacl_lowlevel_lib_error(int lib);",
        "uintptr_t pyacl_lowlevel_table(void);",
        "uintptr_t pyacl_lowlevel_api(void);",
    ]
    wrappers: list[str] = []
    names: list[str] = []
    libidx: list[str] = []
    for i, f in enumerate(funcs):
        params = list(f.params_binding)
        arg_decls = ", ".join(_decl(t, f"a{k}") for k, (t, _n) in enumerate(params)) or "void"
        arg_names = ", ".join(f"a{k}" for k in range(len(params)))
        ptypes = ", ".join(t for t, _n in params) or "void"
        cdef_lines.append(
            f"{f.restype_binding} {f.name}("
            + (", ".join(_decl(t, n) for t, n in params) or "void")
            + ");"
        )
        sent = _sentinel(f.restype_binding)
        ret = "" if f.restype_binding.strip() == "void" else "return "
        if f.variadic:
            # Fixed-argument form: the last named argument (the format) becomes a literal
            # message passed through "%s".
            fixed = ", ".join(t for t, _n in params)
            first = ", ".join(f"a{k}" for k in range(len(params) - 1))
            call = f'((void (*)({fixed}, ...))p)({first}, "%s", a{len(params) - 1})'
        else:
            call = f"(({f.restype_binding} (*)({ptypes}))p)({arg_names})"
        fail = f"pyacl_missing = {i}; return {sent};" if sent else f"pyacl_missing = {i}; return;"
        wrappers.append(
            f"static {_decl(f.restype_binding, f.name)}({arg_decls}) {{\n"
            f"    void *p = pyacl_table[{i}];\n"
            f"    if (PYACL_UNLIKELY(p == NULL)) {{ {fail} }}\n"
            f"    {ret}{call};\n"
            f"}}"
        )
        names.append(f'"{f.name}"')
        libidx.append(str(LIBS.index(f.lib)))
    n = len(funcs)
    source = f"""
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

{abi.CDEF_TYPES}

/* AscendCL reports failures through return codes and aclGetRecentErrMsg, never errno:
 * skip cffi's per-call errno save/restore (two calls into _cffi_backend each). As a
 * consequence ffi.errno is meaningless after pyacl_rt.lowlevel calls. */
#undef _cffi_restore_errno
#undef _cffi_save_errno
#define _cffi_restore_errno() ((void)0)
#define _cffi_save_errno() ((void)0)

/* Inline fast paths for the integer conversions of the arguments (handles, sizes,
 * ids): an exact int in range converts without a call into _cffi_backend; anything else
 * (other types, out of range) goes to cffi's own converter, so errors are cffi's. */
static int pyacl_to_i32_slow(PyObject *o) {{ return _cffi_to_c_i32(o); }}
static unsigned int pyacl_to_u32_slow(PyObject *o) {{ return _cffi_to_c_u32(o); }}
static long long pyacl_to_i64_slow(PyObject *o) {{ return _cffi_to_c_i64(o); }}
static unsigned long long pyacl_to_u64_slow(PyObject *o) {{ return _cffi_to_c_u64(o); }}
static inline int pyacl_to_i32(PyObject *o) {{
    if (PyLong_CheckExact(o)) {{
        int overflow = 0;
        long v = PyLong_AsLongAndOverflow(o, &overflow);
        if (!overflow && v >= INT32_MIN && v <= INT32_MAX) return (int)v;
    }}
    return pyacl_to_i32_slow(o);
}}
static inline unsigned int pyacl_to_u32(PyObject *o) {{
    if (PyLong_CheckExact(o)) {{
        int overflow = 0;
        long v = PyLong_AsLongAndOverflow(o, &overflow);
        if (!overflow && v >= 0 && v <= (long)UINT32_MAX) return (unsigned int)v;
    }}
    return pyacl_to_u32_slow(o);
}}
static inline long long pyacl_to_i64(PyObject *o) {{
    if (PyLong_CheckExact(o)) {{
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (!overflow) return v;
    }}
    return pyacl_to_i64_slow(o);
}}
static inline unsigned long long pyacl_to_u64(PyObject *o) {{
    if (PyLong_CheckExact(o)) {{
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (!overflow && v >= 0) return (unsigned long long)v;
    }}
    return pyacl_to_u64_slow(o);  /* also values >= 2**63 */
}}
#undef _cffi_to_c_i32
#undef _cffi_to_c_u32
#undef _cffi_to_c_i64
#undef _cffi_to_c_u64
#define _cffi_to_c_i32 pyacl_to_i32
#define _cffi_to_c_u32 pyacl_to_u32
#define _cffi_to_c_i64 pyacl_to_i64
#define _cffi_to_c_u64 pyacl_to_u64

#define PYACL_MISSING_SYMBOL -1
#define PYACL_NFUNC {n}
#define PYACL_NLIB {len(LIBS)}
#define PYACL_UNLIKELY(x) __builtin_expect(!!(x), 0)

static void *pyacl_table[PYACL_NFUNC];
static const char *const pyacl_names[PYACL_NFUNC] = {{ {", ".join(names)} }};
static const unsigned char pyacl_libidx[PYACL_NFUNC] = {{ {", ".join(libidx)} }};
static void *pyacl_handles[PYACL_NLIB];
static char pyacl_lib_errors[PYACL_NLIB][512];
static int pyacl_loaded;
static pthread_mutex_t pyacl_load_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int pyacl_missing = -1;

/* paths[0] = libascendcl.so (required), paths[1..] = optional companions (NULL or "" =
 * absent). Idempotent: a second call returns 1 without doing anything. 0 = loaded now,
 * -1 = failure (message in err). */
static int pyacl_lowlevel_load(const char *paths[], int n, char *err, size_t errlen) {{
    int rc = 0;
    pthread_mutex_lock(&pyacl_load_lock);
    if (pyacl_loaded) {{
        pthread_mutex_unlock(&pyacl_load_lock);
        return 1;
    }}
    for (int lib = 0; lib < PYACL_NLIB && lib < n; lib++) {{
        const char *path = paths[lib];
        pyacl_lib_errors[lib][0] = '\\0';
        if (path == NULL || path[0] == '\\0') {{
            snprintf(pyacl_lib_errors[lib], sizeof pyacl_lib_errors[lib], "not present");
            continue;
        }}
        void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (h == NULL) {{
            const char *e = dlerror();
            snprintf(pyacl_lib_errors[lib], sizeof pyacl_lib_errors[lib], "%s",
                     e ? e : "dlopen failed");
            if (lib == 0) {{
                snprintf(err, errlen, "%s", pyacl_lib_errors[0]);
                rc = -1;
                break;
            }}
            continue;
        }}
        pyacl_handles[lib] = h;
    }}
    if (rc == 0) {{
        for (int i = 0; i < PYACL_NFUNC; i++) {{
            void *h = pyacl_handles[pyacl_libidx[i]];
            void *p = NULL;
            if (h != NULL) {{
                p = dlsym(h, pyacl_names[i]);
            }}
            if (p == NULL && pyacl_libidx[i] != 0 && pyacl_handles[0] != NULL) {{
                /* some CANN builds export companion functions from libascendcl itself */
                p = dlsym(pyacl_handles[0], pyacl_names[i]);
            }}
            pyacl_table[i] = p;
        }}
        __atomic_store_n(&pyacl_loaded, 1, __ATOMIC_RELEASE);
    }}
    pthread_mutex_unlock(&pyacl_load_lock);
    return rc;
}}

static int pyacl_lowlevel_is_loaded(void) {{
    return __atomic_load_n(&pyacl_loaded, __ATOMIC_ACQUIRE);
}}
static int pyacl_lowlevel_count(void) {{ return PYACL_NFUNC; }}
static const char *pyacl_lowlevel_name(int i) {{
    return (i >= 0 && i < PYACL_NFUNC) ? pyacl_names[i] : NULL;
}}
static int pyacl_lowlevel_lib_index(int i) {{
    return (i >= 0 && i < PYACL_NFUNC) ? pyacl_libidx[i] : -1;
}}
static int pyacl_lowlevel_resolved(int i) {{
    return (i >= 0 && i < PYACL_NFUNC) ? pyacl_table[i] != NULL : 0;
}}
static int pyacl_lowlevel_take_missing(void) {{
    int i = pyacl_missing;
    pyacl_missing = -1;
    return i;
}}
static uintptr_t pyacl_lowlevel_dlsym(int lib, const char *name) {{
    if (lib < 0 || lib >= PYACL_NLIB || pyacl_handles[lib] == NULL || name == NULL) return 0;
    return (uintptr_t)dlsym(pyacl_handles[lib], name);
}}
static uintptr_t pyacl_lowlevel_handle(int lib) {{
    return (lib >= 0 && lib < PYACL_NLIB) ? (uintptr_t)pyacl_handles[lib] : 0;
}}
/* Address of the dispatch table (void *[PYACL_NFUNC], index = BINDING_FUNCTIONS order):
 * the hook for hand-written fast paths that want to jump through the same resolved
 * pointers. Entries never change after a successful load. */
static uintptr_t pyacl_lowlevel_table(void) {{ return (uintptr_t)pyacl_table; }}
/* C-level accessor for pyacl_rt._raw._fastcall (hand-written METH_FASTCALL / METH_O fast
 * paths): the same table, names and missing-symbol thread-local as the wrappers below,
 * so there is one table, filled once. Layout versioned by magic/version/size; keep in
 * sync with struct pyacl_lowlevel_api in pyacl_rt/_raw/_fastcall.c (additive changes only,
 * bump version). */
struct pyacl_lowlevel_api {{
    uint32_t magic;                 /* 0x5041434C "PACL" */
    uint32_t version;               /* 1 */
    uint32_t size;                  /* sizeof(struct pyacl_lowlevel_api) */
    int32_t nfunc;                  /* entries of table / names */
    void *const *table;             /* the dispatch table (NULL entry = missing symbol) */
    const char *const *names;       /* function names, table order */
    int (*is_loaded)(void);         /* 1 once pyacl_lowlevel_load succeeded */
    void (*set_missing)(int index); /* record a missing call (pyacl_lowlevel_take_missing) */
}};
static void pyacl_set_missing(int i) {{ pyacl_missing = i; }}
static const struct pyacl_lowlevel_api pyacl_api = {{
    0x5041434Cu, 1u, (uint32_t)sizeof(struct pyacl_lowlevel_api), PYACL_NFUNC,
    (void *const *)pyacl_table, pyacl_names, pyacl_lowlevel_is_loaded, pyacl_set_missing,
}};
static uintptr_t pyacl_lowlevel_api(void) {{ return (uintptr_t)&pyacl_api; }}
static const char *pyacl_lowlevel_lib_error(int lib) {{
    return (lib >= 0 && lib < PYACL_NLIB) ? pyacl_lib_errors[lib] : "";
}}

/* ---- one wrapper per binding function ---- */
{chr(10).join(wrappers)}
"""
    return "\n".join(cdef_lines), source, n
