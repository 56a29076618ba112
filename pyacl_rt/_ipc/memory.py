"""Device memory across processes: :class:`IpcMemHandle`, ``DeviceBuffer.ipc_handle``
and ``DeviceBuffer.from_ipc_handle``.

**Export (what is shared).** ACL exports a range that starts on a page of its
allocation (``aclrtIpcMemGetExportKey``); a caching-allocator block is a slice of a
segment and usually does not. So, as torch does for CUDA IPC, the exporter exports the
whole allocation the buffer lies in (``aclrtMemGetAddressRange``: the segment, or the
buffer's own ``aclrtMalloc``) and the handle carries the buffer's offset and size in
it. One key per allocation and pid mode is reused for every buffer in it: mode "any"
(``..._DISABLE_PID_VALIDATION``: any process of this user) or a whitelist
(``aclrtIpcMemSetImportPid``; the pids of every ``ipc_handle(pids=...)`` on that
allocation add up).

**Lifetimes (the rule).** The exporter keeps the exported buffer (and so its whole
allocation) while an importer may use it: while a handle object of it lives in this
process, and while a handle that left the process was not released by its receiver
(:mod:`.refs`: the receiver releases when the handle and every buffer it opened are
closed or collected, or when it exits). Meanwhile ``close()`` of the buffer raises
``BufferError`` (ACL: importers close before the exporter closes and frees);
dropping the reference is fine. The exporter notices released handles when it polls
(:func:`collect`, i.e. ``pyacl_rt.ipc_collect()``, and at each export and ``close()``);
then it closes the key (``aclrtIpcMemClose``) once no buffer of that allocation is
shared any more, and lets the buffer go. At finalize the keys are closed whatever the
importers do (a warning names them): keep the exporting process alive while importers
use its memory, as with CUDA IPC.

**Import.** One ``aclrtIpcMemImportByKey`` per key and process (later opens of the
same allocation reuse the mapping, counted); the imported buffer's ``close()`` waits
for the streams that used it, then closes the import when it was the last one.

Floor 7 (part of :mod:`pyacl_rt._ipc`): imports floors 1-6 and :mod:`.refs`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import weakref
from collections.abc import Iterable
from typing import Any, Final

from .. import _runtime, errors
from .._device import context_for, current_device, ensure_device_current
from .._log import get_logger
from .._memory import DeviceBuffer
from .._memory.records import Mem
from .._raw._abi_runtime import CONSTANTS as _C
from .._state import lib, local, validated_ctx
from ..lowlevel import ffi, recent_error_message
from . import refs

__all__ = ["IpcMemHandle", "collect", "handle", "ipc_pid", "open_handle"]

_log = get_logger("pyacl_rt")

KEY_LEN: Final = 65  # aclrtIpcMemGetExportKey wants exactly 65 bytes
_FLAG_ANY: Final = _C["ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION"]
_FLAG_LIST: Final = _C["ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT"]
_NO_PERMISSION: Final = _C["ACL_ERROR_RT_NO_PERMISSION"]
_LOCATION_DEVICE: Final = _C["ACL_MEM_LOCATION_TYPE_DEVICE"]

_lock = threading.RLock()
_ids = itertools.count(1)


def _ipc_error(exc: errors.AclError, what: str) -> errors.IpcError:
    """The typed IPC error for a failed runtime call (the code and message kept)."""
    cls = errors.IpcPermissionError if exc.code == _NO_PERMISSION else errors.IpcError
    hint = (
        "this process's pid is not on the exporter's whitelist: the exporter must pass "
        "pyacl_rt.ipc_pid() of this process in ipc_handle(pids=...)"
        if cls is errors.IpcPermissionError
        else "the exporter closed this memory, freed it, finalized or exited"
    )
    return cls(
        f"{what} failed: {exc.name or 'error'} ({exc.code}): {hint}",
        code=exc.code,
        function=exc.function,
        recent_message=exc.recent_message,
        explanation="",
    )


def check_ipc(rc: int, func: str) -> None:
    """Raise the IPC flavour of the typed error of a failed ``func`` (``rc`` != 0)."""
    if rc:
        try:
            _check(rc, func)
        except errors.AclError as exc:
            raise _ipc_error(exc, func) from None


def _check(rc: int, func: str) -> None:
    from ..lowlevel import check

    check(rc, func)


def ipc_pid() -> int:
    """This process's pid as the runtime knows it (``aclrtDeviceGetBareTgid``: the
    host pid, also inside a container), the value an exporter whitelists."""
    _runtime.ensure_initialized()
    s = local.st.scratch
    rc = lib.aclrtDeviceGetBareTgid(s.i32)
    if rc:
        return os.getpid()  # older CANN without it: the plain pid
    return int(s.i32[0])


# ================================================================= exporter
class _Segment:
    """One exported allocation (and pid mode): its key and the shares using it."""

    __slots__ = ("base", "ctx", "key", "pids", "shares", "size")

    def __init__(self, base: int, size: int, key: bytes, ctx: Any) -> None:
        self.base = base
        self.size = size
        self.key = key
        self.ctx = ctx
        self.pids: set[int] = set()
        self.shares = 0


class _Token:
    """The IPC export noted on the buffer's record (``m.exports``: close() refuses
    while it is there). ``internal``: pyacl_rt's finalize handles it (no refusal)."""

    __slots__ = ("__weakref__", "share")
    internal = True

    def __init__(self, share: _Share) -> None:
        self.share = share


