"""Loaded kernel binaries (:class:`ObjectCode`) and the kernels in them (:class:`Kernel`).

* :class:`ObjectCode` owns an ``aclrtBinHandle`` (``aclrtBinaryLoadFromFile`` /
  ``aclrtBinaryLoadFromData``) on the device of the context current when it was loaded
  (the device's primary context, or the explicit :class:`~pyacl_rt.Context` active on
  the thread, which it keeps alive). ``close()`` (idempotent), the context manager,
  garbage collection, closing its Context or :func:`pyacl_rt.finalize` unload it
  (``aclrtBinaryUnLoad`` in the context of the load), after waiting for the streams
  its kernels were launched on; finalize unloads binaries after streams are destroyed.
* :class:`Kernel` is one kernel of a binary, looked up by name
  (``aclrtBinaryGetFunction``); it keeps its :class:`ObjectCode` alive and dies with it
  (launching a kernel of a closed binary raises :class:`~pyacl_rt.errors.ObjectClosedError`).

Layer 7 (higher tools): imports layers 1-6.
"""

from __future__ import annotations

import functools
import os
import weakref
from typing import TYPE_CHECKING, Any, Final, NamedTuple, NoReturn

from .. import _releaser, _runtime, errors, lowlevel
from .._args import type_name
from .._device import Device, DeviceLike, context_for, device_index_arg
from .._raw._abi_runtime import CONSTANTS as _C
from .._state import (
    CLOSED_REF,
    FINALIZED_REF,
    CtxRef,
    LiveSet,
    check,
    context_close_hooks,
    lib,
    local,
    log_release_failure,
    owner_of,
    raise_dead,
    refuse_copy,
    refuse_in_callback,
    run_finalizer,
)
from .._syncdebug import check_sync, sync_debug_active

if TYPE_CHECKING:
    from .._stream import Stream

__all__ = ["Kernel", "KernelAttributes", "ObjectCode", "ParamInfo"]

_MAGICS: Final[dict[str, int]] = {
    "aicore": _C["ACL_RT_BINARY_MAGIC_ELF_AICORE"],
    "vector": _C["ACL_RT_BINARY_MAGIC_ELF_VECTOR_CORE"],
    "cube": _C["ACL_RT_BINARY_MAGIC_ELF_CUBE_CORE"],
}
_KERNEL_TYPES: Final[dict[int, str]] = {
    _C["ACL_KERNEL_TYPE_AICORE"]: "aicore",
    _C["ACL_KERNEL_TYPE_CUBE"]: "cube",
    _C["ACL_KERNEL_TYPE_VECTOR"]: "vector",
    _C["ACL_KERNEL_TYPE_MIX"]: "mix",
    _C["ACL_KERNEL_TYPE_AICPU"]: "aicpu",
}
_FEATURE_NOT_SUPPORT: Final = 207000


class _BinState:
    """What an ObjectCode shares with its finalizer and its kernels: the handle (0 once
    unloaded) and the streams its kernels were launched on (weak; ``last`` is the state
    token of the last one, compared by identity on the launch path)."""

    __slots__ = ("handle", "last", "streams")

    def __init__(self, handle: int) -> None:
        self.handle = handle
        self.last: object = None
        self.streams: list[weakref.ref[Stream]] = []

    def note(self, stream: Stream) -> None:
        """Remember that a kernel of this binary was launched on ``stream``."""
        self.last = stream.stream_state
        r = weakref.ref(stream)
        if r not in self.streams:
            self.streams.append(r)


def _unload(ctx: CtxRef, state: _BinState) -> None:
    """Finalizer body: wait for the streams that launched its kernels, then unload in
    the context of the load. Never raises; never touches a finalized runtime."""
    try:
        handle = state.handle
        state.handle = 0
        if ctx.device < 0 or not handle:
            return
        if local.st.in_callback:
            # GC on a host-callback thread: waiting for streams could wait for this thread.
            state.handle = handle
            _releaser.defer(functools.partial(_unload, ctx, state))
            return
        ctx.ensure_current()
        for r in state.streams:
            s = r()
            h = s.resolved_handle if s is not None and not s.closed else 0
            if h and lib.aclrtSynchronizeStream(h):
                lowlevel.clear_error()  # a failed launch: its error was or will be raised
        state.streams.clear()
        state.last = None
        rc = lib.aclrtBinaryUnLoad(handle)
        if rc:
            log_release_failure("aclrtBinaryUnLoad", handle, rc)
    except BaseException:  # pragma: no cover - interpreter shutdown
        pass


