"""Python host twins of device kernels on the mock: ``pyacl_rt.mock.register_kernel``.

A twin is a Python function that the mock runs, on the stream's worker thread, for every
launch of a kernel of that name in a device binary (mock README "How kernel names
resolve": an Ascend C ``.o`` or any ELF that is not a host-twin object). It is called once
per block as ``fn(block, blocks, *args)``, where each argument is what its parameter
spec says:

* :class:`In` / :class:`Out` / :class:`InOut` ``(dtype, length)``: a device pointer,
  passed as a 1-D numpy view of ``length`` elements of ``dtype`` over the device memory
  (read-only for :class:`In`; ``None`` for a NULL pointer). ``length`` is an int, the
  name of a :class:`Value` parameter, or a callable taking the values of the
  :class:`Value` parameters in order. The access mode is declared to the mock (its
  race sanitizer and its checks of the launch's pointers read it);
* :class:`Value` ``(dtype, name=None)``: a scalar passed by value, as a numpy scalar.

``independent_blocks=True`` lets the mock run the blocks concurrently on its worker
pool (each call still holds the GIL); otherwise they run in order. An exception raised
by the twin faults the launch: the stream enters the runtime's error state, and the next
``Stream.synchronize()`` raises the mapped :class:`~pyacl_rt.errors.AclError` (AI Core
exception 507015, or the kernel type's code) with the twin's exception chained as its
``__cause__`` (also named in a note); nothing crashes. Registrations live until
:func:`unregister_kernel` or :func:`pyacl_rt.finalize`. The views are valid only during
the call (do not keep them); like a host callback, a twin must not wait for the device
(blocking pyacl_rt calls raise :class:`~pyacl_rt.errors.CallbackContextError` there).

Layer 8 (public face and tools): imports nothing of the package at import time (so that
``python -m pyacl_rt.mock --cflags`` works without the compiled extensions); the first
registration imports lowlevel, _runtime, _state and _stream (lower layers) and numpy.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

__all__ = [
    "In",
    "InOut",
    "Out",
    "Value",
    "register_kernel",
    "registered_kernels",
    "unregister_kernel",
]

_ACCESS_VALUE: Final = 0
_ACCESS_READ: Final = 1
_ACCESS_WRITE: Final = 2
_ACCESS_READ_WRITE: Final = 3
_BLOCKS_INDEPENDENT: Final = 0x1
_KERNEL_TYPES: Final = {
    "aicore": 0x000,
    "cube": 0x100,
    "vector": 0x200,
    "mix": 0x300,
    "aicpu": 0x400,
}
_DESC_VERSION: Final = 2

_CDEF: Final = """
typedef int32_t (*aclmockKernelFn)(void *args, uint32_t blockIdx, uint32_t blockDim,
                                   void *userData);
typedef uint64_t (*aclmockKernelCostFn)(const void *args, size_t argsSize, uint32_t blockDim,
                                        void *userData);
