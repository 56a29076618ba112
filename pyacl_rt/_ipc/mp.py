"""``multiprocessing`` sends DeviceBuffers and Events as views of the same memory/event.

Registered with ``multiprocessing.reduction.ForkingPickler`` only (what queues, pipes
and spawned ``Process`` arguments use), like torch.multiprocessing: a ``DeviceBuffer``
put in a queue arrives as a ``DeviceBuffer`` over the sender's memory (zero-copy), an
interprocess ``Event`` as an Event opened on the receiver's current device. Plain
``pickle.dumps(buf)`` still refuses (a pickle written to a file must not silently hold
device memory of a live process); pickle ``buf.ipc_handle()`` for that.

``import pyacl_rt`` does not import multiprocessing (it costs ~30 ms): the reductions
are registered at once when ``multiprocessing.reduction`` is already loaded, else by a
one-shot import hook when it is first imported.

Floor 7 (part of :mod:`pyacl_rt._ipc`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from typing import Any

from .._event import Event
from .._memory import DeviceBuffer
from . import event as _ev
from . import memory as _mem

__all__ = ["install"]

_TARGET = "multiprocessing.reduction"


def _reduce_buffer(buf: DeviceBuffer) -> tuple[Any, ...]:
    return _mem.share_only(buf)


def _reduce_event(ev: Event) -> tuple[Any, ...]:
    return _ev.share_only(ev)


def register() -> None:
    """Register the reductions with ``ForkingPickler`` (idempotent)."""
    from multiprocessing.reduction import ForkingPickler

    ForkingPickler.register(DeviceBuffer, _reduce_buffer)
    ForkingPickler.register(Event, _reduce_event)


class _Hook:
    """A ``sys.meta_path`` finder that only watches for ``multiprocessing.reduction``,
    lets the normal finders load it, and registers the reductions right after."""

    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if name != _TARGET:
            return None
        _remove()
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_register(module: Any) -> None:
            exec_module(module)
            sys.modules[name] = module
            register()

        spec.loader = _Loader(loader, exec_then_register)  # type: ignore[assignment]
        return spec


class _Loader:
    def __init__(self, inner: Any, exec_module: Any) -> None:
        self.inner = inner
        self.exec_module = exec_module

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)


_hook = _Hook()


def _remove() -> None:
    with contextlib.suppress(ValueError):
        sys.meta_path.remove(_hook)


def install() -> None:
    """Register now if multiprocessing is loaded, else when it is."""
    if _TARGET in sys.modules:
        register()
    elif _hook not in sys.meta_path:
        sys.meta_path.insert(0, _hook)