_live: LiveSet[ObjectCode] = LiveSet()


class ObjectCode:
    """A loaded kernel binary (``aclrtBinHandle``), like cuda.core's ``ObjectCode``.

    ``source`` is a path (``str`` or ``os.PathLike``; made absolute, as the runtime
    requires) or the binary's bytes (any object with the buffer protocol). On a card it
    is the Ascend C ``.o``; on the mock a host-twin object built with
    ``acl/acl_mock_kernel.h``, or any device ELF whose kernels have twins registered
    (:func:`pyacl_rt.mock.register_kernel`). Loaded on ``device`` (default: the current
    device) in the context that is current there. ``lazy=True`` registers without
    copying to the device until the first :meth:`get_kernel`; ``kernel_type``
    (``"aicore"``, ``"vector"`` or ``"cube"``) sets the binary's target core
    (``ACL_RT_BINARY_LOAD_OPT_MAGIC``).
    """

    __slots__ = ("__weakref__", "_finalizer", "_kernels", "_owner", "_path", "bin_state", "ctx_ref")

    def __init__(
        self,
        source: str | os.PathLike[str] | bytes | bytearray | memoryview,
        *,
        device: DeviceLike = None,
        lazy: bool = False,
        kernel_type: str | None = None,
    ) -> None:
        if lazy is not True and lazy is not False:
            raise TypeError(f"ObjectCode(): lazy must be a bool, not {type_name(lazy)}")
        if kernel_type is not None and kernel_type not in _MAGICS:
            if not isinstance(kernel_type, str):
                raise TypeError(
                    f"ObjectCode(): kernel_type must be a str or None, not {type_name(kernel_type)}"
                )
            raise ValueError(
                f"ObjectCode(): kernel_type must be one of {', '.join(map(repr, _MAGICS))}, "
                f"got {kernel_type!r}"
            )
        path: str | None = None
        data: memoryview | None = None
        if isinstance(source, (str, os.PathLike)):
            path = os.path.abspath(os.fspath(source))
            if not os.path.isfile(path):
                raise FileNotFoundError(f"ObjectCode(): no such file: {path}")
        else:
            try:
                data = memoryview(source)
            except TypeError:
                raise TypeError(
                    "ObjectCode(): source must be a path (str or os.PathLike) or the "
                    f"binary's bytes (bytes-like), not {type_name(source)}"
                ) from None
            if data.nbytes == 0:
                raise ValueError("ObjectCode(): the binary is empty (0 bytes)")
        index = device_index_arg(device)
        ctx = context_for(index)
        ctx.ensure_current()
        ffi = lowlevel.ffi
        opts: Any = ffi.NULL
        keep: list[object] = []
        items = []
        if lazy:
            items.append((_C["ACL_RT_BINARY_LOAD_OPT_LAZY_LOAD"], 1))
        if kernel_type is not None:
            items.append((_C["ACL_RT_BINARY_LOAD_OPT_MAGIC"], _MAGICS[kernel_type]))
        if items:
            arr = ffi.new("aclrtBinaryLoadOption[]", len(items))
            for i, (typ, value) in enumerate(items):
                arr[i].type = typ
                arr[i].value.magic = value  # isLazyLoad and magic share the slot
            opts = ffi.new("aclrtBinaryLoadOptions *")
            opts.options = arr
            opts.numOpt = len(items)
            keep.append(arr)
        out = local.st.scratch.uptr
        if path is not None:
            rc = lib.aclrtBinaryLoadFromFile(path.encode(), opts, out)
            check(rc, "aclrtBinaryLoadFromFile")
        else:
            assert data is not None
            try:
                with ffi.from_buffer("char[]", data) as cd:
                    rc = lib.aclrtBinaryLoadFromData(
                        int(ffi.cast("uintptr_t", cd)), data.nbytes, opts, out
                    )
            finally:
                data.release()  # the caller's buffer is not kept exported on an error
            check(rc, "aclrtBinaryLoadFromData")
        del keep
        self.bin_state = _BinState(int(out[0]))
        self.ctx_ref = ctx
        self._owner = owner_of(ctx)  # keeps an explicit Context alive
        self._path = path
        self._kernels: dict[str, Kernel] = {}
        self._finalizer: weakref.finalize[..., Any] = weakref.finalize(
            self, _unload, ctx, self.bin_state
        )
        self._finalizer.atexit = False
        _live.add(self)

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        device: DeviceLike = None,
        lazy: bool = False,
        kernel_type: str | None = None,
    ) -> ObjectCode:
        """Load the binary at ``path`` (``aclrtBinaryLoadFromFile``)."""
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                f"ObjectCode.from_file(): path must be a str or os.PathLike, not {type_name(path)}"
            )
        return cls(path, device=device, lazy=lazy, kernel_type=kernel_type)

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        device: DeviceLike = None,
        lazy: bool = False,
        kernel_type: str | None = None,
    ) -> ObjectCode:
        """Load a binary from host memory (``aclrtBinaryLoadFromData``; the bytes are
        copied by the runtime, so ``data`` may be dropped afterwards)."""
        if isinstance(data, (str, os.PathLike)):
            raise TypeError(
                "ObjectCode.from_bytes(): data must be bytes-like, not a path "
                f"({type_name(data)}); use ObjectCode.from_file()"
            )
        try:
            memoryview(data).release()
        except TypeError:
            raise TypeError(
                f"ObjectCode.from_bytes(): data must be bytes-like, not {type_name(data)}"
            ) from None
        return cls(data, device=device, lazy=lazy, kernel_type=kernel_type)

    # Owning a raw handle: a copy would alias it.
    def __reduce__(self) -> NoReturn:
        refuse_copy(self, "aclrtBinHandle")

    def __copy__(self) -> NoReturn:
        refuse_copy(self, "aclrtBinHandle")

    def __deepcopy__(self, memo: object) -> NoReturn:
        refuse_copy(self, "aclrtBinHandle")

    # ------------------------------------------------------------ properties
    @property
    def handle(self) -> int:
        """The raw ``aclrtBinHandle`` as an int (0 once closed)."""
        return self.bin_state.handle

    @property
    def device(self) -> Device:
        """The device the binary is loaded on."""
        return Device(self._device_index())

    def _device_index(self) -> int:
        ctx = self.ctx_ref
        if ctx.device < 0:
            raise_dead(ctx.dead)
        return ctx.device

    @property
    def path(self) -> str | None:
        """The absolute path it was loaded from (None when loaded from bytes)."""
        return self._path

    @property
    def closed(self) -> bool:
        """True once unloaded (closed, its Context closed, or the runtime finalized)."""
        return self.bin_state.handle == 0

    def __repr__(self) -> str:
        src = self._path or "<bytes>"
        if self.closed:
            return f"<ObjectCode {src} (closed)>"
        return f"<ObjectCode {src} on device {self.ctx_ref.device}>"

    def ensure_current(self) -> None:
        """Make this module's context current on the calling thread (or raise if unloaded)."""
        ctx = self.ctx_ref
        if ctx.device < 0 or not self.bin_state.handle:
            if ctx.device < 0 and ctx is not CLOSED_REF:
                raise_dead(ctx.dead)
            raise errors.ObjectClosedError(
                "the ObjectCode is closed (unloaded); load the binary again", explanation=""
            )
        ctx.ensure_current()

    # --------------------------------------------------------------- kernels
    def get_kernel(self, name: str) -> Kernel:
        """The kernel ``name`` of this binary (``aclrtBinaryGetFunction``; one
        :class:`Kernel` object per name). A name the binary lacks raises the runtime's
        error (``ACL_ERROR_RT_SYMBOL_NOT_FOUND``)."""
        if not isinstance(name, str):
            raise TypeError(f"ObjectCode.get_kernel(): name must be a str, not {type_name(name)}")
        if not name or "\0" in name:
            raise ValueError("ObjectCode.get_kernel(): name must be a non-empty str without NUL")
        k = self._kernels.get(name)
        if k is not None and not self.closed:
            return k
        self.ensure_current()
        out = local.st.scratch.uptr
        check(
            lib.aclrtBinaryGetFunction(self.bin_state.handle, name.encode(), out),
            "aclrtBinaryGetFunction",
        )
        k = Kernel._make(self, name, int(out[0]))
        return self._kernels.setdefault(name, k)

    # -------------------------------------------------------------- lifetime
    def close(self) -> None:
        """Unload the binary (``aclrtBinaryUnLoad``) after the streams its kernels were
        launched on finished their work. Idempotent; its kernels cannot be launched
        afterwards."""
        if self.bin_state.streams and self.bin_state.handle:
            if local.st.in_callback:
                refuse_in_callback("ObjectCode.close()")
            if sync_debug_active():
                check_sync("ObjectCode.close()")
        run_finalizer(self._finalizer)
        if self.ctx_ref.device >= 0:
            self.ctx_ref = CLOSED_REF
        self._kernels.clear()
        _live.discard(self)

    def make_inert(self, reason: CtxRef) -> None:
        """Finalize / context close (package-internal): unload, then refuse further use."""
        run_finalizer(self._finalizer)
        self.ctx_ref = reason
        self._kernels.clear()

    def __enter__(self) -> ObjectCode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ParamInfo(NamedTuple):
    """One parameter of a kernel: its byte ``offset`` in the argument block and its
    ``size`` in bytes (``aclrtFunctionGetParamInfo``)."""

    offset: int
    size: int