typedef struct { uint32_t size; uint32_t access; } aclmockKernelParam;
typedef struct { uint64_t bytes; uint32_t elemSize; uint32_t countParam; } aclmockKernelExtent;
typedef struct {
    const aclmockKernelExtent *extents; void *extentFn; void *reserved[2];
} aclmockKernelDescExt;
typedef struct {
    uint32_t version; uint32_t flags; const char *name; aclmockKernelFn fn; void *userData;
    uint32_t numParams; uint32_t reserved0; const aclmockKernelParam *params;
    uint64_t costNsPerBlock; aclmockKernelCostFn costFn; void *reserved[4];
} aclmockKernelDesc;
typedef struct {
    const char *name; uint32_t blockIdx; uint32_t numBlocks; uint32_t gridDim[3];
    uint32_t blockDim[3]; uint64_t dynUbufSize; int32_t device; uint32_t reserved0;
    void *stream; const void *args; size_t argsSize; uint64_t reserved[4];
} aclmockKernelLaunchInfo;
int aclmockRegisterKernelDesc(const aclmockKernelDesc *desc);
int aclmockUnregisterKernel(const char *name);
int32_t aclmockKernelIsRegistered(const char *name);
int32_t aclmockKernelGetLaunchInfo(aclmockKernelLaunchInfo *info);
const char *aclGetRecentErrMsg(void);
int aclrtMemGetAddressRange(void *ptr, void **pbase, size_t *psize);
"""


# ---------------------------------------------------------------- parameters
class _Param:
    __slots__ = ("access", "dtype", "length", "name")

    access: int

    def __init__(self, dtype: Any, length: Any = None, name: str | None = None) -> None:
        self.dtype = dtype
        self.length = length
        self.name = name

    def __repr__(self) -> str:
        if self.access == _ACCESS_VALUE:
            extra = f", name={self.name!r}" if self.name else ""
            return f"{type(self).__name__}({self.dtype!r}{extra})"
        return f"{type(self).__name__}({self.dtype!r}, {self.length!r})"


class In(_Param):
    """A device pointer the kernel reads: a read-only numpy view of ``length`` elements
    of ``dtype`` (``length``: an int, the name of a :class:`Value`, or a callable of the
    :class:`Value` arguments)."""

    __slots__ = ()
    access = _ACCESS_READ

    def __init__(self, dtype: Any, length: int | str | Callable[..., int]) -> None:
        super().__init__(dtype, length)


class Out(_Param):
    """A device pointer the kernel writes: a writable numpy view (see :class:`In`)."""

    __slots__ = ()
    access = _ACCESS_WRITE

    def __init__(self, dtype: Any, length: int | str | Callable[..., int]) -> None:
        super().__init__(dtype, length)


class InOut(_Param):
    """A device pointer the kernel reads and writes: a writable numpy view."""

    __slots__ = ()
    access = _ACCESS_READ_WRITE

    def __init__(self, dtype: Any, length: int | str | Callable[..., int]) -> None:
        super().__init__(dtype, length)


class Value(_Param):
    """A scalar passed by value, as a numpy scalar of ``dtype``; ``name`` lets pointer
    parameters take their length from it."""

    __slots__ = ()
    access = _ACCESS_VALUE

    def __init__(self, dtype: Any, name: str | None = None) -> None:
        super().__init__(dtype, None, name)


# ------------------------------------------------------------------ registry
class _Twin:
    """A registered twin: what must stay alive while the mock may call it."""

    __slots__ = ("callback", "cdata", "fn", "name")

    def __init__(self, name: str, fn: Callable[..., object]) -> None:
        self.name = name
        self.fn = fn
        self.callback: Any = None
        self.cdata: list[Any] = []


_lock = threading.Lock()
_twins: dict[str, _Twin] = {}
#: Unregistered twins whose callbacks queued launches may still call (until finalize).
_retired: list[_Twin] = []
#: Resolved stream address -> the first exception a twin raised on it (and the kernel).
_failures: dict[int, tuple[str, BaseException]] = {}
_api: Any = None
_hooked = False


def _mock_api() -> tuple[Any, Any]:
    """``(ffi, lib)``: cffi ABI access to the aclmock API of the loaded library."""
    global _api
    if _api is None:
        import cffi

        from . import lowlevel

        lowlevel.load()
        if not lowlevel.is_mock_library():
            raise RuntimeError(
                f"the loaded library {lowlevel.selection().path} is not the mock: Python "
                "kernel twins need PYACL_RT_BACKEND=mock (or the auto fallback)"
            )
        ffi = cffi.FFI()
        ffi.cdef(_CDEF)
        _api = (ffi, ffi.dlopen(lowlevel.selection().path))
    return _api  # type: ignore[no-any-return]


def _install_hooks() -> None:
    global _hooked
    if _hooked:
        return
    from . import _runtime, _stream

    _stream.sync_error_hooks.add(_chain_failure, 0)
    _runtime.register_release_hook(_release_all, _runtime.PRIORITY_STREAMS + 70)
    _hooked = True


def _chain_failure(stream: Any, exc: BaseException) -> None:
    """Stream.synchronize() failed: chain the exception the stream's twin raised."""
    if not _failures:
        return
    try:
        key = stream.resolved_handle
    except Exception:  # pragma: no cover - a dead stream
        return
    with _lock:
        failure = _failures.pop(key, None)
    if failure is not None:
        name, cause = failure
        text = f"{getattr(exc, 'recent_message', None) or ''} {exc}"
        if f"kernel '{name}'" not in text:  # not that fault (a stream address reused)
            return
        exc.__cause__ = cause
        exc.add_note(f"the Python twin of kernel '{name}' raised {cause!r}")