class _Share:
    """One buffer record shared through one segment key."""

    __slots__ = ("buf", "id", "local", "m", "segment", "token")

    def __init__(self, buf: DeviceBuffer, m: Mem, segment: _Segment) -> None:
        self.id = next(_ids) & 0xFFFFFFFF
        self.buf: DeviceBuffer | None = buf  # kept alive while shared
        self.m = m
        self.segment = segment
        self.local = 0  # live IpcMemHandle objects of it in this process
        self.token = _Token(self)


_segments: dict[tuple[int, bool], _Segment] = {}  # (allocation base, whitelist?) -> segment
_shares: dict[tuple[int, bool], _Share] = {}  # (id(record), whitelist?) -> share
_by_id: dict[int, _Share] = {}


def _address_range(ptr: int) -> tuple[int, int]:
    s = local.st.scratch
    size = ffi.new("size_t *")
    rc = lib.aclrtMemGetAddressRange(ptr, s.uptr, size)
    if rc:
        check_ipc(rc, "aclrtMemGetAddressRange")
    return int(s.uptr[0]), int(size[0])


def _segment(base: int, size: int, pids: frozenset[int] | None, ctx: Any) -> _Segment:
    whitelist = pids is not None
    seg = _segments.get((base, whitelist))
    if seg is None:
        key = ffi.new("char[65]")
        flag = _FLAG_LIST if whitelist else _FLAG_ANY
        rc = lib.aclrtIpcMemGetExportKey(base, size, key, KEY_LEN, flag)
        check_ipc(rc, "aclrtIpcMemGetExportKey")
        seg = _segments[(base, whitelist)] = _Segment(base, size, ffi.string(key), ctx)
    if pids:
        new = sorted(pids - seg.pids)
        if new:
            arr = ffi.new("int32_t[]", new)
            check_ipc(
                lib.aclrtIpcMemSetImportPid(seg.key, arr, len(new)), "aclrtIpcMemSetImportPid"
            )
            seg.pids.update(new)
    return seg


def _pid_set(pids: object) -> frozenset[int] | None:
    if pids is None:
        return None
    if isinstance(pids, (str, bytes)) or not isinstance(pids, Iterable):
        raise TypeError(f"pids must be None or an iterable of ints, not {type(pids).__name__}")
    out: set[int] = set()
    for p in pids:
        if isinstance(p, bool) or not hasattr(p, "__index__"):
            raise TypeError(f"pids must hold ints, not {type(p).__name__}")
        v = p.__index__()
        if not 0 < v < 2**31:
            raise ValueError(f"pid {v} is not a valid process id")
        out.add(v)
    if not out:
        raise ValueError("pids is empty: pass None to let any process of this user import")
    return frozenset(out)


