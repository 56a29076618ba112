"""The raw layer: every AscendCL function, 1:1, as fast as cffi allows.

Usage::

    from pyacl_rt import lowlevel as ll

    s = ll.scratch()                        # per-thread preallocated out-parameters
    rc = ll.aclrtSetDevice(0)
    if rc:
        ll.check(rc, "aclrtSetDevice")      # raises the matching pyacl_rt.errors class
    rc = ll.aclrtGetDevice(s.i32)
    device = s.i32[0]
    rc = ll.aclrtCreateStream(s.uptr)
    stream = s.uptr[0]                      # handles are plain ints (uintptr_t)

Contract:

* **Calls return the C result unchanged** (``aclError`` as an int, ``uintptr_t`` for
  pointers and handles, ``const char *`` as cdata). Nothing raises on a nonzero code:
  call :func:`check` (it reads ``aclGetRecentErrMsg`` at once, on the failing thread).
* **Loading**: the first access to a function attribute (or :data:`lib`) calls
  :func:`load`, which asks the loader which library to use (see
  :func:`pyacl_rt.backend_info` and docs/guides/testing.md, "Which library your tests
  get"), ``dlopen``\\ s it once (plus libmsprofiler.so / libascend_dump.so next to it, when
  present) and resolves every symbol into the C dispatch table. After that, for each *resolved*
  function ``lowlevel.NAME is lowlevel.lib.NAME`` (the raw cffi builtin: no Python
  wrapper on the hot path). For a function the loaded library lacks, ``lowlevel.NAME``
  is a stub that raises :class:`~pyacl_rt.errors.FunctionNotFoundError` naming the
  function and the library; calling it through ``lowlevel.lib`` instead returns
  :data:`MISSING_SYMBOL` (-1) for ``aclError`` functions (0/NULL otherwise), which
  :func:`check` turns into the same exception.
* **GIL**: cffi releases the GIL around every call (``Py_BEGIN_ALLOW_THREADS`` in the
  generated wrapper), so blocking calls (``aclrtSynchronizeStream``,
  ``aclrtProcessReport``, ``aclrtMemcpy`` ...) let other Python threads run.
* **No per-call allocation**: pass ints for handles/pointers and the arrays of
  :func:`scratch` for out-parameters.
* ``ffi.errno`` is not maintained across these calls (ACL reports through return codes
  and ``aclGetRecentErrMsg``; skipping cffi's errno bookkeeping saves two calls per call).
* **Fast variants** (:data:`fast`, a hand-written C module)
  for the hot calls with out-parameters or >= 2 arguments, where cffi's generic
  wrapper costs most (argument tuple + ``PyArg_UnpackTuple``; reading the scratch
  array back). They jump through the *same* dispatch table (one table, filled once by
  :func:`load`; a call before loading loads first). They are **checked** calls, doing
  what a hand-written C extension does - call, check rc, return the value:

  - success returns the out-parameter's value (an int), or ``None`` if there is none;
  - a nonzero ``aclError`` raises the same exception as ``check(rc, "aclrtXxx")``
    (typed by code family, with the recent-error text read at once on the failing
    thread; e.g. a sync timeout, ``code`` 507046/507047, raises
    :class:`~pyacl_rt.errors.SyncTimeoutError`, an AclError and a ``TimeoutError``);
  - a symbol the loaded library lacks raises
    :class:`~pyacl_rt.errors.FunctionNotFoundError` (same sentinel path as :func:`check`);
  - handles, device pointers and sizes are ints in ``[0, 2**64)`` (``__index__``
    accepted, ``bool`` refused), enums / timeouts / the memset value 32-bit ints:
    anything else raises ``TypeError`` / ``OverflowError`` naming the function and the
    argument before C is reached.

  Why checked rather than pyACL's ``(value, ret)`` tuples: every caller checks rc
  anyway, and a tuple plus its unpacking costs about as much as the call itself.
  Use the cffi functions when you need the raw code without an exception.

  ========================================================  =====================
  ``fast.get_device() -> int``                              GIL kept
  ``fast.get_current_context() -> int``                     GIL kept
  ``fast.set_current_context(context)``                     GIL released
  ``fast.stream_query(stream) -> int`` (0 = complete)       GIL released
  ``fast.query_event_status(event) -> int`` (1 = complete)  GIL released
  ``fast.synchronize_stream(stream)``                       GIL released
  ``fast.synchronize_stream_with_timeout(stream, ms)``      GIL released
  ``fast.synchronize_event(event)``                         GIL released
  ``fast.synchronize_event_with_timeout(event, ms)``        GIL released
  ``fast.record_event(event, stream)``                      GIL released
  ``fast.stream_wait_event(stream, event)``                 GIL released
  ``fast.memcpy_async(dst, dst_max, src, n, kind, stream)`` GIL released
  ``fast.memcpy(dst, dst_max, src, n, kind)``               GIL released
  ``fast.memset_async(dst, dst_max, value, n, stream)``     GIL released
  ``fast.launch_with_args(func, blocks, stream, cfg,``      GIL released once
  ``args, plan, values)`` (see below)
  ========================================================  =====================

  ``launch_with_args`` is one kernel launch through a reusable argument list
  (``aclrtArgsHandle`` ``args``, built with one ``aclrtKernelArgsAppend`` per argument):
  ``plan`` is a bytearray of 24-byte entries, one per argument (``<QII8s``: the
  ``aclrtParamHandle``, the appended size, and two fields the call maintains - start
  them at 0), ``values`` a tuple or list of the arguments (an int, a float, or an object
  exporting exactly the appended size, e.g. a numpy or ctypes scalar). The call updates
  the slots whose bytes changed (``aclrtKernelArgsParaUpdate``), finalizes when any did
  and calls ``aclrtLaunchKernelWithConfig(func, blocks, stream, cfg, args, NULL)``
  (``cfg`` an address or 0). ``fast.launch_objects`` is the same call taking the Python
  arguments themselves (owned buffers and scalars, checked against a signature):
  :func:`pyacl_rt.launch`'s hot path.

  GIL policy: every call that can block (takes a runtime lock, talks to the driver,
  waits for the device) releases the GIL. Only ``get_device`` and
  ``get_current_context`` keep it (listed in ``fast.GIL_HELD``): they read the calling
  thread's current context and never wait for device work, and releasing and
  re-taking the GIL costs as much as the call itself (scripts/bench_overhead.py,
  columns "C-ext" vs "C+GIL": ~28 ns of the 55 ns of a GIL-releasing
  ``aclrtGetDevice``; the fast variant takes 28 ns). The queries
  (``stream_query``, ``query_event_status``) release it: they take the stream's /
  event's lock in the runtime (and ask the driver on real hardware), so they can wait.
* ``aclAppLog`` is bound with a fixed signature ``(level, func, file, line, message)``;
  the message is logged literally (the wrapper passes it through ``"%s"``).

Layer 2 of docs/architecture.md: imports only layer-1 modules and the private raw
package (the loader lazily, in :func:`load`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from ._raw._abi_runtime import BINDING_NAMES
from ._raw._extensions import fast, ffi
from ._raw._extensions import lib as _lib
from .errors import FunctionNotFoundError, LibraryNotFoundError, error_from_code

if TYPE_CHECKING:
    from ._raw._loader import LibrarySelection

__all__ = [
    "HOT_PATHS",
    "LIBRARIES",
    "MISSING_SYMBOL",
    "Scratch",
    "check",
    "dispatch_table",
    "fast",
    "ffi",
    "function_names",
    "is_loaded",
    "is_mock_library",
    "library_errors",
    "load",
    "loaded_libraries",
    "register_hot_path",
    "scratch",
    "selection",
    "symbols",
]

#: Returned by an ``aclError`` function of :data:`lib` whose symbol is missing.
MISSING_SYMBOL: int = -1

#: The libraries the dispatch table resolves from, in table order.
LIBRARIES: tuple[str, ...] = ("libascendcl.so", "libmsprofiler.so", "libascend_dump.so")

_FUNCS: frozenset[str] = frozenset(BINDING_NAMES)
_INDEX: dict[str, int] = {}
_load_lock = threading.RLock()
_selection: LibrarySelection | None = None
_lib_paths: dict[str, str | None] = {}


def function_names() -> tuple[str, ...]:
    """Every function of the binding (whether or not the loaded library has it)."""
    return BINDING_NAMES


# ------------------------------------------------------------------- loading
def _missing_stub(name: str, library: str) -> Callable[..., NoReturn]:
    def missing(*args: object, **kwargs: object) -> NoReturn:
        raise FunctionNotFoundError(name, library)

    missing.__name__ = name
    missing.__qualname__ = name
    missing.__doc__ = (
        f"{name} is not exported by {library}: calling it raises FunctionNotFoundError."
    )
    return missing


_lib_errors: dict[str, str] = {}


def _library_label(libname: str) -> str:
    path = _lib_paths.get(libname)
    if path:
        return path
    main = _lib_paths.get(LIBRARIES[0]) or "?"
    why = _lib_errors.get(libname) or "not present"
    return f"{libname} ({why} next to {main}; symbol also absent from libascendcl.so)"


def _dlopen_all(path: str) -> tuple[list[str], str | None]:
    """dlopen ``path`` (+ companions next to it) into the dispatch table.
    Returns (paths tried, None) or (paths, error text)."""
    d = os.path.dirname(path)
    paths = [path]
    for companion in LIBRARIES[1:]:
        cand = os.path.join(d, companion)
        paths.append(cand if os.path.isfile(cand) else "")
    c_paths = [ffi.new("char[]", p.encode()) for p in paths]
    arr = ffi.new("const char *[]", c_paths)
    err = ffi.new("char[1024]")
    rc = _lib.pyacl_lowlevel_load(arr, len(paths), err, len(err))
    if rc < 0:
        return paths, str(ffi.string(err).decode(errors="replace"))
    return paths, None


def load(path: str | None = None) -> LibrarySelection:
    """Load the library once (idempotent) and bind every function as a module attribute.

    ``path`` (absolute) forces a library instead of the loader's choice; it must agree
    with the library already loaded if called again.
    Raises :class:`~pyacl_rt.errors.LibraryNotFoundError`.
    """
    global _selection
    sel = _selection
    if sel is not None and path is None:
        return sel
    with _load_lock:
        if _selection is not None:
            if path is not None and os.path.realpath(path) != os.path.realpath(_selection.path):
                raise LibraryNotFoundError(
                    f"cannot load {path}: {_selection.path} is already loaded in this process "
                    "(a library is loaded once and never unloaded)",
                    searched=[path],
                )
            return _selection
        from ._raw import _loader  # ctypes, packaging, dataclasses: only when loading

        sel = _loader.select_library(path)
        paths, error = _dlopen_all(sel.path)
        if error is not None:
            fallback = None if path is not None else _loader.fallback_after_load_failure(sel, error)
            if fallback is not None:
                sel = fallback
                paths, error = _dlopen_all(sel.path)
            if error is not None:
                raise LibraryNotFoundError(
                    f"failed to load {sel.path} (chosen via {sel.found_via}): {error}",
                    searched=[str(a) for a in sel.attempts] or [sel.path],
                    backend=sel.backend,
                )
        for i, libname in enumerate(LIBRARIES):
            _lib_paths[libname] = paths[i] if _lib.pyacl_lowlevel_handle(i) else None
            _lib_errors[libname] = ffi.string(_lib.pyacl_lowlevel_lib_error(i)).decode(
                errors="replace"
            )
        g = globals()
        for i in range(_lib.pyacl_lowlevel_count()):
            name = ffi.string(_lib.pyacl_lowlevel_name(i)).decode()
            _INDEX[name] = i
            if _lib.pyacl_lowlevel_resolved(i):
                g[name] = getattr(_lib, name)
            else:
                g[name] = _missing_stub(
                    name, _library_label(LIBRARIES[_lib.pyacl_lowlevel_lib_index(i)])
                )
        g["lib"] = _lib
        _selection = sel
        return sel


def is_loaded() -> bool:
    """True once :func:`load` succeeded in this process."""
    return _selection is not None


def selection() -> LibrarySelection:
    """How the loaded library was chosen (loads it if needed)."""
    return load()


def loaded_libraries() -> dict[str, str | None]:
    """Library file name -> path actually loaded (``None`` when absent)."""
    load()
    return dict(_lib_paths)


def library_errors() -> dict[str, str]:
    """Library file name -> why it is not loaded ("" when it is; "not present" when no
    such file sits next to libascendcl.so; else the ``dlerror()`` text)."""
    load()
    return dict(_lib_errors)


def symbols() -> dict[str, tuple[bool, str]]:
    """Inspector: every binding function -> ``(resolved, library file name)``."""
    load()
    out: dict[str, tuple[bool, str]] = {}
    for name, i in _INDEX.items():
        out[name] = (
            bool(_lib.pyacl_lowlevel_resolved(i)),
            LIBRARIES[_lib.pyacl_lowlevel_lib_index(i)],
        )
    return out


def is_mock_library() -> bool:
    """True if the loaded libascendcl.so is mock_libascendcl (exports ``aclmockGetStat``)."""
    load()
    return bool(_lib.pyacl_lowlevel_dlsym(0, b"aclmockGetStat"))


def library_handle(index: int = 0) -> int:
    """The ``dlopen`` handle of :data:`LIBRARIES` ``[index]`` (0 if not loaded)."""
    load()
    return int(_lib.pyacl_lowlevel_handle(index))


def dispatch_table() -> tuple[int, dict[str, int]]:
    """``(address, {name: index})`` of the C dispatch table (``void *[N]``).

    Hook for hand-written fast paths (a C extension or cffi ABI code) that want to call
    through exactly the pointers this module resolved; a NULL entry is a missing symbol.
    Valid for the life of the process once loaded.
    """
    load()
    return int(_lib.pyacl_lowlevel_table()), dict(_INDEX)


# -------------------------------------------------------------------- errors
def recent_error_message() -> str | None:
    """``aclGetRecentErrMsg()`` of the calling thread (reading clears it), or None."""
    if not _lib.pyacl_lowlevel_resolved(_INDEX.get("aclGetRecentErrMsg", -1)):
        return None
    p = _lib.aclGetRecentErrMsg()
    if p == ffi.NULL:
        return None
    text = str(ffi.string(p).decode("utf-8", errors="replace"))
    return text or None


def clear_error() -> None:
    """Consume the calling thread's error state (``aclGetRecentErrMsg`` and
    ``aclrtGetLastError``) after an expected failure, so it does not show up as the
    recent message of the next genuine one."""
    recent_error_message()
    if _lib.pyacl_lowlevel_resolved(_INDEX.get("aclrtGetLastError", -1)):
        _lib.aclrtGetLastError(0)  # ACL_RT_THREAD_LEVEL


def check(rc: int, func: str) -> None:
    """Raise the pyacl_rt exception for a nonzero ``aclError`` ``rc`` of ``func``.

    Reads ``aclGetRecentErrMsg`` immediately, on this (the failing) thread. A
    :data:`MISSING_SYMBOL` result of a missing function raises FunctionNotFoundError.
    """
    if rc == 0:
        return
    if rc == MISSING_SYMBOL:
        idx = _lib.pyacl_lowlevel_take_missing()
        if idx >= 0:
            name = ffi.string(_lib.pyacl_lowlevel_name(idx)).decode()
            raise FunctionNotFoundError(
                name, _library_label(LIBRARIES[_lib.pyacl_lowlevel_lib_index(idx)])
            )
    raise error_from_code(rc, function=func, recent_message=recent_error_message())


def take_missing() -> str | None:
    """Name of the last missing function called through :data:`lib` on this thread
    (and clear it), or None. For functions whose sentinel (0/NULL) is ambiguous."""
    idx = _lib.pyacl_lowlevel_take_missing()
    if idx < 0:
        return None
    return str(ffi.string(_lib.pyacl_lowlevel_name(idx)).decode())


# ------------------------------------------------------------------- scratch
class Scratch:
    """Preallocated out-parameter arrays of one thread (each a cdata ``T[4]``).

    Pass ``s.i32`` where C wants ``int32_t *`` and read ``s.i32[0]`` after the call.
    Never share one thread's scratch with another thread; never keep a reference to
    the values' storage across calls (the next call overwrites it).
    """

    __slots__ = ("f32", "i32", "i64", "size", "u32", "u64", "uptr")

    def __init__(self) -> None:
        self.i32: Any = ffi.new("int32_t[4]")
        self.u32: Any = ffi.new("uint32_t[4]")
        self.i64: Any = ffi.new("int64_t[4]")
        self.u64: Any = ffi.new("uint64_t[4]")
        self.uptr: Any = ffi.new("uintptr_t[4]")
        self.size: Any = ffi.new("size_t[4]")
        self.f32: Any = ffi.new("float[4]")


class _ScratchLocal(threading.local):
    def __init__(self) -> None:
        self.scratch = Scratch()


_tls = _ScratchLocal()


def scratch() -> Scratch:
    """The calling thread's :class:`Scratch` (created on first use in each thread)."""
    return _tls.scratch