def _release_all() -> None:
    """Release hook (after streams and binaries): unregister every Python twin."""
    with _lock:
        names = list(_twins)
    for name in names:
        with contextlib.suppress(Exception):  # defensive: finalize must not raise
            unregister_kernel(name)
    with _lock:
        _retired.clear()
        _failures.clear()


def _dtype(spec: _Param, where: str) -> Any:
    import numpy as np

    try:
        return np.dtype(spec.dtype)
    except TypeError:
        raise TypeError(f"{where}: {spec!r}: not a numpy dtype") from None


def _plan(params: Sequence[_Param], where: str) -> list[tuple[int, int, Any, Any, int]]:
    """Per parameter: (slot offset, size, dtype, length rule, access)."""
    import numpy as np

    if not isinstance(params, (list, tuple)):
        raise TypeError(f"{where}: params must be a list or tuple of In/Out/InOut/Value")
    if len(params) > 128:
        raise ValueError(f"{where}: {len(params)} parameters; a kernel takes at most 128")
    names = {}
    vi = 0
    for p in params:
        if not isinstance(p, _Param):
            raise TypeError(f"{where}: params must be In/Out/InOut/Value, not {type(p).__name__}")
        if p.access == _ACCESS_VALUE:
            if p.name is not None:
                if not isinstance(p.name, str) or p.name in names:
                    raise ValueError(f"{where}: {p!r}: duplicate or invalid name")
                names[p.name] = vi
            vi += 1
    out = []
    off = 0
    for i, p in enumerate(params):
        dt = _dtype(p, where)
        if p.access == _ACCESS_VALUE:
            if dt.itemsize == 0 or dt.hasobject:
                raise TypeError(f"{where}: parameter {i} {p!r}: not a fixed-size dtype")
            size = dt.itemsize
            rule: Any = None
        else:
            size = 8
            length = p.length
            if isinstance(length, str):
                if length not in names:
                    raise ValueError(
                        f"{where}: parameter {i} {p!r}: no Value parameter named {length!r}"
                    )
                rule = names[length]
            elif isinstance(length, (int, np.integer)) and not isinstance(length, bool):
                if length < 0:
                    raise ValueError(f"{where}: parameter {i} {p!r}: negative length")
                rule = ("fixed", int(length))
            elif callable(length):
                rule = ("call", length)
            else:
                raise TypeError(
                    f"{where}: parameter {i} {p!r}: length must be an int, the name of a "
                    "Value parameter or a callable"
                )
        out.append((off, size, dt, rule, p.access))
        off += (size + 7) & ~7
    return out