def handle(buf: DeviceBuffer, pids: object = None) -> IpcMemHandle:
    """``DeviceBuffer.ipc_handle(pids)`` (see the module docstring)."""
    if not isinstance(buf, DeviceBuffer):
        raise TypeError(f"ipc_handle() needs a DeviceBuffer, not {type(buf).__name__}")
    pid_set = _pid_set(pids)
    ptr = buf.ptr  # raises when closed
    n = buf.nbytes
    if not n:
        raise ValueError("an empty DeviceBuffer (0 bytes) has no memory to share")
    m = buf.mem
    if isinstance(m.release, _Release) and m.release.origin is not None:
        return _forward(buf, m.release, pid_set)
    if m.release is not None:
        raise errors.IpcError(
            "this DeviceBuffer was imported through DLPack: only the process that "
            "allocated memory can export it",
            explanation="",
        )
    collect()
    ctx = m.ctx
    if ctx is not None and local.st.ctx is not ctx:
        ctx.make_current()
    with _lock:
        base, size = _address_range(ptr)
        seg = _segment(base, size, pid_set, ctx)
        skey = (id(m), pid_set is not None)
        share = _shares.get(skey)
        if share is None or share.m is not m:
            share = _Share(buf, m, seg)
            if not m.add_export(share.token):  # closed by another thread meanwhile
                if seg.shares <= 0:
                    del _segments[(base, pid_set is not None)]
                    _close_key(seg)
                raise errors.ObjectClosedError("this DeviceBuffer is closed", explanation="")
            seg.shares += 1
            _shares[skey] = share
            _by_id[share.id] = share
        share.local += 1
    h = IpcMemHandle(
        seg.key.decode(),
        ptr - base,
        n,
        size,
        os.getpid(),
        share.id,
        refs.mine().path,
        _physical(buf.device_index),
    )
    weakref.finalize(h, _drop_local, share)
    return h


def _forward(buf: DeviceBuffer, rel: _Release, pids: frozenset[int] | None) -> IpcMemHandle:
    """A handle of an imported buffer (or a view of it), to share it further: the same
    export of the original process (its whitelist cannot be changed from here)."""
    if pids is not None:
        raise errors.IpcError(
            "this DeviceBuffer was imported from another process: it can be shared further "
            "only as it was exported (pids=None); the exporter decides who may import",
            explanation="",
        )
    o = rel.origin
    assert o is not None
    h = IpcMemHandle(
        o.key,
        o.offset + (buf.ptr - buf.mem.ptr),
        buf.nbytes,
        o.size,
        o.pid,
        o.export,
        o.path,
        o.device,
    )
    h._hold = buf  # the buffer (and so this process's claim) lives while the handle does
    return h


def _physical(index: int) -> int:
    s = local.st.scratch
    rc = lib.aclrtGetPhyDevIdByUserDevId(index, s.i32)
    return int(s.i32[0]) if rc == 0 else index


def _drop_local(share: _Share) -> None:
    with _lock:
        share.local -= 1


def _finish(share: _Share) -> None:
    """The last user of ``share`` is gone: close the key if no other share of its
    allocation remains, then let the buffer go (under ``_lock``)."""
    _by_id.pop(share.id, None)
    for k, v in list(_shares.items()):
        if v is share:
            del _shares[k]
    seg = share.segment
    seg.shares -= 1
    if seg.shares <= 0:
        for sk, sv in list(_segments.items()):
            if sv is seg:
                del _segments[sk]
        _close_key(seg)
    with contextlib.suppress(ValueError):
        share.m.exports.remove(share.token)
    share.buf = None


def _close_key(seg: _Segment) -> None:
    try:
        ctx = seg.ctx
        if ctx is not None and ctx.device >= 0 and local.st.ctx is not ctx:
            ctx.make_current()
        rc = lib.aclrtIpcMemClose(seg.key)
        if rc:
            _log.warning(
                "pyacl_rt: aclrtIpcMemClose(%s) failed with %d: %s",
                seg.key.decode(),
                rc,
                recent_error_message(),
            )
    except Exception:  # pragma: no cover - defensive
        _log.debug("pyacl_rt: closing an IPC key failed", exc_info=True)


def collect() -> int:
    """Release the exports no importer uses any more (``pyacl_rt.ipc_collect()``);
    returns how many buffers were let go."""
    if not _by_id:
        return 0
    live = refs.mine().live()
    done = 0
    with _lock:
        for share in list(_by_id.values()):
            if share.local <= 0 and not live.get(share.id):
                _finish(share)
                done += 1
    return done


def before_close(m: Mem) -> None:
    """``DeviceBuffer.close()`` of a record with exports: poll, then refuse while an
    importer may still use it (the DLPack exports are refused by close() itself)."""
    if not any(isinstance(t, _Token) for t in m.exports):
        return
    collect()
    users = [t.share for t in m.exports if isinstance(t, _Token)]
    if users:
        live = refs.mine().live()
        here = sum(s.local for s in users)
        sent = sum(live.get(s.id, 0) for s in users)
        raise BufferError(
            f"cannot close DeviceBuffer: it is shared with other processes (IPC): {here} "
            f"IpcMemHandle object(s) of it live in this process and {sent} handle(s) sent "
            "to other processes are not released yet (not opened, or their buffers not "
            "closed there); ACL wants importers to close first. Drop this reference "
            "instead (the memory is freed once they are done), or close the imports, "
            "drop the handles and call pyacl_rt.ipc_collect()"
        )


