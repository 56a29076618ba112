"""Ordered hook lists: how a lower layer calls code registered from above it.

A layer never imports the layers above it; when it must let them act (closing a
Context closes its Streams, Events and buffers first; finalize asks the callback and
memory layers whether it may run), it owns a :class:`PriorityHooks` and the upper
modules register into it at import. Hooks run in ascending ``priority`` (ties: in
registration order), so the order is written down where each hook is registered,
not implied by which module happened to be imported first. The priorities used are
the ``PRIORITY_*`` constants of :mod:`pyacl_rt._runtime` (events, streams, memory,
contexts, devices), the order finalize releases things in.

Floor 1: standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["PriorityHooks"]

_F = TypeVar("_F", bound=Callable[..., object])


class PriorityHooks(Generic[_F]):
    """A list of callables kept sorted by priority; iterating gives a snapshot."""

    __slots__ = ("_entries", "_hooks", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: list[tuple[int, int, _F]] = []
        #: The callables in run order (rebuilt on add/remove; iteration is lock-free).
        self._hooks: tuple[_F, ...] = ()

    def add(self, fn: _F, priority: int) -> _F:
        """Register ``fn`` to run at ``priority`` (lower runs first); returns ``fn``."""
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"{self.name} hook priority must be an int")
        self._entries.append((priority, len(self._entries), fn))
        self._entries.sort(key=lambda e: (e[0], e[1]))
        self._hooks = tuple(e[2] for e in self._entries)
        return fn

    def remove(self, fn: _F) -> None:
        """Unregister ``fn`` (no-op if it is not registered)."""
        self._entries = [e for e in self._entries if e[2] is not fn]
        self._hooks = tuple(e[2] for e in self._entries)

    def priorities(self) -> list[tuple[int, str]]:
        """``(priority, qualified name)`` of each hook, in run order (diagnostics, tests)."""
        return [(p, getattr(fn, "__qualname__", repr(fn))) for p, _seq, fn in self._entries]

    def __iter__(self) -> Iterator[_F]:
        return iter(self._hooks)

    def __len__(self) -> int:
        return len(self._hooks)

    def __bool__(self) -> bool:
        return bool(self._hooks)