def register_kernel(
    name: str,
    fn: Callable[..., object],
    params: Sequence[_Param],
    *,
    independent_blocks: bool = False,
    kernel_type: str = "aicore",
) -> None:
    """Register ``fn`` as the host twin of kernel ``name`` on the mock (through
    ``aclmockRegisterKernelDesc``): launches of ``name`` in device binaries loaded on the
    mock call ``fn(block, blocks, *args)`` on the stream's worker, with ``args`` as
    ``params`` describe them (see :mod:`pyacl_rt.mock`). ``kernel_type`` (``"aicore"``,
    ``"vector"``, ``"cube"``, ``"mix"``, ``"aicpu"``) sets the fault code and the
    function attribute. A name registered already raises ``ValueError``; a library that
    is not the mock ``RuntimeError``.
    """
    where = "register_kernel()"
    if not isinstance(name, str) or not name or "\0" in name or len(name.encode()) > 255:
        raise ValueError(f"{where}: name must be a non-empty str of at most 255 bytes")
    if not callable(fn):
        raise TypeError(f"{where}: fn must be callable, not {type(fn).__name__}")
    if independent_blocks is not True and independent_blocks is not False:
        raise TypeError(f"{where}: independent_blocks must be a bool")
    if kernel_type not in _KERNEL_TYPES:
        raise ValueError(f"{where}: kernel_type must be one of {', '.join(_KERNEL_TYPES)}")
    plan = _plan(params, where)
    ffi, lib = _mock_api()
    _install_hooks()
    twin = _Twin(name, fn)
    trampoline = _trampoline(twin, plan, ffi, lib)

    def swallow(exc_type: Any, value: Any, tb: Any) -> None:
        return None  # the trampoline catches everything itself; keep stderr clean

    twin.callback = ffi.callback(
        "int32_t(void *, uint32_t, uint32_t, void *)", trampoline, 1, onerror=swallow
    )
    cname = ffi.new("char[]", name.encode())
    cparams = ffi.new("aclmockKernelParam[]", max(1, len(plan)))
    for i, (_off, size, _dt, _rule, access) in enumerate(plan):
        cparams[i].size = size
        cparams[i].access = access
    desc = ffi.new("aclmockKernelDesc *")
    desc.version = _DESC_VERSION
    desc.flags = _KERNEL_TYPES[kernel_type] | (_BLOCKS_INDEPENDENT if independent_blocks else 0)
    desc.name = cname
    desc.fn = twin.callback
    desc.numParams = len(plan)
    desc.params = cparams if plan else ffi.NULL
    twin.cdata = [cname, cparams, desc]
    extents = _extents(params, plan)
    if extents is not None:
        cext = ffi.new("aclmockKernelExtent[]", extents)
        dext = ffi.new("aclmockKernelDescExt *")
        dext.extents = cext
        desc.reserved[0] = dext
        twin.cdata += [cext, dext]
    with _lock:
        if name in _twins or lib.aclmockKernelIsRegistered(name.encode()):
            raise ValueError(f"{where}: a twin of kernel {name!r} is registered already")
        rc = lib.aclmockRegisterKernelDesc(desc)
        if rc:
            msg = lib.aclGetRecentErrMsg()
            text = ffi.string(msg).decode(errors="replace") if msg != ffi.NULL else ""
            raise ValueError(f"{where}: the mock refused the twin of {name!r} ({rc}): {text}")
        _twins[name] = twin


def _extents(
    params: Sequence[_Param], plan: list[tuple[int, int, Any, Any, int]]
) -> list[tuple[int, int, int]] | None:
    """The mock's extents table (acl_mock_kernel.h "Extents": bytes, elemSize, countParam
    per parameter) of the pointer parameters whose length is an int or the name of an
    integer :class:`Value`; None when none has one (a callable length declares none)."""
    index = {p.name: i for i, p in enumerate(params) if p.access == _ACCESS_VALUE and p.name}
    out: list[tuple[int, int, int]] = []
    for p, (_off, _size, dt, rule, access) in zip(params, plan, strict=True):
        ext = (0, 0, 0)
        if access != _ACCESS_VALUE:
            if isinstance(rule, tuple) and rule[0] == "fixed":
                ext = (rule[1] * dt.itemsize, 0, 0)
            elif isinstance(rule, int):
                c = index[p.length]
                cdt = plan[c][2]
                if cdt.kind in "iu" and cdt.itemsize in (1, 2, 4, 8) and dt.itemsize > 0:
                    ext = (0, dt.itemsize, c)
        out.append(ext)
    return out if any(e != (0, 0, 0) for e in out) else None