# ------------------------------------------------------------------ versions
def cann_version_from_library() -> tuple[str | None, str]:
    """``(version string, source)`` asked from the loaded library itself, or (None, "")."""
    load()
    if _lib.pyacl_lowlevel_resolved(_INDEX["aclsysGetCANNVersion"]):
        v = ffi.new("aclCANNPackageVersion *")
        rc = _lib.aclsysGetCANNVersion(0, v)  # ACL_PKG_NAME_CANN
        if rc == 0:
            text = ffi.string(v.version).decode(errors="replace").strip()
            if text:
                return text, "aclsysGetCANNVersion(ACL_PKG_NAME_CANN)"
        else:
            clear_error()  # so the failure does not leak into the caller's next error
    addr = _lib.pyacl_lowlevel_dlsym(0, b"aclmockGetCannVersion")
    if addr:
        fn = ffi.cast("const char *(*)(void)", addr)
        p = fn()
        if p != ffi.NULL:
            return ffi.string(p).decode(errors="replace"), "aclmockGetCannVersion()"
    return None, ""


# ------------------------------------------------------------ hot-path hook
#: Name -> callable registered by higher layers for Pythonic fast paths
#: (see :func:`register_hot_path`). The raw functions themselves never change.
HOT_PATHS: dict[str, Callable[..., Any]] = {}


def register_hot_path(name: str, fn: Callable[..., Any]) -> None:
    """Register a Pythonic hot path (e.g. ``"get_device"`` -> a closure over the raw
    function and a scratch array) so that higher layers and the benchmark
    (scripts/bench_overhead.py) can find and measure it. Does not alter :data:`lib`."""
    HOT_PATHS[name] = fn


# --------------------------------------------------------- lazy attributes
def __getattr__(name: str) -> Any:
    # Called only for names not yet in the module dict: before load(), every binding
    # function and ``lib`` trigger the (idempotent) load, which binds them all.
    if name in _FUNCS or name == "lib":
        load()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _FUNCS | {"lib"})