def release_all() -> None:
    """Finalize / exit: close every export key (importers still using one are named in
    a warning) and forget the arena."""
    if not _by_id:
        refs.close_mine()
        return
    try:
        live = refs.mine().live()
    except Exception:  # pragma: no cover - defensive
        live = {}
    with _lock:
        busy = [s for s in _by_id.values() if live.get(s.id)]
        for share in list(_by_id.values()):
            _finish(share)
    if busy and not _runtime.at_exit():
        _log.warning(
            "pyacl_rt: finalizing while %d exported buffer(s) may still be used by other "
            "processes (IPC); their imports keep the memory on the mock but ACL's rule "
            "is that importers close first",
            len(busy),
        )
    refs.close_mine()


# ================================================================= importer
class _Use:
    """This process's use of one received handle slot: the handle object itself and
    each buffer opened from it; the slot is released when all are gone."""

    __slots__ = ("count", "path", "slot", "tag")

    def __init__(self, path: str, slot: int, tag: int) -> None:
        self.path, self.slot, self.tag = path, slot, tag
        self.count = 1

    def drop(self) -> None:
        with _lock:
            self.count -= 1
            last = self.count == 0
        if last and self.slot >= 0:
            refs.release(self.path, self.slot, self.tag)


#: key -> [address, opens, context] of this process's imports
_imports: dict[bytes, list[Any]] = {}


class _Release:
    """``m.release`` of an imported buffer: close the import after its last open.
    ``origin``: the handle it was opened from (to share it further)."""

    __slots__ = ("key", "origin", "use")

    def __init__(self, key: bytes, use: _Use | None, origin: IpcMemHandle | None) -> None:
        self.key, self.use = key, use
        self.origin = origin

    def __call__(self) -> None:
        try:
            with _lock:
                entry = _imports.get(self.key)
                if entry is not None:
                    entry[1] -= 1
                    if entry[1] <= 0:
                        del _imports[self.key]
                        ctx = entry[2]
                        if ctx.device >= 0 and local.st.ctx is not ctx:
                            ctx.make_current()
                        rc = lib.aclrtIpcMemClose(self.key)
                        if rc:
                            _log.warning(
                                "pyacl_rt: aclrtIpcMemClose of an import failed with %d: %s",
                                rc,
                                recent_error_message(),
                            )
            # The handle it was opened from goes first (its finalizer drops the
            # handle's own count if nothing else holds it), then this buffer's count.
            self.origin = None
            use, self.use = self.use, None
            if use is not None:
                use.drop()
        except Exception:  # pragma: no cover - defensive (finalizer context)
            _log.debug("pyacl_rt: closing an IPC import failed", exc_info=True)


def open_handle(h: IpcMemHandle) -> DeviceBuffer:
    """``DeviceBuffer.from_ipc_handle(h)``."""
    if not isinstance(h, IpcMemHandle):
        raise TypeError(
            f"from_ipc_handle(): handle must be an IpcMemHandle, not {type(h).__name__}"
        )
    if h.pid == os.getpid():
        raise errors.IpcError(
            "this IpcMemHandle was exported by this process: use the DeviceBuffer itself "
            "(a handle is opened in another process)",
            explanation="",
        )
    use = h._use
    if use is None or use.count <= 0:
        raise errors.IpcError(
            "this IpcMemHandle cannot be opened: its exporting process exited or finalized, "
            "or the same pickled handle was loaded twice",
            explanation="",
        )
    return _open(h.key.encode(), h.offset, h.nbytes, h.size, use, h)


def _open(
    key: bytes, offset: int, nbytes: int, size: int, use: _Use | None, origin: IpcMemHandle
) -> DeviceBuffer:
    if not (offset >= 0 and nbytes > 0 and offset + nbytes <= size):
        raise ValueError(f"bad IPC handle: [{offset}, {offset + nbytes}) of {size} bytes")
    ctx = ensure_device_current(current_device())
    with _lock:
        entry = _imports.get(key)
        if entry is None or entry[2].device < 0:
            s = local.st.scratch
            check_ipc(lib.aclrtIpcMemImportByKey(s.uptr, key, 0), "aclrtIpcMemImportByKey")
            ptr = int(s.uptr[0])
            entry = _imports[key] = [ptr, 0, _owning_context(ptr, ctx)]
        entry[1] += 1
        if use is not None:
            use.count += 1
    m = Mem(entry[0] + offset, nbytes, entry[2].device, entry[2])
    m.release = _Release(key, use, origin)
    buf = DeviceBuffer.__new__(DeviceBuffer)
    buf.own_mem(m)
    return buf


