"""How a lower layer calls code registered from above it: one hook type, one
late-bound slot type, one fork handler.

A layer never imports the layers above it. When it must let them act, it owns either

* a :class:`PriorityHooks` list (finalize's release hooks and guards, closing a
  Context, a device synchronize, the fork reset) that upper modules register into at
  import. Hooks run in **ascending priority; hooks of equal priority run in reverse
  order of registration** (last registered first, like ``atexit``: a later hook
  usually builds on an earlier one, so it is torn down first). The priorities are the
  ``PRIORITY_*`` constants of :mod:`pyacl_rt._runtime` (events, streams, memory,
  contexts, devices), written where each hook is registered; or
* a :class:`Late` slot: one typed value (a class, a factory) an upper module fills
  at import and the lower one reads when it needs it (the Event class streams create,
  the pinned buffer cross-device copies stage through, the DLPack functions buffers
  call). Reading an empty slot raises a :class:`RuntimeError` naming the module that
  fills it.

:data:`fork_hooks` is the package's one ``os.register_at_fork`` handler: in a forked
child it gives every hook list a new lock, then runs the fork hooks in priority order
(the runtime first, then each layer forgets the parent's handles and replaces the
locks a parent thread may have held).

Layer 1: standard library only.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Final, Generic, TypeVar

__all__ = ["Factories", "Hook", "Late", "PriorityHooks", "factories", "fork_hooks"]

_F = TypeVar("_F", bound=Callable[..., object])
_T = TypeVar("_T")

_seq = itertools.count()
#: Every hook list (weakly): their locks are replaced in a forked child.
_all_lists: weakref.WeakSet[PriorityHooks[Any]] = weakref.WeakSet()


class Hook(Generic[_F]):
    """One registered hook: what :meth:`PriorityHooks.add` returns."""

    __slots__ = ("fn", "name", "once", "owner", "priority", "seq")

    def __init__(
        self, owner: PriorityHooks[_F], fn: _F, priority: int, name: str, once: bool
    ) -> None:
        self.owner = owner
        self.fn = fn
        self.priority = priority
        self.name = name
        self.once = once
        self.seq = next(_seq)

    def __repr__(self) -> str:
        return (
            f"Hook(fn={self.fn!r}, priority={self.priority}, seq={self.seq}, "
            f"name={self.name!r}, once={self.once})"
        )

    def remove(self) -> None:
        """Unregister the hook (no-op if it already ran once or was removed)."""
        self.owner.discard(self)

    @property
    def registered(self) -> bool:
        """True while the hook is in its list."""
        return self in self.owner.hooks()


class PriorityHooks(Generic[_F]):
    """Callables run in ascending priority, ties last-registered first.

    Thread-safe: registering and removing take a lock; iterating gives a snapshot of
    the callables in run order (lock-free: the snapshot is rebuilt on each change).
    """

    __slots__ = ("__weakref__", "_entries", "_fns", "_lock", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._entries: tuple[Hook[_F], ...] = ()
        #: The callables in run order.
        self._fns: tuple[_F, ...] = ()
        _all_lists.add(self)

    def add(
        self, fn: _F, priority: int, *, name: str | None = None, once: bool = False
    ) -> Hook[_F]:
        """Register ``fn`` to run at ``priority`` (lower runs first). ``once``: it is
        unregistered when :meth:`run` runs it. Returns the :class:`Hook` (its
        ``remove()`` unregisters)."""
        if not callable(fn):
            raise TypeError(f"{self.name} hook must be callable, not {type(fn).__name__}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"{self.name} hook priority must be an int")
        hook = Hook(self, fn, priority, name or str(getattr(fn, "__qualname__", None) or fn), once)
        with self._lock:
            self._set((*self._entries, hook))
        return hook

    def remove(self, fn: _F) -> None:
        """Unregister every hook of ``fn`` (no-op if it is not registered)."""
        with self._lock:
            self._set(tuple(h for h in self._entries if h.fn is not fn))

    def discard(self, hook: Hook[_F]) -> bool:
        """Unregister ``hook``; True if it was registered."""
        with self._lock:
            if hook not in self._entries:
                return False
            self._set(tuple(h for h in self._entries if h is not hook))
            return True

    def clear(self) -> None:
        """Unregister every hook (a forked child drops the parent's release hooks)."""
        with self._lock:
            self._set(())

    def _set(self, entries: tuple[Hook[_F], ...]) -> None:
        self._entries = tuple(sorted(entries, key=lambda h: (h.priority, -h.seq)))
        self._fns = tuple(h.fn for h in self._entries)

    def hooks(self) -> tuple[Hook[_F], ...]:
        """The registered hooks in run order (a snapshot)."""
        return self._entries

    def priorities(self) -> list[tuple[int, str]]:
        """``(priority, name)`` of each hook, in run order (diagnostics, tests)."""
        return [(h.priority, h.name) for h in self._entries]

    def run(
        self,
        *args: object,
        on_error: Callable[[Hook[_F], BaseException], None] | None = None,
        step: Callable[[Hook[_F] | None], None] | None = None,
    ) -> None:
        """Call every hook with ``args`` in run order, until none is left that has not
        run: a hook may remove later hooks (they are skipped) or register new ones (they
        run in a further round). ``on_error(hook, exc)`` gets what a hook raises and the
        rest still run (without it the exception propagates); ``step(hook)`` is told
        which hook runs (None when done), for a watchdog."""
        ran: set[int] = set()
        while True:
            pending = [h for h in self._entries if h.seq not in ran]
            if not pending:
                return
            for hook in pending:
                if hook.once:
                    if not self.discard(hook):
                        continue
                elif hook not in self._entries:
                    continue
                ran.add(hook.seq)
                if step is not None:
                    step(hook)
                try:
                    hook.fn(*args)
                except BaseException as exc:
                    if on_error is None:
                        raise
                    on_error(hook, exc)
                finally:
                    if step is not None:
                        step(None)

    def __iter__(self) -> Iterator[_F]:
        return iter(self._fns)

    def __len__(self) -> int:
        return len(self._fns)

    def __bool__(self) -> bool:
        return bool(self._fns)


class Late(Generic[_T]):
    """A value a lower layer needs and an upper module provides at import (a class,
    a factory): set once by ``provider``, read with :meth:`get`."""

    __slots__ = ("name", "provider", "value")

    def __init__(self, name: str, provider: str) -> None:
        self.name = name
        #: The module that fills the slot when it is imported.
        self.provider = provider
        self.value: _T | None = None

    def set(self, value: _T) -> _T:
        """Fill the slot (called by :attr:`provider` at import); returns ``value``."""
        self.value = value
        return value

    def get(self) -> _T:
        """The value; :class:`RuntimeError` naming the provider if it was never set."""
        value = self.value
        if value is None:
            raise RuntimeError(
                f"pyacl_rt: {self.name} is not available: {self.provider} registers it "
                "when it is imported (import pyacl_rt, which imports every layer)"
            )
        return value


class Factories:
    """The package's late-bound factories, one typed :class:`Late` slot each (the one
    registry: a new one is a new slot here, filled by the module that provides it)."""

    __slots__ = (
        "dlpack_device",
        "dlpack_export",
        "dlpack_typed",
        "event_class",
        "ipc_event_handle",
        "ipc_event_open",
        "ipc_mem_before_close",
        "ipc_mem_handle",
        "ipc_mem_open",
        "staging_buffer",
    )

    def __init__(self) -> None:
        #: :class:`pyacl_rt.Event`: what ``Stream.record_event`` / ``wait_stream`` create
        #: (and ``record_event`` accepts).
        self.event_class: Late[type[Any]] = Late("the Event class", "pyacl_rt._event")
        #: ``HostBuffer(nbytes)``: the pinned buffer a cross-device copy stages through.
        self.staging_buffer: Late[Callable[[int], Any]] = Late(
            "the pinned staging buffer", "pyacl_rt._memory.buffers"
        )
        #: ``export(buf, stream, max_version, dl_device, copy)``: ``buf.__dlpack__``.
        self.dlpack_export: Late[Callable[..., Any]] = Late("DLPack export", "pyacl_rt._dlpack")
        #: ``device(buf) -> (device_type, device_id)``: ``buf.__dlpack_device__``.
        self.dlpack_device: Late[Callable[[Any], tuple[int, int]]] = Late(
            "the DLPack device of a buffer", "pyacl_rt._dlpack"
        )
        #: ``typed(buf, dtype, shape)``: ``buf.as_dlpack``.
        self.dlpack_typed: Late[Callable[..., Any]] = Late("typed DLPack views", "pyacl_rt._dlpack")
        #: ``handle(buf, pids) -> IpcMemHandle``: ``DeviceBuffer.ipc_handle``.
        self.ipc_mem_handle: Late[Callable[[Any, Any], Any]] = Late(
            "IPC handles of buffers", "pyacl_rt._ipc"
        )
        #: ``open(handle) -> DeviceBuffer``: ``DeviceBuffer.from_ipc_handle``.
        self.ipc_mem_open: Late[Callable[[Any], Any]] = Late(
            "opening IPC handles of buffers", "pyacl_rt._ipc"
        )
        #: ``before_close(record)``: ``DeviceBuffer.close()`` of a record with exports
        #: (drops the IPC exports importers are done with; refuses while one may be in
        #: use). Unset (nothing exported through IPC) until ``pyacl_rt._ipc`` is imported.
        self.ipc_mem_before_close: Late[Callable[[Any], None]] = Late(
            "the IPC close check of buffers", "pyacl_rt._ipc"
        )
        #: ``handle(event) -> IpcEventHandle``: ``Event.ipc_handle``.
        self.ipc_event_handle: Late[Callable[[Any], Any]] = Late(
            "IPC handles of events", "pyacl_rt._ipc"
        )
        #: ``open(handle) -> Event``: ``Event.from_ipc_handle``.
        self.ipc_event_open: Late[Callable[[Any], Any]] = Late(
            "opening IPC handles of events", "pyacl_rt._ipc"
        )


#: The one registry of late-bound factories.
factories: Final = Factories()

#: The package's fork handler: run in a forked child, in priority order (the
#: ``PRIORITY_*`` constants of :mod:`pyacl_rt._runtime`; ``PRIORITY_FIRST`` for the
#: runtime's own state). Hooks must not raise.
fork_hooks: Final[PriorityHooks[Callable[[], None]]] = PriorityHooks("fork")


def _after_fork_in_child() -> None:
    # A parent thread may have held a hook list's lock at fork time.
    for hooks in list(_all_lists):
        hooks._lock = threading.Lock()
    fork_hooks.run()


os.register_at_fork(after_in_child=_after_fork_in_child)