def _trampoline(
    twin: _Twin, plan: list[tuple[int, int, Any, Any, int]], ffi: Any, lib: Any
) -> Callable[[Any, int, int, Any], int]:
    import traceback

    import numpy as np

    from ._state import local

    fn = twin.fn
    name = twin.name
    total = (plan[-1][0] + ((plan[-1][1] + 7) & ~7)) if plan else 0
    values_idx = [i for i, p in enumerate(plan) if p[4] == _ACCESS_VALUE]

    def run(block: Any, idx: int, dim: int, user: Any) -> int:
        try:
            raw = ffi.buffer(block, total)
            args: list[Any] = [None] * len(plan)
            for i in values_idx:
                off, _size, dt, _rule, _acc = plan[i]
                args[i] = np.frombuffer(raw, dt, 1, off)[0]
            scalars = [args[i] for i in values_idx]
            for i, (off, _size, dt, rule, access) in enumerate(plan):
                if access == _ACCESS_VALUE:
                    continue
                ptr = int.from_bytes(raw[off : off + 8], "little")
                if not ptr:
                    continue
                if isinstance(rule, int):
                    n = int(scalars[rule])
                elif rule[0] == "fixed":
                    n = rule[1]
                else:
                    n = int(rule[1](*scalars))
                nbytes = n * dt.itemsize
                _check_range(ffi, lib, i, ptr, nbytes, name)
                arr = np.frombuffer(ffi.buffer(ffi.cast("char *", ptr), nbytes), dt)
                if access == _ACCESS_READ:
                    arr.flags.writeable = False
                args[i] = arr
            # Like a host callback: blocking calls refuse (a twin must not wait for the
            # device: its own stream waits for it) and GC-triggered frees are deferred.
            st = local.st
            was = st.in_callback
            st.in_callback = True
            try:
                fn(idx, dim, *args)
            finally:
                st.in_callback = was
            return 0
        except BaseException as exc:  # the stream reports the fault
            # The frames' locals hold views of device memory that may be freed later.
            traceback.clear_frames(exc.__traceback__)
            _record_failure(name, exc, ffi, lib)
            return 1

    return run


def _check_range(ffi: Any, lib: Any, i: int, ptr: int, nbytes: int, name: str) -> None:
    """The view of argument ``i`` must lie inside one allocation of the runtime (a wrong
    length in the twin's declaration would otherwise reach other memory)."""
    base = ffi.new("void **")
    size = ffi.new("size_t *")
    if lib.aclrtMemGetAddressRange(ffi.cast("void *", ptr), base, size) != 0:
        lib.aclGetRecentErrMsg()  # consume the worker thread's error text
        raise ValueError(
            f"kernel '{name}' argument {i} (0x{ptr:x}) is not memory allocated by the runtime"
        )
    end = int(ffi.cast("uintptr_t", base[0])) + int(size[0])
    if ptr + nbytes > end:
        raise ValueError(
            f"kernel '{name}' argument {i}: the twin's view of {nbytes} bytes at 0x{ptr:x} runs "
            f"{ptr + nbytes - end} bytes past the end of its allocation; check the length "
            "declared for it"
        )


def _record_failure(name: str, exc: BaseException, ffi: Any, lib: Any) -> None:
    info = ffi.new("aclmockKernelLaunchInfo *")
    if lib.aclmockKernelGetLaunchInfo(info) != 0:
        return
    key = int(ffi.cast("uintptr_t", info.stream))
    with _lock:
        _failures.setdefault(key, (name, exc))


def unregister_kernel(name: str) -> None:
    """Remove the Python twin of ``name`` (launches already queued still run it; later
    launches of ``name`` fail at the call). ``KeyError`` if none is registered."""
    if not isinstance(name, str):
        raise TypeError(f"unregister_kernel(): name must be a str, not {type(name).__name__}")
    with _lock:
        twin = _twins.pop(name, None)
        if twin is None:
            raise KeyError(f"unregister_kernel(): no Python twin of kernel {name!r} is registered")
        _ffi, lib = _mock_api()
        lib.aclmockUnregisterKernel(name.encode())
        _retired.append(twin)  # a queued launch may still call it


def registered_kernels() -> list[str]:
    """Names of the kernels with a Python twin registered now."""
    with _lock:
        return sorted(_twins)