def _owning_context(ptr: int, ctx: Any) -> Any:
    """The primary context of the device the imported memory belongs to: the
    exporter's card when this process sees it, else the current one (the runtime
    decides; ``aclrtPointerGetAttributes`` says which)."""
    attrs = ffi.new("aclrtPtrAttributes *")
    if lib.aclrtPointerGetAttributes(ptr, attrs) == 0:
        index = int(attrs.location.id)
        if attrs.location.type == _LOCATION_DEVICE and index != ctx.device:
            return context_for(index)
    else:
        recent_error_message()  # consumed: an older runtime without the query
    return validated_ctx(local.st) or ctx


def after_fork_in_child() -> None:
    """A forked child owns none of the parent's exports or imports."""
    global _lock
    _lock = threading.RLock()
    _segments.clear()
    _shares.clear()
    _by_id.clear()
    _imports.clear()


def forget_imports() -> None:
    """Finalize: the imports are closed by their buffers (freed first); forget the rest."""
    with _lock:
        _imports.clear()


# ==================================================================== handle
class IpcMemHandle:
    """A picklable handle of device memory exported by another process (made by
    :meth:`DeviceBuffer.ipc_handle <pyacl_rt.DeviceBuffer.ipc_handle>`; open it with
    :meth:`DeviceBuffer.from_ipc_handle <pyacl_rt.DeviceBuffer.from_ipc_handle>`).

    ``key`` is the runtime's export key of the allocation, ``offset`` / ``nbytes``
    (bytes) the buffer in it, ``size`` (bytes) the allocation, ``pid`` the exporter,
    ``device`` its physical device id. Pickling it (``pickle``, a ``multiprocessing``
    queue) registers one more user with the exporter; the receiver releases it when the
    handle and all it opened are gone."""

    __slots__ = (
        "__weakref__",
        "_hold",
        "_use",
        "device",
        "export",
        "key",
        "nbytes",
        "offset",
        "path",
        "pid",
        "size",
    )

    def __init__(
        self,
        key: str,
        offset: int,
        nbytes: int,
        size: int,
        pid: int,
        export: int,
        path: str,
        device: int,
    ) -> None:
        self.key = key
        self.offset = offset
        self.nbytes = nbytes
        self.size = size
        self.pid = pid
        self.export = export
        self.path = path
        self.device = device
        self._use: _Use | None = None
        self._hold: object = None

    def _fields(self) -> tuple[Any, ...]:
        return (
            self.key,
            self.offset,
            self.nbytes,
            self.size,
            self.pid,
            self.export,
            self.path,
            self.device,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        slot, tag = refs.issue(self.path, self.export)
        return (_rebuild_handle, (*self._fields(), slot, tag))

    def __repr__(self) -> str:
        return (
            f"<IpcMemHandle {self.nbytes} bytes at offset {self.offset} of {self.key} "
            f"(pid {self.pid}, physical device {self.device})>"
        )


def _rebuild_handle(
    key: str,
    offset: int,
    nbytes: int,
    size: int,
    pid: int,
    export: int,
    path: str,
    device: int,
    slot: int,
    tag: int,
) -> IpcMemHandle:
    h = IpcMemHandle(key, offset, nbytes, size, pid, export, path, device)
    if pid == os.getpid():
        refs.release(path, slot, tag)  # back home: nothing will use the slot
        return h
    if refs.claim(path, slot, tag):
        use = h._use = _Use(path, slot, tag)
        weakref.finalize(h, use.drop)
    return h


def share_only(buf: DeviceBuffer) -> tuple[Any, ...]:
    """For the multiprocessing reduction: ``(rebuild, args)`` sending ``buf`` as a view
    of the same memory (a slot issued for the receiver)."""
    h = handle(buf)
    slot, tag = refs.issue(h.path, h.export)
    return (_rebuild_buffer, (*h._fields(), slot, tag))


def _rebuild_buffer(
    key: str,
    offset: int,
    nbytes: int,
    size: int,
    pid: int,
    export: int,
    path: str,
    device: int,
    slot: int,
    tag: int,
) -> DeviceBuffer:
    h = _rebuild_handle(key, offset, nbytes, size, pid, export, path, device, slot, tag)
    return open_handle(h)  # the buffer keeps the slot; the handle's own use goes with h
