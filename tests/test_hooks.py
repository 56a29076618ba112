"""pyacl_rt._hooks.PriorityHooks and the hook lists the layers register into."""

from __future__ import annotations

import pytest

from pyacl_rt import _runtime, _state
from pyacl_rt._hooks import PriorityHooks


def test_priority_order_ties_in_registration_order_and_remove() -> None:
    hooks: PriorityHooks[object] = PriorityHooks("test")
    calls: list[str] = []

    def make(tag: str) -> object:
        def hook() -> None:
            calls.append(tag)

        hook.__qualname__ = tag
        return hook

    late, first, tie_a, tie_b = make("late"), make("first"), make("tie_a"), make("tie_b")
    assert hooks.add(late, 300) is late
    hooks.add(tie_a, 200)
    hooks.add(first, 100)
    hooks.add(tie_b, 200)
    for hook in hooks:
        hook()  # type: ignore[operator]
    assert calls == ["first", "tie_a", "tie_b", "late"]
    assert hooks.priorities() == [(100, "first"), (200, "tie_a"), (200, "tie_b"), (300, "late")]
    hooks.remove(tie_a)
    hooks.remove(tie_a)  # no-op
    assert [name for _p, name in hooks.priorities()] == ["first", "tie_b", "late"]
    assert len(hooks) == 3 and hooks
    with pytest.raises(TypeError, match="priority must be an int"):
        hooks.add(first, True)


def test_context_close_hooks_run_events_streams_memory_in_that_order() -> None:
    """The order closing a Context needs (was the import order of four modules)."""
    order = _state.context_close_hooks.priorities()
    assert [p for p, _name in order] == sorted(p for p, _name in order)
    hooks = list(_state.context_close_hooks)
    assert [h.__module__ for h in hooks] == [
        "pyacl_rt._event",  # events
        "pyacl_rt._stream",  # streams, their callback subscriptions, marker events
        "pyacl_rt._completion",  # device futures that can no longer complete fail
        "pyacl_rt._kernels.objectcode",  # binaries (after the streams that launched them)
        "pyacl_rt._memory.records",  # buffers allocated in the context
        "pyacl_rt._memory.engine",  # the copy engine's peer-access cache
    ]
    assert [p for p, _n in order] == [
        _runtime.PRIORITY_EVENTS,
        _runtime.PRIORITY_STREAMS,
        _runtime.PRIORITY_STREAMS + 1,
        _runtime.PRIORITY_STREAMS + 60,
        _runtime.PRIORITY_MEMORY,
        _runtime.PRIORITY_MEMORY + 10,
    ]


def test_finalize_guards_and_device_sync_hooks() -> None:
    guards = list(_runtime.finalize_guards)
    assert [g.__module__ for g in guards] == ["pyacl_rt._callbacks", "pyacl_rt._memory.records"]
    assert [h.__module__ for h in _state.device_sync_hooks] == ["pyacl_rt._stream"]
