"""Devices, the per-thread current device, and the context cache every object uses.

Model (ACL semantics, acl_abi.md section 5.2/5.3)
--------------------------------------------------
* The ACL *current context* is per thread. ``aclrtSetDevice(d)`` creates device
  ``d``'s default ("primary") context and makes it current for the calling thread.
* pyacl_rt calls ``aclrtSetDevice(d)`` **once per process** per device, the first
  time anything needs device ``d``, remembers that primary context and installs it
  on other threads with ``aclrtSetCurrentContext`` (what torch_npu does for its
  helper threads). So no context is ever created on a device nobody asked for,
  and the device reference count is 1, released by one ``aclrtResetDevice`` at
  :func:`pyacl_rt.runtime.finalize`.
* Every Stream / Event / buffer remembers its context (a :class:`_CtxRef`) and,
  before each runtime call, compares it with the calling thread's cached current
  context (one thread-local load and an identity compare). If they differ it calls
  ``aclrtSetCurrentContext``. So an object used from a brand-new thread just works,
  without ``set_device``.
* The thread's *selected* device (:func:`set_device`, ``with device(i):``) is what
  :func:`current_device` reports and what new objects default to. Using an object of
  another device switches the thread's ACL context lazily but does not change the
  selection.
* Foreign context switches (raw :mod:`pyacl_rt.lowlevel` calls such as
  ``aclrtSetDevice`` / ``aclrtSetCurrentContext``, torch_npu, a C extension) are
  safe for **creation and allocation**: creating a Stream / Event (its first
  record) / Context / DeviceBuffer, :func:`set_device`, ``with device(i):`` and
  device :func:`synchronize` re-validate the cached context against
  the runtime (one GIL-held ``aclrtGetCurrentContext``, ~30 ns) and re-install the
  right one. The hot paths (``Stream.query``, ``Event.record``, copies on a
  stream ...) keep trusting the cache; they pass explicit handles, except a default
  stream (handle NULL = the default stream of whatever context is current). After
  switching the thread's context yourself, call :func:`forget_thread_context` before
  using existing pyacl_rt objects on that thread.

Differences from ``torch_npu.npu`` (documented per function):

* A thread that never selected a device does not default to device 0 but to the
  device currently selected on the main thread (else 0). This is
  the fix for the classic "worker thread silently creates a context on device 0"
  report. Querying :func:`current_device` never creates a context.

Floor 4: imports :mod:`errors`, :mod:`lowlevel`, :mod:`runtime`, :mod:`_loader`.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Generic, NoReturn, SupportsIndex, TypeVar, Union

from . import errors, lowlevel, runtime
from ._args import index_arg, timeout_ms_arg
from ._lowlevel_cffi import lib as _cffi_lib
from ._syncdebug import _check_sync, _sync_debug

# Defined in pyacl_rt.errors (floor 1); still importable from here (compatibility).
from .errors import (
    CallbackContextError,
    InvalidDeviceError,
    ObjectClosedError,
    SyncTimeoutError,
)

__all__ = [
    "CallbackContextError",
    "Device",
    "DeviceProperties",
    "InvalidDeviceError",
    "ObjectClosedError",
    "SyncTimeoutError",
    "can_device_access_peer",
    "current_device",
    "device",
    "device_count",
    "device_of",
    "forget_thread_context",
    "get_cann_version",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_soc_version",
    "is_available",
    "is_bf16_supported",
    "is_support_inf_nan",
    "mem_get_info",
    "set_device",
    "set_op_timeout_ms",
    "synchronize",
    "utilization",
]

_log = logging.getLogger("pyacl_rt")

# --------------------------------------------------------------- constants
ACL_HBM_MEM: Final = 1
ACL_DEV_ATTR_CUBE_CORE_NUM: Final = 102
ACL_DEV_ATTR_VECTOR_CORE_NUM: Final = 201
ACL_DEV_ATTR_AICORE_CORE_NUM: Final = 101
ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE: Final = 301
ACL_DEV_ATTR_L2_CACHE_SIZE: Final = 302
ACL_DEVICE_INFO_AI_CORE_NUM: Final = 0
ACL_DEVICE_INFO_VECTOR_CORE_NUM: Final = 1
ACL_DEVICE_INFO_L2_SIZE: Final = 2
ACL_ERROR_RT_CONTEXT_NULL: Final = 107002
ACL_ERROR_RT_INVALID_DEVICEID: Final = 107001
ACL_ERROR_RT_NO_DEVICE: Final = 207004
TIMEOUT_CODES: Final = errors.SYNC_TIMEOUT_CODES


# ------------------------------------------------------- raw layer binding
# The compiled dispatch module itself (``lowlevel.lib`` once loaded): binding it here
# does not load the library at import. Every path reaches runtime.ensure_initialized()
# (which loads it) before its first call; before that a call would only return
# lowlevel.MISSING_SYMBOL, which check() reports as FunctionNotFoundError.
_lib: Any = _cffi_lib
_check: Callable[[int, str], None] = lowlevel.check
_aclrtSetCurrentContext = _lib.aclrtSetCurrentContext
#: Checked C fast paths (lowlevel.fast): value returned, typed error raised.
_fast: Any = lowlevel.fast
_fast_get_current_context: Callable[[], int] = _fast.get_current_context
_scratch: Callable[[], Any] = lowlevel.scratch


# ------------------------------------------------------------ thread state
class _CtxRef:
    """One ACL context as seen from Python: a primary context or an explicit one.

    ``device < 0`` means dead (runtime finalized, process forked, or the explicit
    context was destroyed); ``dead`` then says why. Identity (not the handle value,
    which the runtime may reuse) is what the per-thread cache compares.
    """

    __slots__ = ("__weakref__", "dead", "device", "handle", "owner")

    def __init__(self, handle: int, device: int, owner: weakref.ref[Any] | None = None) -> None:
        self.handle = handle
        self.device = device
        self.dead: str | None = None
        #: weakref to the explicit :class:`~pyacl_rt.context.Context` (None for a
        #: primary context). Weak so that thread caches never keep a Context alive;
        #: objects created in a Context hold it strongly (see :func:`_owner_of`).
        self.owner = owner

    def make_current(self) -> None:
        """Install this context on the calling thread (``aclrtSetCurrentContext``)."""
        if self.device < 0:
            _raise_dead(self.dead)
        rc = _aclrtSetCurrentContext(self.handle)
        if rc:
            _check(rc, "aclrtSetCurrentContext")
        _local.st.ctx = self

    def kill(self, reason: str) -> None:
        self.device = -1
        self.handle = 0
        self.dead = reason

    def __repr__(self) -> str:
        kind = "explicit" if self.owner is not None else "primary"
        if self.device < 0:
            return f"<{kind} context ({self.dead})>"
        return f"<{kind} context 0x{self.handle:x} on device {self.device}>"


def _owner_of(ref: _CtxRef) -> object:
    """The explicit Context behind ``ref`` (to hold it alive), or None."""
    owner = ref.owner
    return owner() if owner is not None else None


def _raise_dead(reason: str | None) -> None:
    if reason == "forked":
        raise errors.ForkedProcessError()
    if reason == "finalized":
        raise errors.RuntimeFinalizedError(
            "this object belongs to a runtime that was finalized; create a new one",
            explanation="",
        )
    if reason is None:
        raise ObjectClosedError("object is not bound to a context", explanation="")
    raise ObjectClosedError(reason, explanation="")


#: Sentinels objects switch to when closed / made inert by finalize.
_CLOSED = _CtxRef(0, -1)
_CLOSED.dead = "object is closed"
_FINALIZED = _CtxRef(0, -1)
_FINALIZED.dead = "finalized"


class _ThreadState:
    """Per-thread state (one per thread, reached through ``_local.st``).

    A plain slotted object: hot paths pay one thread-local lookup (``_local.st``),
    then cheap slot loads, instead of one thread-local lookup per attribute.
    """

    __slots__ = ("active", "ctx", "device", "guards", "i32", "in_callback", "scratch", "streams")

    def __init__(self) -> None:
        #: The context known to be current on this thread (None = unknown / none).
        self.ctx: _CtxRef | None = None
        #: The device selected by set_device / ``with device()`` (-1 = none).
        self.device: int = -1
        #: The explicit Context activated on this thread (``with ctx:``), or None.
        self.active: _CtxRef | None = None
        #: device index -> current Stream of this thread (managed by stream.py).
        self.streams: dict[int, Any] = {}
        #: Saved states of ``with Device(i):`` blocks.
        self.guards: list[tuple[int, _CtxRef | None]] = []
        #: True on a host-callback (report) thread, for its whole life: blocking calls
        #: are refused there and finalizers defer releases (pyacl_rt._releaser).
        self.in_callback: bool = False
        #: lowlevel's per-thread out-parameter arrays, and its int32_t[4] directly
        #: (one attribute load less on the hot paths).
        self.scratch: Any = _scratch()
        self.i32: Any = self.scratch.i32


class _Local(threading.local):
    def __init__(self) -> None:
        global _main_state
        self.st = _ThreadState()
        # get_ident, not current_thread(): this also runs on threads threading does not
        # know (C threads, a thread being torn down while it releases its objects),
        # where current_thread() would register a stray _DummyThread.
        if threading.get_ident() == _main_ident:
            _main_state = self.st


_main_ident = threading.main_thread().ident
#: The main thread's state: its selected device is the fallback of other threads.
_main_state: _ThreadState | None = None
#: ``_main_state.device`` if >= 0 else 0, kept up to date by :func:`_select_device`.
_fallback_device = 0


def _select_device(st: _ThreadState, index: int) -> None:
    """Set a thread's selected device (-1 = none); tracks the main thread's as the
    fallback of threads that never selected one."""
    global _fallback_device
    st.device = index
    if st is _main_state:
        _fallback_device = index if index >= 0 else 0


#: ``_local.st`` is the calling thread's :class:`_ThreadState`.
_local: Final = _Local()

_lock = threading.RLock()
#: device index -> primary context (created by our single aclrtSetDevice).
_primaries: dict[int, _CtxRef] = {}
_device_count: int | None = None
#: Why device_count() is 0 (the ACL_ERROR_RT_NO_DEVICE message), else None.
_no_device_reason: str | None = None


def _run_finalizer(f: weakref.finalize[..., Any] | None) -> bool:
    """Run an object's finalizer now, exactly once; True if it ran.

    Uses ``detach()`` rather than ``f()``: at interpreter exit ``weakref.finalize``
    turns ``f()`` into a no-op once its own atexit hook ran, which may be before
    pyacl_rt's finalize, and the handle would then never be released.
    """
    if f is None:
        return False
    info = f.detach()
    if info is None:
        return False
    _obj, func, args, kwargs = info
    func(*args, **kwargs)
    return True


def _log_release_failure(func: str, handle: int, rc: int) -> None:
    """Log a failed destroy/free in a finalizer and consume the runtime's error text
    (it must not become the message of this thread's next error)."""
    _log.warning("%s(0x%x) failed with %d: %s", func, handle, rc, lowlevel.recent_error_message())


_T = TypeVar("_T")


class _LiveSet(Generic[_T]):
    """Weak registry of the live objects of one kind (Streams, Events, Contexts): what
    finalize and closing a Context make inert. Thread-safe; its lock is replaced in a
    forked child (a parent thread may have held it)."""

    __slots__ = ("_items", "_lock")

    def __init__(self) -> None:
        self._items: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()

    def add(self, obj: _T) -> None:
        with self._lock:
            self._items.add(obj)

    def discard(self, obj: _T) -> None:
        with self._lock:
            self._items.discard(obj)

    def snapshot(self, clear: bool = False) -> list[_T]:
        """The live objects now (and forget them all if ``clear``)."""
        with self._lock:
            items = list(self._items)
            if clear:
                self._items.clear()
        return items

    def make_inert(self, ctx_filter: _CtxRef | None, reason: _CtxRef) -> None:
        """``obj._make_inert(reason)`` for each live object (of context ``ctx_filter``
        only, unless None) and forget it. Never raises: failures are logged."""
        for obj in self.snapshot():
            if ctx_filter is not None and getattr(obj, "_ctx", None) is not ctx_filter:
                continue
            try:
                obj._make_inert(reason)  # type: ignore[attr-defined]
            except BaseException:  # pragma: no cover - defensive
                _log.exception("pyacl_rt: closing %r failed", obj)
            self.discard(obj)


def forget_thread_context() -> None:
    """Forget which context pyacl_rt believes is current on this thread.

    Call this after changing the thread's context through raw
    :mod:`pyacl_rt.lowlevel` calls (or torch_npu / a C extension did) and before using
    existing objects on this thread (``Stream.query``, ``Event.record``, copies...):
    the next pyacl_rt call re-installs the right context. Creating objects,
    allocating and selecting a device detect a foreign switch by themselves (see the
    module docstring). Not needed when only pyacl_rt objects are used.
    """
    _local.st.ctx = None


def _refuse_copy(obj: object, what: str) -> NoReturn:
    """``__reduce__`` / ``__copy__`` / ``__deepcopy__`` of an object owning a handle."""
    raise TypeError(
        f"{type(obj).__name__} objects cannot be pickled or copied: a copy would share "
        f"the raw {what} handle and keep using it after the original is closed. "
        f"Pass the {type(obj).__name__} object itself around (it is thread-safe)."
    )


def _refuse_in_callback(what: str) -> None:
    """Raise :class:`CallbackContextError` when called on a host-callback thread."""
    if _local.st.in_callback:
        raise CallbackContextError(
            f"{what} called from inside a host callback: this would wait for the "
            "callback itself and deadlock. Do blocking work outside the callback "
            "(e.g. hand it to another thread).",
            explanation="",
        )


# ----------------------------------------------------------- device index
DeviceLike = Union[int, SupportsIndex, str, "Device", None]


def _parse_index(dev: object, name: str = "device") -> int:
    """Turn int / Device / ``'npu:N'`` / ``'N'`` into an int (no range check); errors
    name the parameter ``name``."""
    if isinstance(dev, bool):
        raise TypeError(f"{name} must be an int, a Device or 'npu:N', not bool")
    if isinstance(dev, int):
        return dev
    if isinstance(dev, Device):
        return dev.index
    if isinstance(dev, str):
        text = dev.strip()
        if text.startswith("npu"):
            text = text[3:]
            if text == "":
                return current_device()
            if not text.startswith(":"):
                raise InvalidDeviceError(f"invalid device string {dev!r}: expected 'npu:N'")
            text = text[1:]
        try:
            return int(text)
        except ValueError:
            raise InvalidDeviceError(
                f"invalid device string {dev!r}: expected 'npu:N' or an integer"
            ) from None
    # numpy integers and other __index__ types
    return index_arg(dev, name, "an int, a Device or 'npu:N'")


def _check_index(index: int) -> int:
    count = device_count()
    if count == 0:
        raise InvalidDeviceError(
            f"invalid device index {index}: no device is visible ({_no_device_reason})",
            code=ACL_ERROR_RT_INVALID_DEVICEID,
        )
    if not 0 <= index < count:
        raise InvalidDeviceError(
            f"invalid device index {index}: {count} device(s) visible "
            f"(valid: 0..{count - 1}; ASCEND_RT_VISIBLE_DEVICES renumbers devices from 0)",
            code=ACL_ERROR_RT_INVALID_DEVICEID,
        )
    return index


def _index(dev: object = None, name: str = "device") -> int:
    """Validated device index; ``None`` means the thread's current device. Errors
    name the parameter ``name``."""
    if dev is None:
        return current_device()
    return _check_index(_parse_index(dev, name))


# ----------------------------------------------------------- contexts
def _create_primary(index: int) -> _CtxRef:
    """Primary context of ``index``: our one ``aclrtSetDevice`` call per process."""
    runtime.ensure_initialized()
    _check_index(index)
    with _lock:
        ref = _primaries.get(index)
        if ref is not None:
            return ref
        _check(_lib.aclrtSetDevice(index), "aclrtSetDevice")
        s = _local.st.scratch
        rc = _lib.aclrtGetCurrentContext(s.uptr)
        if rc:
            _lib.aclrtResetDevice(index)
            _check(rc, "aclrtGetCurrentContext")
        ref = _CtxRef(int(s.uptr[0]), index)
        _primaries[index] = ref
        _local.st.ctx = ref  # aclrtSetDevice made it current on this thread
        return ref


def _validated_ctx(st: _ThreadState) -> _CtxRef | None:
    """The thread's cached current context if the runtime agrees, else None (and the
    cache is cleared, so the next ``st.ctx is not ref`` test re-installs ``ref``).

    Something other than pyacl_rt (raw :mod:`lowlevel` calls, torch_npu, a C
    extension) may have switched this thread's ACL context behind the cache. One
    GIL-held ``aclrtGetCurrentContext`` (``lowlevel.fast``, ~30 ns) detects it. Called
    on the non-hot entry points only: object creation, allocation, device selection.
    """
    cur = st.ctx
    if cur is None:
        return None
    if cur.device >= 0:
        try:
            if _fast_get_current_context() == cur.handle:
                return cur
        except errors.AclError:
            pass  # no current context (or no runtime): the cache is wrong either way
    st.ctx = None
    return None


def _context_for(index: int) -> _CtxRef:
    """The context new objects on device ``index`` use on this thread.

    The explicit Context activated on this thread if it is on ``index``, else the
    device's primary context (created on first use). Also re-validates the thread's
    cached current context (:func:`_validated_ctx`), so that the caller's
    ``if _local.st.ctx is not ref: ref.make_current()`` is right even after a foreign
    context switch.
    """
    _validated_ctx(_local.st)
    active = _local.st.active
    if active is not None and active.device == index:
        return active
    ref = _primaries.get(index)
    if ref is None:
        ref = _create_primary(index)
    return ref


def _ensure_current(index: int) -> _CtxRef:
    """Make sure the calling thread's current context is on device ``index``.

    Cheap when it already is (a thread-local load, a compare and one GIL-held
    ``aclrtGetCurrentContext`` to re-validate the cache). Any live context of that
    device is accepted. Returns the current context. For use by
    :mod:`pyacl_rt.memory` and other floors above.
    """
    cur = _validated_ctx(_local.st)
    if cur is not None and cur.device == index:
        return cur
    ref = _context_for(index)
    ref.make_current()
    return ref


def _current_context() -> _CtxRef:
    """The context new objects use on this thread for its current device."""
    return _context_for(current_device())


# -------------------------------------------------------- public functions
def device_count() -> int:
    """Number of visible devices (``aclrtGetDeviceCount``, honours ASCEND_RT_VISIBLE_DEVICES).

    Cached after the first successful call. Initialises the runtime (``aclInit``)
    but creates no context. Returns 0 (like torch) when the runtime reports
    ``ACL_ERROR_RT_NO_DEVICE`` (207004: no device, or ``ASCEND_RT_VISIBLE_DEVICES``
    selects none or is malformed); ``pyacl-rt info`` prints the runtime's reason, and
    selecting a device then raises :class:`InvalidDeviceError` naming it. torch_npu
    counts through the driver without ACL; here the (lazy) ACL initialisation is cheap
    and creates no device state.
    """
    global _device_count
    count = _device_count
    if count is not None:
        return count
    global _no_device_reason
    runtime.ensure_initialized()
    s = _local.st.scratch
    try:
        _check(_lib.aclrtGetDeviceCount(s.u32), "aclrtGetDeviceCount")
        count = int(s.u32[0])
        reason = None
    except errors.AclError as exc:
        if exc.code != ACL_ERROR_RT_NO_DEVICE:
            raise
        # No device visible (no card, no driver access, or ASCEND_RT_VISIBLE_DEVICES
        # selects none / is malformed): 0 devices, like torch.
        count = 0
        detail = (exc.recent_message or exc.explanation or "no device is visible").strip()
        reason = f"{exc.name or 'ACL_ERROR_RT_NO_DEVICE'} ({exc.code}): {detail}"
    _device_count = count
    _no_device_reason = reason
    return count


def is_available() -> bool:
    """True if a runtime library loads and at least one device is visible. Never raises."""
    try:
        return device_count() > 0
    except Exception:
        return False


def current_device() -> int:
    """The calling thread's selected device index.

    Per thread, as in ACL. A thread that never selected a device gets the device
    currently selected on the main thread (0 if none) — torch_npu
    uses 0, which is how worker threads end up creating stray contexts on device 0.
    Never creates a context.
    """
    d: int = _local.st.device
    return d if d >= 0 else _fallback_device


def set_device(dev: DeviceLike) -> None:
    """Select device ``dev`` for the calling thread and make its context current.

    The first use of a device in the process calls ``aclrtSetDevice`` (creating its
    primary context); later calls, on any thread, only install that context.
    The main thread's selection is also the fallback of threads that never select
    a device. ``dev`` may be an int, a :class:`Device` or ``'npu:N'``;
    ``None`` is a no-op (as in torch_npu).
    """
    if dev is None:
        return
    index = _index(dev)
    active = _local.st.active
    if active is not None and active.device != index:
        _local.st.active = None
    ref = _context_for(index)
    if _local.st.ctx is not ref:
        ref.make_current()
    _select_device(_local.st, index)


def _restore_selection(prev_device: int, prev_active: _CtxRef | None) -> None:
    """Restore a saved (selection, explicit context) pair exactly."""
    _local.st.active = prev_active if prev_active is not None and prev_active.device >= 0 else None
    _select_device(_local.st, prev_device)
    if prev_device >= 0:
        try:
            ref = _context_for(prev_device)
            if _local.st.ctx is not ref:
                ref.make_current()
        except errors.AclError:
            # The runtime went away inside the block; the selection is restored and
            # the context will be re-established (or refused) on next use.
            _local.st.ctx = None


class device:
    """Context manager selecting a device for the block, restoring the previous
    selection exactly on exit (including "no device selected" on a fresh thread).

    ``device(None)`` and ``device(-1)`` are no-ops, as in torch_npu.
    """

    __slots__ = ("_prev", "idx")

    def __init__(self, dev: DeviceLike) -> None:
        self.idx = -1 if dev is None else _parse_index(dev)
        self._prev: list[tuple[int, _CtxRef | None]] = []

    def __enter__(self) -> int:
        if self.idx < 0:
            return current_device()
        self._prev.append((_local.st.device, _local.st.active))
        set_device(self.idx)
        return self.idx

    def __exit__(self, *exc: object) -> None:
        if self.idx < 0 or not self._prev:
            return
        prev_device, prev_active = self._prev.pop()
        _restore_selection(prev_device, prev_active)


def device_of(obj: object) -> device:
    """Context manager selecting the device of ``obj`` (anything with ``.device``).

    Objects without a device attribute give a no-op context, as in torch_npu
    (which returns a no-op for CPU tensors).
    """
    dev = getattr(obj, "device", None)
    if dev is None:
        return device(None)
    return device(dev)


def synchronize(device: DeviceLike = None, timeout: float | None = None) -> None:
    """Wait for all work on ``device`` (default: the current device). Releases the GIL.

    ``timeout`` in milliseconds (``aclrtSynchronizeDeviceWithTimeout``), as for
    :meth:`Stream.synchronize <pyacl_rt.stream.Stream.synchronize>`: on expiry
    :class:`~pyacl_rt.errors.SyncTimeoutError` (a ``TimeoutError``) is raised;
    ``None`` waits forever. Uses the device's context on this thread (creating the
    primary context only if the device was never used). Refused from inside a host
    callback. Errors raised by host callbacks are reported by ``Stream.synchronize``,
    not here.
    """
    _refuse_in_callback("synchronize()")
    if _sync_debug():
        _check_sync("synchronize()")
    ms = None if timeout is None else timeout_ms_arg(timeout)
    index = _index(device)
    _ensure_current(index)
    if ms is None:
        rc = _lib.aclrtSynchronizeDevice()
        if rc:
            _check(rc, "aclrtSynchronizeDevice")
    else:
        rc = _lib.aclrtSynchronizeDeviceWithTimeout(ms)
        if rc:
            _check(rc, "aclrtSynchronizeDeviceWithTimeout")  # SyncTimeoutError on expiry
    for hook in _sync_hooks:
        hook(index)


#: Called after a successful device synchronize with the device index (stream.py
#: uses it to release keep-alive lists).
_sync_hooks: list[Callable[[int], None]] = []


# ---------------------------------------------------------------- queries
def _soc_name() -> str:
    runtime.ensure_initialized()
    ptr = _lib.aclrtGetSocName()
    return _cstring(ptr)


def _cstring(ptr: Any) -> str:
    """Decode a ``const char *`` result (cdata or int address)."""
    ffi = lowlevel.ffi
    if isinstance(ptr, int):
        if ptr == 0:
            return ""
        ptr = ffi.cast("char *", ptr)
    elif ptr == ffi.NULL:
        return ""
    raw = ffi.string(ptr)
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def get_device_name(dev: DeviceLike = None) -> str:
    """SoC name of the device, e.g. ``'Ascend910B1'`` (``aclrtGetSocName``).

    As in torch_npu the index is validated but ACL only reports one SoC name per
    process (all cards of a server are the same SoC).
    """
    _index(dev)
    return _soc_name()


def get_soc_version() -> str:
    """The SoC name (``aclrtGetSocName``).

    Differs from torch_npu, which returns an internal integer enum with no ACL
    counterpart; the name is what ACL reports and what users compare against.
    """
    return _soc_name()


def get_cann_version(module: str = "CANN") -> str:
    """CANN version string as the loader found it (``_loader.backend_info()``).

    ``module`` is accepted for torch_npu compatibility; only ``"CANN"`` (the runtime
    package version) is known here; other modules return ``""``.
    """
    from . import _loader

    if not isinstance(module, str):
        raise TypeError(f"get_cann_version(): module must be a str, not {type(module).__name__}")
    if module.upper() not in ("CANN", "RUNTIME"):
        return ""
    info: Any = _loader.backend_info()
    version = getattr(info, "cann_version", None)
    if version is None and isinstance(info, dict):
        version = info.get("cann_version")
    return "" if version is None else str(version)


def _modern_soc(name: str) -> bool:
    """A2 (910B), A3 (910_93) and 950 SoCs support INF/NaN mode and bf16."""
    return name.startswith(("Ascend910B", "Ascend910_93", "Ascend950"))


def is_support_inf_nan() -> bool:
    """True on SoCs whose float overflow mode is INF/NaN (Atlas A2/A3, Ascend 950).

    Decided from the SoC name like torch_npu; creates no context.
    """
    return _modern_soc(_soc_name())


def is_bf16_supported() -> bool:
    """True on SoCs with bfloat16 support (Atlas A2/A3, Ascend 950), from the SoC name."""
    return _modern_soc(_soc_name())


def set_op_timeout_ms(timeout_ms: int) -> int:
    """Set the operator execution timeout in milliseconds; returns the value the
    runtime actually applied, in ms.

    Uses ``aclrtSetOpExecuteTimeOutV2`` (microseconds) and falls back to the
    second-granular ``aclrtSetOpExecuteTimeOut`` on older CANN. Unlike torch_npu it
    does not drain task queues first (pyacl_rt has none). 0 means the maximum.
    """
    timeout_ms = index_arg(timeout_ms, "timeout_ms", "an int (milliseconds)")
    if timeout_ms < 0:
        raise ValueError(f"timeout_ms must be >= 0, got {timeout_ms}")
    runtime.ensure_initialized()
    s = _local.st.scratch
    try:
        fn = _lib.aclrtSetOpExecuteTimeOutV2
        rc = fn(timeout_ms * 1000, s.u64)
        if rc == ACL_ERROR_RT_CONTEXT_NULL:
            _ensure_current(current_device())
            rc = fn(timeout_ms * 1000, s.u64)
        _check(rc, "aclrtSetOpExecuteTimeOutV2")
        return int(s.u64[0]) // 1000
    except errors.FunctionNotFoundError:
        seconds = -(-timeout_ms // 1000)
        rc = _lib.aclrtSetOpExecuteTimeOut(seconds)
        if rc == ACL_ERROR_RT_CONTEXT_NULL:
            _ensure_current(current_device())
            rc = _lib.aclrtSetOpExecuteTimeOut(seconds)
        _check(rc, "aclrtSetOpExecuteTimeOut")
        return seconds * 1000


@dataclass(frozen=True)
class DeviceProperties:
    """What :func:`get_device_properties` returns (torch_npu's field names).

    Memory sizes are in bytes. Fields the runtime cannot report are ``None``.
    """

    index: int
    name: str
    total_memory: int
    cube_core_num: int | None
    vector_core_num: int | None
    L2_cache_size: int | None
    multi_processor_count: int | None


class Device:
    """One visible device. ``Device(i)`` returns the same object for the same index.

    Properties query the runtime on each access (they are cheap and some change).
    ``with Device(i):`` selects the device for the block like :class:`device`.
    Device queries that take a device id (info, capability, utilisation, peer
    access) create no context; :meth:`mem_get_info` needs the device's context.

    A Device owns no runtime handle (it is an index), so ``copy.copy``,
    ``copy.deepcopy`` and ``pickle`` are allowed: they give back ``Device(i)`` itself
    (unpickled in another process it names that process's device ``i``). Streams,
    Events, Contexts and buffers, which own handles, refuse to be copied or pickled.
    """

    __slots__ = ("__weakref__", "_index")
    _instances: ClassVar[dict[int, Device]] = {}
    _index: int

    def __new__(cls, index: DeviceLike = None) -> Device:
        i = _index(index)
        inst = cls._instances.get(i)
        if inst is None:
            inst = object.__new__(cls)
            inst._index = i
            inst = cls._instances.setdefault(i, inst)
        return inst

    def __reduce__(self) -> tuple[Any, ...]:
        # Device(i) is the singleton: copies and unpickled objects are that object.
        return (Device, (self._index,))

    def __copy__(self) -> Device:
        return self

    def __deepcopy__(self, memo: object) -> Device:
        return self

    @property
    def index(self) -> int:
        """The device index (0-based, after ASCEND_RT_VISIBLE_DEVICES)."""
        return self._index

    def __index__(self) -> int:
        return self._index

    def __int__(self) -> int:
        return self._index

    def __repr__(self) -> str:
        return f"Device({self._index})"

    def __str__(self) -> str:
        return f"npu:{self._index}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Device):
            return other._index == self._index
        if isinstance(other, int) and not isinstance(other, bool):
            return other == self._index
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("npu", self._index))

    def __enter__(self) -> Device:
        _local.st.guards.append((_local.st.device, _local.st.active))
        set_device(self._index)
        return self

    def __exit__(self, *exc: object) -> None:
        if _local.st.guards:
            prev_device, prev_active = _local.st.guards.pop()
            _restore_selection(prev_device, prev_active)

    # --- selection / sync
    def set_current(self) -> None:
        """Select this device on the calling thread (:func:`set_device`)."""
        set_device(self._index)

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait for all work on this device (:func:`synchronize`); ``timeout`` in
        milliseconds raises :class:`~pyacl_rt.errors.SyncTimeoutError` on expiry."""
        if _sync_debug():
            _check_sync("Device.synchronize()")
        synchronize(self._index, timeout=timeout)

    # --- identity
    @property
    def name(self) -> str:
        """SoC name (``aclrtGetSocName``), e.g. ``'Ascend910B1'``."""
        return _soc_name()

    soc_name = name

    # --- raw attribute queries
    def info(self, attr: int) -> int:
        """``aclrtGetDeviceInfo(index, attr)``: an ``ACL_DEV_ATTR_*`` value (int64)."""
        attr = index_arg(attr, "attr")
        runtime.ensure_initialized()
        s = _local.st.scratch
        _check(_lib.aclrtGetDeviceInfo(self._index, attr, s.i64), "aclrtGetDeviceInfo")
        return int(s.i64[0])

    def capability(self, info: int) -> int:
        """``aclGetDeviceCapability(index, info)``: an ``ACL_DEVICE_INFO_*`` value."""
        info = index_arg(info, "info")
        runtime.ensure_initialized()
        s = _local.st.scratch
        _check(_lib.aclGetDeviceCapability(self._index, info, s.i64), "aclGetDeviceCapability")
        return int(s.i64[0])

    def feature(self, feature: int) -> int:
        """``aclrtGetDeviceCapability(index, feature)``: an ``ACL_FEATURE_*`` value."""
        feature = index_arg(feature, "feature")
        runtime.ensure_initialized()
        s = _local.st.scratch
        _check(
            _lib.aclrtGetDeviceCapability(self._index, feature, s.i32),
            "aclrtGetDeviceCapability",
        )
        return int(s.i32[0])

    def _info_or_none(self, attr: int, cap: int | None = None) -> int | None:
        try:
            return self.info(attr)
        except errors.FeatureNotSupportedError:
            pass
        except errors.AclUsageError:
            pass
        if cap is not None:
            try:
                return self.capability(cap)
            except (errors.FeatureNotSupportedError, errors.AclUsageError):
                pass
        return None

    @property
    def total_memory(self) -> int:
        """Total device memory in bytes (``ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE``).

        Falls back to ``aclrtGetMemInfo`` (which needs the device's context) when the
        runtime does not report the attribute.
        """
        value = self._info_or_none(ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE)
        if value is not None:
            return value
        return self.mem_get_info()[1]

    @property
    def free_memory(self) -> int:
        """Free device memory in bytes (``aclrtGetMemInfo(ACL_HBM_MEM)``)."""
        return self.mem_get_info()[0]

    def mem_get_info(self) -> tuple[int, int]:
        """``(free, total)`` device memory in bytes (``aclrtGetMemInfo(ACL_HBM_MEM)``).

        Uses this device's context on the calling thread (creates the primary
        context if the device was never used).
        """
        _ensure_current(self._index)
        s = _local.st.scratch
        _check(_lib.aclrtGetMemInfo(ACL_HBM_MEM, s.size, s.size + 1), "aclrtGetMemInfo")
        return int(s.size[0]), int(s.size[1])

    def utilization_rates(self) -> dict[str, int | None]:
        """``aclrtGetDeviceUtilizationRate``: percentages for ``cube``, ``vector``,
        ``aicpu`` and ``memory``; ``None`` where the device does not report one."""
        runtime.ensure_initialized()
        info = lowlevel.ffi.new("aclrtUtilizationInfo *")
        _check(
            _lib.aclrtGetDeviceUtilizationRate(self._index, info),
            "aclrtGetDeviceUtilizationRate",
        )
        out: dict[str, int | None] = {}
        for key, field in (
            ("cube", "cubeUtilization"),
            ("vector", "vectorUtilization"),
            ("aicpu", "aicpuUtilization"),
            ("memory", "memoryUtilization"),
        ):
            value = int(getattr(info, field))
            out[key] = None if value < 0 else value
        return out

    def utilization(self) -> int:
        """Device utilisation in percent: the mean of cube and vector utilisation, or
        whichever one the device reports (torch_npu's rule). Raises
        :class:`~pyacl_rt.errors.FeatureNotSupportedError` if neither is reported."""
        rates = self.utilization_rates()
        values = [v for v in (rates["cube"], rates["vector"]) if v is not None]
        if not values:
            raise errors.FeatureNotSupportedError(
                f"device {self._index} reports neither cube nor vector utilisation",
                function="aclrtGetDeviceUtilizationRate",
            )
        return sum(values) // len(values)

    @property
    def properties(self) -> DeviceProperties:
        """:class:`DeviceProperties` of this device (see :func:`get_device_properties`)."""
        cube = self._info_or_none(ACL_DEV_ATTR_CUBE_CORE_NUM, ACL_DEVICE_INFO_AI_CORE_NUM)
        vector = self._info_or_none(ACL_DEV_ATTR_VECTOR_CORE_NUM, ACL_DEVICE_INFO_VECTOR_CORE_NUM)
        l2 = self._info_or_none(ACL_DEV_ATTR_L2_CACHE_SIZE, ACL_DEVICE_INFO_L2_SIZE)
        return DeviceProperties(
            index=self._index,
            name=self.name,
            total_memory=self.total_memory,
            cube_core_num=cube,
            vector_core_num=vector,
            L2_cache_size=l2,
            multi_processor_count=vector if vector else cube,
        )

    def can_access_peer(self, peer: DeviceLike) -> bool:
        """Whether this device can access ``peer``'s memory (``aclrtDeviceCanAccessPeer``).

        ``False`` for ``peer == self`` (ACL rejects that pair; torch.cuda answers False).
        """
        other = _index(peer, "peer")
        if other == self._index:
            return False
        s = _local.st.scratch
        _check(_lib.aclrtDeviceCanAccessPeer(s.i32, self._index, other), "aclrtDeviceCanAccessPeer")
        return bool(s.i32[0])


# ------------------------------------------------ torch_npu-style functions
def get_device_properties(dev: DeviceLike = None) -> DeviceProperties:
    """Properties of ``dev``: name, total memory (bytes), core counts, L2 size (bytes).

    torch_npu fills a few CUDA-compat fields with ``None`` (major/minor, warp size);
    those are left out here. Creates no context when the runtime reports the total
    memory attribute.
    """
    return Device(dev).properties


def get_device_capability(dev: DeviceLike = None) -> None:
    """Always ``None``: Ascend devices have no CUDA-style compute capability.

    torch_npu returns ``None`` too (or an env-var override); use
    :meth:`Device.capability` / :meth:`Device.info` for real attributes.
    """
    _index(dev)
    return None


def mem_get_info(dev: DeviceLike = None) -> tuple[int, int]:
    """``(free, total)`` memory of ``dev`` in bytes (``aclrtGetMemInfo(ACL_HBM_MEM)``)."""
    return Device(dev).mem_get_info()


def utilization(dev: DeviceLike = None) -> int:
    """Utilisation of ``dev`` in percent (see :meth:`Device.utilization`)."""
    return Device(dev).utilization()


def can_device_access_peer(dev: DeviceLike, peer: DeviceLike) -> bool:
    """Whether ``dev`` can access ``peer``'s memory (see :meth:`Device.can_access_peer`)."""
    return Device(dev).can_access_peer(peer)


# ---------------------------------------------------------- lifecycle hooks
def _release_devices() -> None:
    """Release hook (priority 'devices'): reset each device we set, once. Never raises."""
    global _device_count, _no_device_reason
    with _lock:
        refs = list(_primaries.values())
        _primaries.clear()
        for ref in refs:
            index = ref.device
            ref.kill("finalized")
            if index < 0:
                continue
            try:
                rc = _lib.aclrtResetDevice(index)
                if rc:
                    _log.warning(
                        "aclrtResetDevice(%d) failed with %d at finalize: %s",
                        index,
                        rc,
                        lowlevel.recent_error_message(),
                    )
            except Exception as exc:  # pragma: no cover - defensive
                _log.warning("aclrtResetDevice(%d) raised %r at finalize", index, exc)
        _device_count = None
        _no_device_reason = None
        Device._instances.clear()
    _local.st.ctx = None
    _local.st.active = None


def _after_fork_in_child() -> None:
    """In a forked child every context is unusable: mark them dead (never touch ACL)."""
    global _lock
    _lock = threading.RLock()
    for ref in list(_primaries.values()):
        ref.kill("forked")
    _primaries.clear()
    _local.st.ctx = None
    _local.st.active = None


os.register_at_fork(after_in_child=_after_fork_in_child)
runtime.register_release_hook(_release_devices, runtime.PRIORITY_DEVICES)
