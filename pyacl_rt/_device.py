"""Devices, the per-thread current device, and each device's primary context.

Model (ACL semantics, acl_abi.md section 5.2/5.3)
--------------------------------------------------
* The ACL *current context* is per thread. ``aclrtSetDevice(d)`` creates device
  ``d``'s default ("primary") context and makes it current for the calling thread.
* pyacl_rt calls ``aclrtSetDevice(d)`` **once per process** per device, the first
  time anything needs device ``d``, remembers that primary context and installs it
  on other threads with ``aclrtSetCurrentContext`` (what torch_npu does for its
  helper threads). So no context is ever created on a device nobody asked for,
  and the device reference count is 1, released by one ``aclrtResetDevice`` at
  :func:`pyacl_rt.finalize`.
* Every Stream / Event / buffer remembers its context (a :class:`CtxRef`) and,
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

The per-thread state (cached current context, selection) and the context refs live in
:mod:`pyacl_rt._state`; this module owns the primary contexts, device selection and
:class:`Device`; the query functions are in :mod:`pyacl_rt._devinfo`. Layer 4: imports
:mod:`errors`, :mod:`lowlevel`, :mod:`_runtime`, :mod:`_state`.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar, Final, SupportsIndex, Union

from . import _runtime, _state, errors, lowlevel
from ._args import index_arg, timeout_ms_arg
from ._hooks import fork_hooks
from ._log import get_logger
from ._raw._abi_runtime import CONSTANTS as _C
from ._state import (
    CtxRef,
    check,
    current,
    device_sync_hooks,
    lib,
    local,
    refuse_in_callback,
    select_device,
    sliced_wait_device,
    validated_ctx,
)
from ._syncdebug import check_sync, sync_debug_active
from .errors import InvalidDeviceError

__all__ = [
    "Device",
    "DeviceProperties",
    "current_device",
    "device",
    "device_count",
    "device_of",
    "is_available",
    "set_device",
    "synchronize",
]

_log = get_logger("pyacl_rt")

# ------------------------------------------------ constants (generated table)
ACL_HBM_MEM: Final = _C["ACL_HBM_MEM"]
ACL_DEV_ATTR_CUBE_CORE_NUM: Final = _C["ACL_DEV_ATTR_CUBE_CORE_NUM"]
ACL_DEV_ATTR_VECTOR_CORE_NUM: Final = _C["ACL_DEV_ATTR_VECTOR_CORE_NUM"]
ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE: Final = _C["ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE"]
ACL_DEV_ATTR_L2_CACHE_SIZE: Final = _C["ACL_DEV_ATTR_L2_CACHE_SIZE"]
ACL_DEVICE_INFO_AI_CORE_NUM: Final = _C["ACL_DEVICE_INFO_AI_CORE_NUM"]
ACL_DEVICE_INFO_VECTOR_CORE_NUM: Final = _C["ACL_DEVICE_INFO_VECTOR_CORE_NUM"]
ACL_DEVICE_INFO_L2_SIZE: Final = _C["ACL_DEVICE_INFO_L2_SIZE"]
ACL_ERROR_RT_CONTEXT_NULL: Final = _C["ACL_ERROR_RT_CONTEXT_NULL"]
ACL_ERROR_RT_INVALID_DEVICEID: Final = _C["ACL_ERROR_RT_INVALID_DEVICEID"]
ACL_ERROR_RT_NO_DEVICE: Final = _C["ACL_ERROR_RT_NO_DEVICE"]

_lock = threading.RLock()
#: device index -> primary context (created by our single aclrtSetDevice).
primaries: dict[int, CtxRef] = {}
_device_count: int | None = None
#: Why device_count() is 0 (the ACL_ERROR_RT_NO_DEVICE message), else None.
_no_device_reason: str | None = None


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


def device_index_arg(dev: object = None, name: str = "device") -> int:
    """Validated device index; ``None`` means the thread's current device. Errors
    name the parameter ``name``."""
    if dev is None:
        return current_device()
    return _check_index(_parse_index(dev, name))


# ----------------------------------------------------------- contexts
def _create_primary(index: int) -> CtxRef:
    """Primary context of ``index``: our one ``aclrtSetDevice`` call per process."""
    _runtime.ensure_initialized()
    _check_index(index)
    with _lock:
        ref = primaries.get(index)
        if ref is not None:
            return ref
        check(lib.aclrtSetDevice(index), "aclrtSetDevice")
        s = local.st.scratch
        rc = lib.aclrtGetCurrentContext(s.uptr)
        if rc:
            lib.aclrtResetDevice(index)
            check(rc, "aclrtGetCurrentContext")
        ref = CtxRef(int(s.uptr[0]), index)
        primaries[index] = ref
        local.st.ctx = ref  # aclrtSetDevice made it current on this thread
        return ref


def context_for(index: int) -> CtxRef:
    """The context new objects on device ``index`` use on this thread.

    The explicit Context activated on this thread if it is on ``index``, else the
    device's primary context (created on first use). Also re-validates the thread's
    cached current context (:func:`validated_ctx`), so that the caller's
    ``if local.st.ctx is not ref: ref.make_current()`` is right even after a foreign
    context switch.
    """
    validated_ctx(local.st)
    active = local.st.active
    if active is not None and active.device == index:
        return active
    ref = primaries.get(index)
    if ref is None:
        ref = _create_primary(index)
    return ref


def ensure_device_current(index: int) -> CtxRef:
    """Make sure the calling thread's current context is on device ``index``.

    Cheap when it already is (a thread-local load, a compare and one GIL-held
    ``aclrtGetCurrentContext`` to re-validate the cache). Any live context of that
    device is accepted. Returns the current context. For use by
    :mod:`pyacl_rt._memory` and other layers above.
    """
    cur = validated_ctx(local.st)
    if cur is not None and cur.device == index:
        return cur
    ref = context_for(index)
    ref.make_current()
    return ref


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
    _runtime.ensure_initialized()
    s = local.st.scratch
    try:
        check(lib.aclrtGetDeviceCount(s.u32), "aclrtGetDeviceCount")
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


def no_device_reason() -> str | None:
    """Why :func:`device_count` is 0 (the runtime's code and message), else ``None``."""
    return _no_device_reason


def is_available() -> bool:
    """True if a runtime library loads and at least one device is visible.

    Never raises for a missing library or a runtime that does not start (False), as
    in torch, except for a configuration error: an invalid ``PYACL_RT_*`` value raises
    :class:`~pyacl_rt.errors.ConfigError` (the same error ``device_count()`` raises),
    instead of hiding the typo behind False.
    """
    try:
        return device_count() > 0
    except errors.ConfigError:
        raise
    except Exception:
        return False


def current_device() -> int:
    """The calling thread's selected device index.

    Per thread, as in ACL. A thread that never selected a device gets the device
    currently selected on the main thread (0 if none) — torch_npu
    uses 0, which is how worker threads end up creating stray contexts on device 0.
    Never creates a context.
    """
    d: int = local.st.device
    return d if d >= 0 else _state._fallback_device


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
    index = device_index_arg(dev)
    active = local.st.active
    if active is not None and active.device != index:
        local.st.active = None
    ref = context_for(index)
    ref.ensure_current()
    select_device(local.st, index)


def restore_selection(prev_device: int, prev_active: CtxRef | None) -> None:
    """Restore a saved (selection, explicit context) pair exactly."""
    local.st.active = prev_active if prev_active is not None and prev_active.device >= 0 else None
    select_device(local.st, prev_device)
    if prev_device >= 0:
        try:
            ref = context_for(prev_device)
            ref.ensure_current()
        except errors.AclError:
            # The runtime went away inside the block; the selection is restored and
            # the context will be re-established (or refused) on next use.
            local.st.ctx = None


class device:
    """Context manager selecting a device for the block, restoring the previous
    selection exactly on exit (including "no device selected" on a fresh thread).

    ``device(None)`` and ``device(-1)`` are no-ops, as in torch_npu.
    """

    __slots__ = ("_prev", "idx")

    def __init__(self, dev: DeviceLike) -> None:
        self.idx = -1 if dev is None else _parse_index(dev)
        self._prev: list[tuple[int, CtxRef | None]] = []

    def __enter__(self) -> int:
        if self.idx < 0:
            return current_device()
        self._prev.append((local.st.device, local.st.active))
        set_device(self.idx)
        return self.idx

    def __exit__(self, *exc: object) -> None:
        if self.idx < 0 or not self._prev:
            return
        prev_device, prev_active = self._prev.pop()
        restore_selection(prev_device, prev_active)


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
    :meth:`Stream.synchronize <pyacl_rt.Stream.synchronize>`: on expiry
    :class:`~pyacl_rt.errors.SyncTimeoutError` (a ``TimeoutError``) is raised;
    ``None`` waits forever. Uses the device's context on this thread (creating the
    primary context only if the device was never used). Refused from inside a host
    callback. Errors raised by host callbacks are reported by ``Stream.synchronize``,
    not here.
    """
    refuse_in_callback("synchronize()")
    if sync_debug_active():
        check_sync("synchronize()")
    ms = -1 if timeout is None else timeout_ms_arg(timeout)
    index = device_index_arg(device)
    ensure_device_current(index)
    # In slices (aclrtSynchronizeDeviceWithTimeout): Ctrl-C interrupts the wait, the
    # work stays queued; SyncTimeoutError when a timeout expires.
    sliced_wait_device(ms)
    for hook in device_sync_hooks:
        hook(index)


#: Sliced, interruptible device synchronize of the current context (gated per slice).


# ---------------------------------------------------------------- queries
def query_soc_name() -> str:
    """The SoC name ACL reports (``aclrtGetSocName``), e.g. ``'Ascend910B1'``."""
    _runtime.ensure_initialized()
    ptr = lib.aclrtGetSocName()
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


class DeviceProperties:
    """What :func:`get_device_properties` returns (torch_npu's field names).

    Memory sizes are in bytes. Fields the runtime cannot report are ``None``.
    Immutable; compares and hashes by value. (A plain slotted class rather than a
    dataclass: ``import pyacl_rt`` does not import :mod:`dataclasses`.)
    """

    __slots__ = (
        "L2_cache_size",
        "cube_core_num",
        "index",
        "multi_processor_count",
        "name",
        "total_memory",
        "vector_core_num",
    )
    _FIELDS: ClassVar[tuple[str, ...]] = (
        "index",
        "name",
        "total_memory",
        "cube_core_num",
        "vector_core_num",
        "L2_cache_size",
        "multi_processor_count",
    )

    index: int
    name: str
    total_memory: int
    cube_core_num: int | None
    vector_core_num: int | None
    L2_cache_size: int | None
    multi_processor_count: int | None

    def __init__(
        self,
        index: int,
        name: str,
        total_memory: int,
        cube_core_num: int | None,
        vector_core_num: int | None,
        L2_cache_size: int | None,
        multi_processor_count: int | None,
    ) -> None:
        values = (
            index,
            name,
            total_memory,
            cube_core_num,
            vector_core_num,
            L2_cache_size,
            multi_processor_count,
        )
        for field, value in zip(self._FIELDS, values, strict=True):
            object.__setattr__(self, field, value)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, f) for f in self._FIELDS)

    def __reduce__(self) -> tuple[type[DeviceProperties], tuple[object, ...]]:
        # A plain value: pickles (and copies) through the constructor (the default
        # protocol would set the slots one by one, which __setattr__ refuses).
        return (DeviceProperties, self._values())

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"DeviceProperties is immutable: cannot assign to {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"DeviceProperties is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not DeviceProperties:
            return NotImplemented
        assert isinstance(other, DeviceProperties)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS)
        return f"DeviceProperties({inner})"


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
        i = device_index_arg(index)
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
        local.st.guards.append((local.st.device, local.st.active))
        set_device(self._index)
        return self

    def __exit__(self, *exc: object) -> None:
        if local.st.guards:
            prev_device, prev_active = local.st.guards.pop()
            restore_selection(prev_device, prev_active)

    # --- selection / sync
    def set_current(self) -> None:
        """Select this device on the calling thread (:func:`set_device`)."""
        set_device(self._index)

    def synchronize(self, timeout: float | None = None) -> None:
        """Wait for all work on this device (:func:`synchronize`); ``timeout`` in
        milliseconds raises :class:`~pyacl_rt.errors.SyncTimeoutError` on expiry."""
        if sync_debug_active():
            check_sync("Device.synchronize()")
        synchronize(self._index, timeout=timeout)

    # --- identity
    @property
    def name(self) -> str:
        """SoC name (``aclrtGetSocName``), e.g. ``'Ascend910B1'``."""
        return query_soc_name()

    soc_name = name

    @property
    def physical_id(self) -> int:
        """The physical card behind this index (``aclrtGetPhyDevIdByUserDevId``).

        With ``ASCEND_RT_VISIBLE_DEVICES=3,5`` (as Ray or a launcher sets it per worker)
        ``Device(0).physical_id`` is 3 and ``Device(1).physical_id`` 5; without it the
        two are equal."""
        _runtime.ensure_initialized()
        s = local.st.scratch
        check(lib.aclrtGetPhyDevIdByUserDevId(self._index, s.i32), "aclrtGetPhyDevIdByUserDevId")
        return int(s.i32[0])

    # --- raw attribute queries
    def info(self, attr: int) -> int:
        """``aclrtGetDeviceInfo(index, attr)``: an ``ACL_DEV_ATTR_*`` value (int64)."""
        attr = index_arg(attr, "attr")
        _runtime.ensure_initialized()
        s = local.st.scratch
        check(lib.aclrtGetDeviceInfo(self._index, attr, s.i64), "aclrtGetDeviceInfo")
        return int(s.i64[0])

    def capability(self, info: int) -> int:
        """``aclGetDeviceCapability(index, info)``: an ``ACL_DEVICE_INFO_*`` value."""
        info = index_arg(info, "info")
        _runtime.ensure_initialized()
        s = local.st.scratch
        check(lib.aclGetDeviceCapability(self._index, info, s.i64), "aclGetDeviceCapability")
        return int(s.i64[0])

    def feature(self, feature: int) -> int:
        """``aclrtGetDeviceCapability(index, feature)``: an ``ACL_FEATURE_*`` value."""
        feature = index_arg(feature, "feature")
        _runtime.ensure_initialized()
        s = local.st.scratch
        check(
            lib.aclrtGetDeviceCapability(self._index, feature, s.i32),
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
        ensure_device_current(self._index)
        s = local.st.scratch
        check(lib.aclrtGetMemInfo(ACL_HBM_MEM, s.size, s.size + 1), "aclrtGetMemInfo")
        return int(s.size[0]), int(s.size[1])

    def utilization_rates(self) -> dict[str, int | None]:
        """``aclrtGetDeviceUtilizationRate``: percentages for ``cube``, ``vector``,
        ``aicpu`` and ``memory``; ``None`` where the device does not report one."""
        _runtime.ensure_initialized()
        info = lowlevel.ffi.new("aclrtUtilizationInfo *")
        check(
            lib.aclrtGetDeviceUtilizationRate(self._index, info),
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
        other = device_index_arg(peer, "peer")
        if other == self._index:
            return False
        s = local.st.scratch
        check(lib.aclrtDeviceCanAccessPeer(s.i32, self._index, other), "aclrtDeviceCanAccessPeer")
        return bool(s.i32[0])


# ---------------------------------------------------------- lifecycle hooks
def _release_devices() -> None:
    """Release hook (priority 'devices'): reset each device we set, once. Never raises."""
    global _device_count, _no_device_reason
    with _lock:
        refs = list(primaries.values())
        primaries.clear()
        for ref in refs:
            index = ref.device
            ref.kill("finalized")
            if index < 0:
                continue
            try:
                rc = lib.aclrtResetDevice(index)
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
    local.st.ctx = None
    local.st.active = None


def _wait_for_devices() -> None:
    """finalize_prepare hook: wait for the work queued on every device pyacl_rt set (its
    primary context), in slices, so that Ctrl-C can interrupt a finalize waiting for
    the device (nothing is released yet). Failures are left to the release hooks."""
    with current(None):
        for ref in list(primaries.values()):
            if ref.device < 0:
                continue
            try:
                ref.ensure_current()
                sliced_wait_device(-1)
            except errors.AclError:
                _log.debug("pyacl_rt: waiting for device %d before finalize failed", ref.device)


def _after_fork_in_child() -> None:
    """In a forked child every context is unusable: mark them dead (never touch ACL)."""
    global _lock
    _lock = threading.RLock()
    for ref in list(primaries.values()):
        ref.kill("forked")
    primaries.clear()
    local.st.ctx = None
    local.st.active = None


fork_hooks.add(_after_fork_in_child, _runtime.PRIORITY_DEVICES)
_runtime.register_release_hook(_release_devices, _runtime.PRIORITY_DEVICES)
_runtime.finalize_prepare.add(_wait_for_devices, _runtime.PRIORITY_DEVICES)
