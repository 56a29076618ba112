"""Events across processes: :class:`IpcEventHandle`, ``Event.ipc_handle`` and
``Event.from_ipc_handle`` (``aclrtIpcGetEventHandle`` / ``aclrtIpcOpenEventHandle``).

An ``Event(interprocess=True)`` is created with ``ACL_EVENT_IPC`` (no timing). Its
handle (64 bytes, the same for every call on one event) is opened by another process as
a local Event: ``record`` in either process, ``wait`` / ``synchronize`` / ``query`` in
either follow the latest record submitted in any of them (a wait on an event never
recorded, or whose records all ran, ends at once).

**Lifetimes.** ACL wants the creator to keep its event until the other process opened
it. The exporter keeps the Event object alive while a handle of it lives in this
process or a handle that left was not yet opened (or dropped) by its receiver (the
slots of :mod:`.refs`; polled by ``pyacl_rt.ipc_collect()`` and at each new handle).
After that each process destroys its own event when it likes (``close()``, GC).
``close()`` by the exporter before the importer opened makes that open fail with
:class:`~pyacl_rt.errors.IpcError`.

Floor 7 (part of :mod:`pyacl_rt._ipc`): imports floors 1-6 and :mod:`.refs`.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from typing import Any, Final

from .. import _event, errors
from .._device import current_device, ensure_device_current
from .._event import Event
from .._state import lib, local
from ..lowlevel import ffi
from . import refs
from .memory import check_ipc

__all__ = ["IpcEventHandle", "collect", "handle", "open_handle"]

HANDLE_SIZE: Final = 64  # ACL_IPC_EVENT_HANDLE_SIZE
_lock = threading.Lock()
_ids = itertools.count(1)


class _Share:
    __slots__ = ("event", "id", "local")

    def __init__(self, event: Event) -> None:
        self.id = next(_ids) & 0xFFFFFFFF
        self.event: Event | None = event
        self.local = 0


_shares: dict[int, _Share] = {}  # id(event) -> share
_by_id: dict[int, _Share] = {}


def handle(ev: Event) -> IpcEventHandle:
    """``Event.ipc_handle()`` (see the module docstring)."""
    if not isinstance(ev, Event):
        raise TypeError(f"ipc_handle() needs an Event, not {type(ev).__name__}")
    if not ev.interprocess:
        raise errors.IpcError(
            "only an interprocess event has an IPC handle: create it with Event(interprocess=True)",
            explanation="",
        )
    collect()
    _event.create_now(ev)
    with _lock:
        share = _shares.get(id(ev))
        if share is None or share.event is not ev:
            share = _shares[id(ev)] = _Share(ev)
            _by_id[share.id] = share
        share.local += 1
    h = ffi.new("aclrtIpcEventHandle *")
    check_ipc(lib.aclrtIpcGetEventHandle(ev.handle, h), "aclrtIpcGetEventHandle")
    out = IpcEventHandle(
        bytes(ffi.buffer(h)), os.getpid(), share.id, refs.mine().path, _physical(ev)
    )
    weakref.finalize(out, _drop_local, share)
    return out


def _physical(ev: Event) -> int:
    device = ev.device
    return device.physical_id if device is not None else -1


def _drop_local(share: _Share) -> None:
    with _lock:
        share.local -= 1


def collect() -> int:
    """Let go the exported events every receiver opened (``pyacl_rt.ipc_collect()``)."""
    if not _by_id:
        return 0
    live = refs.mine().live()
    done = 0
    with _lock:
        for share in list(_by_id.values()):
            if share.local <= 0 and not live.get(share.id):
                _by_id.pop(share.id, None)
                for k, v in list(_shares.items()):
                    if v is share:
                        del _shares[k]
                share.event = None
                done += 1
    return done


def release_all() -> None:
    """Finalize: forget every share (the events are destroyed with the others)."""
    with _lock:
        for share in _by_id.values():
            share.event = None
        _by_id.clear()
        _shares.clear()


def after_fork_in_child() -> None:
    """A forked child owns none of the parent's exported events."""
    global _lock
    _lock = threading.Lock()
    _shares.clear()
    _by_id.clear()


def open_handle(h: IpcEventHandle) -> Event:
    """``Event.from_ipc_handle(h)``."""
    if not isinstance(h, IpcEventHandle):
        raise TypeError(
            f"from_ipc_handle(): handle must be an IpcEventHandle, not {type(h).__name__}"
        )
    if h.pid == os.getpid():
        raise errors.IpcError(
            "this IpcEventHandle was exported by this process: use the Event itself (a "
            "handle is opened in another process)",
            explanation="",
        )
    ensure_device_current(current_device())
    raw = ffi.new("aclrtIpcEventHandle *")
    ffi.memmove(raw, h.data, HANDLE_SIZE)
    s = local.st.scratch
    try:
        check_ipc(lib.aclrtIpcOpenEventHandle(raw[0], s.uptr), "aclrtIpcOpenEventHandle")
    finally:
        use, h._use = h._use, None
        if use is not None:
            refs.release(*use)  # opened (or failed): the exporter may let go
    ev = Event(interprocess=True)
    _event.adopt_handle(ev, int(s.uptr[0]))
    return ev


class IpcEventHandle:
    """A picklable handle of an interprocess Event of another process (made by
    :meth:`Event.ipc_handle <pyacl_rt.Event.ipc_handle>`; open it with
    :meth:`Event.from_ipc_handle <pyacl_rt.Event.from_ipc_handle>`). ``data`` is the
    runtime's 64-byte ``aclrtIpcEventHandle``, ``pid`` the exporter, ``device`` its
    physical device id."""

    __slots__ = ("__weakref__", "_use", "data", "device", "export", "path", "pid")

    def __init__(self, data: bytes, pid: int, export: int, path: str, device: int) -> None:
        if not isinstance(data, bytes) or len(data) != HANDLE_SIZE:
            raise ValueError(f"an IPC event handle is {HANDLE_SIZE} bytes")
        self.data = data
        self.pid = pid
        self.export = export
        self.path = path
        self.device = device
        self._use: tuple[str, int, int] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        slot, tag = refs.issue(self.path, self.export)
        return (
            _rebuild_handle,
            (self.data, self.pid, self.export, self.path, self.device, slot, tag),
        )

    def __repr__(self) -> str:
        return f"<IpcEventHandle of pid {self.pid} (physical device {self.device})>"


def _release_use(use: tuple[str, int, int]) -> None:
    refs.release(*use)


def _rebuild_handle(
    data: bytes, pid: int, export: int, path: str, device: int, slot: int, tag: int
) -> IpcEventHandle:
    h = IpcEventHandle(data, pid, export, path, device)
    if pid == os.getpid():
        refs.release(path, slot, tag)
    elif refs.claim(path, slot, tag):
        h._use = (path, slot, tag)
        weakref.finalize(h, _release_use, h._use)  # dropped unopened: released too
    return h


def share_only(ev: Event) -> tuple[Any, ...]:
    """For the multiprocessing reduction: send ``ev`` as the same event."""
    h = handle(ev)
    slot, tag = refs.issue(h.path, h.export)
    return (_rebuild_event, (h.data, h.pid, h.export, h.path, h.device, slot, tag))


def _rebuild_event(
    data: bytes, pid: int, export: int, path: str, device: int, slot: int, tag: int
) -> Event:
    return open_handle(_rebuild_handle(data, pid, export, path, device, slot, tag))
