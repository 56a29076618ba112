"""Reference slots: how an exporting process learns that its importers are done.

The runtime tells an exporter nothing when another process closes an import, yet the
exporter must keep the memory (or event) until then: ACL's rule is that importers close
before the exporter closes and frees. Each exporting process therefore owns one small
shared file, its **arena** (``/dev/shm/pyacl_rt-ipc-<pid>-<nonce>``, 16-byte slots):

* every handle that leaves a process (pickled) takes a slot first: ``ISSUED``, with the
  export's id and a random tag (:func:`issue`; any process may issue in the exporter's
  arena, so a handle forwarded from B to C counts too);
* the receiving process claims it when it unpickles the handle (``IN_USE`` + its pid,
  :func:`claim`) and frees it when it is done (:func:`release`: the handle and all it
  opened are closed or collected, or, for an event, once it was opened);
* the exporter counts the live slots of each export (:meth:`Arena.live`) when it polls
  (``ipc_collect()``, a new export, ``close()`` of an exported buffer, finalize); a slot
  ``IN_USE`` by a pid that no longer exists counts as released.

A handle pickled but never unpickled keeps its slot (and the export) until the exporter
finalizes, as with CUDA IPC in torch. Every transition holds an ``fcntl`` lock on the
file (and a thread lock); the exporter unlinks the file at finalize / exit (importers
that still map it write into the unlinked file, harmlessly).

Floor 7 (part of :mod:`pyacl_rt._ipc`): imports only the standard library and
:mod:`pyacl_rt.errors`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Final

from .. import errors

SLOT_SIZE: Final = 16  # state u32, pid i32, export id u32, tag u32
NSLOTS: Final = 4096
FREE, ISSUED, IN_USE = 0, 1, 2
_DIR: Final = "/dev/shm" if os.path.isdir("/dev/shm") else "/tmp"

_lock = threading.Lock()
_mine: Arena | None = None
_opened: dict[str, Any] = {}  # path -> mmap of another process's arena (or None: gone)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Locked:
    """``with _Locked(fd):`` the whole file, against other processes (threads of this
    one hold ``_lock``)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> None:
        import fcntl

        _lock.acquire()
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX)
        except BaseException:
            _lock.release()
            raise

    def __exit__(self, *exc: object) -> None:
        import fcntl

        try:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)
        finally:
            _lock.release()


def _slot(mm: Any, i: int) -> tuple[int, int, int, int]:
    import struct

    return struct.unpack_from("<IiII", mm, i * SLOT_SIZE)


def _put(mm: Any, i: int, state: int, pid: int, export: int, tag: int) -> None:
    import struct

    struct.pack_into("<IiII", mm, i * SLOT_SIZE, state, pid, export, tag)


class Arena:
    """This process's arena (created at its first export)."""

    def __init__(self) -> None:
        import mmap

        self.pid = os.getpid()
        self.path = f"{_DIR}/pyacl_rt-ipc-{self.pid}-{os.urandom(6).hex()}"
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(self.fd, NSLOTS * SLOT_SIZE)
        self.mm = mmap.mmap(self.fd, NSLOTS * SLOT_SIZE)

    def live(self) -> dict[int, int]:
        """``{export id: live slots}``; frees the slots of importers that exited."""
        import struct

        out: dict[int, int] = {}
        with _Locked(self.fd):
            slots = struct.iter_unpack("<IiII", self.mm[:])  # one copy of 64 KiB
            for i, (state, pid, export, _tag) in enumerate(slots):
                if state == FREE:
                    continue
                if state == IN_USE and not _pid_alive(pid):
                    _put(self.mm, i, FREE, 0, 0, 0)
                    continue
                out[export] = out.get(export, 0) + 1
        return out

    def close(self) -> None:
        """Unlink the file (at finalize / exit)."""
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        try:
            self.mm.close()
            os.close(self.fd)
        except (OSError, ValueError):  # pragma: no cover - defensive
            pass


def mine() -> Arena:
    """This process's arena, created on first use (a new one after fork)."""
    global _mine
    a = _mine
    if a is None or a.pid != os.getpid():
        a = _mine = Arena()
    return a


def close_mine() -> None:
    """Unlink this process's arena (finalize / exit); a later export makes a new one."""
    global _mine
    a, _mine = _mine, None
    if a is not None and a.pid == os.getpid():
        a.close()


def _open(path: str) -> tuple[Any, int] | None:
    """``(mmap, fd)`` of an arena (cached), or None when its exporter is gone."""
    a = _mine
    if a is not None and a.path == path and a.pid == os.getpid():
        return a.mm, a.fd
    got = _opened.get(path)
    if got is not None:
        return got  # type: ignore[no-any-return]
    import mmap

    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        mm = mmap.mmap(fd, NSLOTS * SLOT_SIZE)
    except (OSError, ValueError):
        os.close(fd)
        return None
    _opened[path] = (mm, fd)
    return mm, fd


def issue(path: str, export: int) -> tuple[int, int]:
    """Take a slot for one handle of ``export`` leaving this process: ``(slot, tag)``.
    Raises :class:`~pyacl_rt.errors.IpcError` when the exporter is gone or the
    arena is full."""
    got = _open(path)
    if got is None:
        raise errors.IpcError(
            "cannot share this IPC handle further: its exporting process exited or finalized",
            explanation="",
        )
    mm, fd = got
    tag = int.from_bytes(os.urandom(4), "little") or 1
    import struct

    with _Locked(fd):
        for i, (state, *_rest) in enumerate(struct.iter_unpack("<IiII", mm[:])):
            if state == FREE:
                _put(mm, i, ISSUED, 0, export, tag)
                return i, tag
    raise errors.IpcError(
        f"too many IPC handles in flight ({NSLOTS}): importers must close what they "
        "opened (and drop unopened handles) before more are sent",
        explanation="",
    )


def claim(path: str, slot: int, tag: int) -> bool:
    """The receiving side takes slot ``slot`` (this process is now its user). False
    when the exporter is gone, or the slot was claimed or released already (the same
    pickled bytes loaded twice)."""
    got = _open(path)
    if got is None or not 0 <= slot < NSLOTS:
        return False
    mm, fd = got
    with _Locked(fd):
        state, _pid, export, t = _slot(mm, slot)
        if state != ISSUED or t != tag:
            return False
        _put(mm, slot, IN_USE, os.getpid(), export, tag)
    return True


def release(path: str, slot: int, tag: int) -> None:
    """Give slot ``slot`` back (idempotent; never raises)."""
    try:
        got = _open(path)
        if got is None:
            return
        mm, fd = got
        with _Locked(fd):
            state, _pid, _export, t = _slot(mm, slot)
            if state != FREE and t == tag:
                _put(mm, slot, FREE, 0, 0, 0)
    except Exception:  # pragma: no cover - defensive (finalizers)
        pass


def after_fork_in_child() -> None:
    """A forked child owns no arena (the parent's stays the parent's)."""
    global _lock
    _lock = threading.Lock()