class KernelAttributes(NamedTuple):
    """``aclrtGetFunctionAttribute`` of a kernel: ``kernel_type`` (``"aicore"``,
    ``"cube"``, ``"vector"``, ``"mix"``, ``"aicpu"``), ``ratio`` (cube : vector cores of
    a MIX kernel as the runtime encodes it, None where it does not report one) and ``schedule_mode``
    (0 normal, 1 batch)."""

    kernel_type: str
    ratio: int | None
    schedule_mode: int


class Kernel:
    """One kernel of an :class:`ObjectCode`, from :meth:`ObjectCode.get_kernel`.

    Launch it with :func:`pyacl_rt.launch`. It keeps its ObjectCode alive; once that is
    closed, launching raises :class:`~pyacl_rt.errors.ObjectClosedError`.
    """

    __slots__ = (
        "__weakref__",
        "_params",
        "bin_state",
        "code_ref",
        "cur_plans",
        "dev_index",
        "func_handle",
        "kernel_name",
        "plan_pools",
    )

    #: Internal interface (read by :mod:`.launcher`): the binary, the device index of its
    #: context, the ``aclrtFuncHandle`` and the kernel's name.
    code_ref: ObjectCode
    dev_index: int
    func_handle: int
    kernel_name: str
    bin_state: _BinState
    #: Per argument signature, its packing plans (a list used as a pool: one plan per
    #: concurrent launch); ``cur_plans`` is (signature, pool) of the last launch, read in one
    #: go by the hot path (see pyacl_rt._kernels.launcher).
    plan_pools: dict[tuple[object, ...], list[Any]]
    cur_plans: tuple[tuple[object, ...], list[Any]]
    _params: tuple[ParamInfo, ...] | bool | None

    def __init__(self) -> None:
        raise TypeError("Kernel objects come from ObjectCode.get_kernel(name)")

    @classmethod
    def _make(cls, code: ObjectCode, name: str, func: int) -> Kernel:
        k = cls.__new__(cls)
        k.code_ref = code
        k.bin_state = code.bin_state
        k.func_handle = func
        k.kernel_name = name
        k.dev_index = code.ctx_ref.device
        k.plan_pools = {}
        k.cur_plans = ((None,), [])  # matches no argument list: the first launch plans
        k._params = False  # not asked yet
        return k

    def __reduce__(self) -> NoReturn:
        refuse_copy(self, "aclrtFuncHandle")

    def __copy__(self) -> NoReturn:
        refuse_copy(self, "aclrtFuncHandle")

    def __deepcopy__(self, memo: object) -> NoReturn:
        refuse_copy(self, "aclrtFuncHandle")

    @property
    def name(self) -> str:
        """The kernel's name."""
        return self.kernel_name

    @property
    def handle(self) -> int:
        """The raw ``aclrtFuncHandle`` as an int."""
        return self.func_handle

    @property
    def object_code(self) -> ObjectCode:
        """The binary this kernel belongs to."""
        return self.code_ref

    def __repr__(self) -> str:
        return f"<Kernel {self.kernel_name!r} of {self.code_ref!r}>"

    def param_list(self) -> tuple[ParamInfo, ...] | None:
        """The described parameters, or None when the runtime cannot say (cached)."""
        p = self._params
        if p is False:
            self.code_ref.ensure_current()
            s = local.st.scratch
            rc = lib.aclrtFunctionGetParamCount(self.func_handle, s.size)
            if rc == _FEATURE_NOT_SUPPORT or rc == lowlevel.MISSING_SYMBOL:
                lowlevel.clear_error()
                lowlevel.take_missing()
                p = None
            else:
                check(rc, "aclrtFunctionGetParamCount")
                n = int(s.size[0])
                infos = []
                for i in range(n):
                    check(
                        lib.aclrtFunctionGetParamInfo(self.func_handle, i, s.size, s.size + 1),
                        "aclrtFunctionGetParamInfo",
                    )
                    infos.append(ParamInfo(int(s.size[0]), int(s.size[1])))
                p = tuple(infos)
            self._params = p
        return p  # type: ignore[return-value]

    @property
    def num_arguments(self) -> int | None:
        """How many parameters the kernel takes (``aclrtFunctionGetParamCount``), or
        None when the runtime does not know (e.g. a mock twin registered without a
        parameter description)."""
        p = self.param_list()
        return None if p is None else len(p)

    @property
    def arguments_info(self) -> tuple[ParamInfo, ...] | None:
        """Offset and size (bytes) of each parameter in the argument block, or None
        when the runtime does not know."""
        return self.param_list()

    @property
    def attributes(self) -> KernelAttributes:
        """The kernel's type, core ratio and schedule mode (``aclrtGetFunctionAttribute``)."""
        self.code_ref.ensure_current()
        v = local.st.scratch.i64
        values: list[int | None] = []
        for attr in (
            "ACL_FUNC_ATTR_KERNEL_TYPE",
            "ACL_FUNC_ATTR_KERNEL_RATIO",
            "ACL_FUNC_ATTR_KERNEL_SCHED_MODE",
        ):
            rc = lib.aclrtGetFunctionAttribute(self.func_handle, _C[attr], v)
            if rc and attr == "ACL_FUNC_ATTR_KERNEL_RATIO":
                lowlevel.clear_error()
                values.append(None)
                continue
            check(rc, "aclrtGetFunctionAttribute")
            values.append(int(v[0]))
        ktype = values[0]
        assert ktype is not None and values[2] is not None
        return KernelAttributes(_KERNEL_TYPES.get(ktype, str(ktype)), values[1], values[2])


def _release_binaries() -> None:
    """Release hook (after streams): unload every live binary."""
    _live.make_inert(None, FINALIZED_REF)


def _on_context_close(ctx: CtxRef) -> None:
    _live.make_inert(ctx, CLOSED_REF)


context_close_hooks.add(_on_context_close, _runtime.PRIORITY_STREAMS + 60)
_runtime.register_release_hook(_release_binaries, _runtime.PRIORITY_STREAMS + 60)
