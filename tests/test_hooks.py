"""pyacl_rt._hooks: PriorityHooks (the one hook type), Late slots (the one registry of
late-bound factories), the one fork handler, and the hook lists the layers register
into (each pinned by its priority)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pyacl_rt import _hooks, _runtime, _state
from pyacl_rt._hooks import Late, PriorityHooks

PKG = Path(_hooks.__file__).parent


def _make(calls: list[str], tag: str) -> Callable[[], None]:
    def hook() -> None:
        calls.append(tag)

    hook.__qualname__ = tag
    return hook


def test_priority_order_ties_last_registered_first_and_remove() -> None:
    hooks: PriorityHooks[Callable[[], None]] = PriorityHooks("test")
    calls: list[str] = []
    late, first, tie_a, tie_b = (_make(calls, t) for t in ("late", "first", "tie_a", "tie_b"))
    assert hooks.add(late, 300).fn is late
    hooks.add(tie_a, 200)
    hooks.add(first, 100)
    hooks.add(tie_b, 200)
    for hook in hooks:
        hook()
    # ascending priority; a tie runs the later registration first (like atexit)
    assert calls == ["first", "tie_b", "tie_a", "late"]
    assert hooks.priorities() == [(100, "first"), (200, "tie_b"), (200, "tie_a"), (300, "late")]
    calls.clear()
    hooks.run()
    assert calls == ["first", "tie_b", "tie_a", "late"]
    hooks.remove(tie_a)
    hooks.remove(tie_a)  # no-op
    assert [name for _p, name in hooks.priorities()] == ["first", "tie_b", "late"]
    assert len(hooks) == 3 and hooks
    with pytest.raises(TypeError, match="priority must be an int"):
        hooks.add(first, True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be callable"):
        hooks.add(42, 1)  # type: ignore[arg-type]


def test_run_once_errors_removal_and_late_registration() -> None:
    hooks: PriorityHooks[Callable[[], None]] = PriorityHooks("test")
    calls: list[str] = []
    later = hooks.add(_make(calls, "removed-by-first"), 50)

    def first() -> None:
        calls.append("first")
        later.remove()
        hooks.add(_make(calls, "added-during"), 1)  # runs in a further round

    def boom() -> None:
        calls.append("boom")
        raise RuntimeError("hook failure")

    hooks.add(first, 10, name="first")
    hooks.add(boom, 20, name="boom")
    once = hooks.add(_make(calls, "once"), 30, once=True)
    failures: list[str] = []
    steps: list[str | None] = []
    hooks.run(
        on_error=lambda h, exc: failures.append(f"{h.name}: {exc}"),
        step=lambda h: steps.append(None if h is None else h.name),
    )
    assert calls == ["first", "boom", "once", "added-during"]
    assert failures == ["boom: hook failure"]
    assert steps[:2] == ["first", None] and not once.registered and not later.registered
    with pytest.raises(RuntimeError, match="hook failure"):
        hooks.run()  # without on_error the first failure propagates


def test_late_slot_names_its_provider() -> None:
    slot: Late[Callable[[int], int]] = Late("the doubling factory", "pyacl_rt._example")
    with pytest.raises(RuntimeError, match=r"the doubling factory .* pyacl_rt\._example"):
        slot.get()
    assert slot.set(lambda n: 2 * n)(4) == 8
    assert slot.get()(5) == 10


def test_every_factory_is_registered_by_import_pyacl_rt() -> None:
    import pyacl_rt

    f = _hooks.factories
    assert f.event_class.get() is pyacl_rt.Event
    assert f.staging_buffer.get() is pyacl_rt.HostBuffer
    for slot in (f.dlpack_export, f.dlpack_device, f.dlpack_typed):
        assert slot.provider == "pyacl_rt._dlpack" and callable(slot.get())
    from pyacl_rt._ipc import event, memory

    assert f.ipc_mem_handle.get() is memory.handle
    assert f.ipc_mem_open.get() is memory.open_handle
    assert f.ipc_mem_before_close.get() is memory.before_close
    assert f.ipc_event_handle.get() is event.handle
    assert f.ipc_event_open.get() is event.open_handle
    for slot in (
        f.ipc_mem_handle,
        f.ipc_mem_open,
        f.ipc_mem_before_close,
        f.ipc_event_handle,
        f.ipc_event_open,
    ):
        assert slot.provider == "pyacl_rt._ipc"


def test_ipc_slots_empty_raise_naming_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """DeviceBuffer/Event IPC go through _hooks.factories: an empty slot raises a
    RuntimeError naming pyacl_rt._ipc (the string-keyed dicts raised KeyError)."""
    import pyacl_rt as npu

    f = _hooks.factories
    buf = npu.DeviceBuffer(64)
    try:
        for slot in (f.ipc_mem_handle, f.ipc_mem_open, f.ipc_event_handle, f.ipc_event_open):
            monkeypatch.setattr(slot, "value", None)
        with pytest.raises(RuntimeError, match=r"IPC handles of buffers .*pyacl_rt\._ipc"):
            buf.ipc_handle()
        with pytest.raises(RuntimeError, match=r"pyacl_rt\._ipc"):
            npu.DeviceBuffer.from_ipc_handle(object())
        with pytest.raises(RuntimeError, match=r"IPC handles of events .*pyacl_rt\._ipc"):
            npu.Event(interprocess=True).ipc_handle()
        with pytest.raises(RuntimeError, match=r"pyacl_rt\._ipc"):
            npu.Event.from_ipc_handle(object())
        # with the close check unset (nothing exported through IPC) close() still works
        monkeypatch.setattr(f.ipc_mem_before_close, "value", None)
    finally:
        buf.close()
    assert buf.closed


def _key(fn: Any) -> str:
    return f"{fn.__module__}.{getattr(fn, '__qualname__', fn)}"


def _registered(hooks: PriorityHooks[Any]) -> dict[str, int]:
    return {_key(h.fn): h.priority for h in hooks.hooks()}


P = _runtime


def test_context_close_hooks_priorities() -> None:
    """Closing a Context closes its events, then streams (their callback subscriptions
    and marker events), then buffers allocated in it, then the copy engine's
    peer-access cache: each pinned by its priority, no ties."""
    order = _state.context_close_hooks.priorities()
    assert [p for p, _ in order] == sorted({p for p, _ in order})  # ascending, no ties
    assert _registered(_state.context_close_hooks) == {
        "pyacl_rt._event._on_context_close": P.PRIORITY_EVENTS,
        # streams, their callback subscriptions, marker events
        "pyacl_rt._stream._on_context_close": P.PRIORITY_STREAMS,
        # device futures that can no longer complete fail
        "pyacl_rt._completion._on_context_close": P.PRIORITY_STREAMS + 1,
        # binaries (after the streams that launched them)
        "pyacl_rt._kernels.objectcode._on_context_close": P.PRIORITY_STREAMS + 60,
        "pyacl_rt._memory.records._on_context_close": P.PRIORITY_MEMORY,
        "pyacl_rt._memory.engine._forget_context_peers": P.PRIORITY_MEMORY + 10,
    }


def test_finalize_guards_and_device_sync_hooks_priorities() -> None:
    # host-callback threads are refused before the memory layer looks at exports
    assert _registered(_runtime.finalize_guards) == {
        "pyacl_rt._callbacks._refuse_finalize_here": P.PRIORITY_FIRST,
        "pyacl_rt._memory.records._finalize_guard": P.PRIORITY_MEMORY,
    }
    assert _registered(_state.device_sync_hooks) == {
        "pyacl_rt._stream._on_device_sync": P.PRIORITY_STREAMS,
    }
    # finalize waits (interruptibly) for explicit contexts' work, then the devices'
    assert _registered(_runtime.finalize_prepare) == {
        "pyacl_rt._context._wait_for_contexts": P.PRIORITY_CONTEXTS,
        "pyacl_rt._device._wait_for_devices": P.PRIORITY_DEVICES,
    }


def test_package_release_hooks_priorities() -> None:
    got = {
        k: p for k, p in _registered(_runtime.release_hooks).items() if k.startswith("pyacl_rt.")
    }
    # registered lazily, by the first kernel twin (so only after a test that ran one)
    twins = got.pop("pyacl_rt._twins._release_all", P.PRIORITY_STREAMS + 70)
    assert twins == P.PRIORITY_STREAMS + 70
    assert got == {
        "pyacl_rt._releaser.stop": P.PRIORITY_FIRST,
        "pyacl_rt._ipc._release": P.PRIORITY_EVENTS - 10,
        "pyacl_rt._ipc.memory.forget_imports": P.PRIORITY_MEMORY + 10,
        "pyacl_rt._event._release_events": P.PRIORITY_EVENTS,
        "pyacl_rt._stream._release_streams": P.PRIORITY_STREAMS,
        "pyacl_rt._callbacks._stop_threads": P.PRIORITY_STREAMS + 10,
        "pyacl_rt._completion._on_finalize": P.PRIORITY_STREAMS + 20,
        "pyacl_rt._watch.MarkerPool.drop_all": P.PRIORITY_STREAMS + 50,
        # binaries, after the streams that launched them
        "pyacl_rt._kernels.objectcode._release_binaries": P.PRIORITY_STREAMS + 60,
        "pyacl_rt._memory.records._release_memory": P.PRIORITY_MEMORY,
        "pyacl_rt._memory.engine._forget_peers": P.PRIORITY_MEMORY,
        "pyacl_rt._allocator._release": P.PRIORITY_MEMORY + 50,
        # the releases the closed finalize gate handed over, before the contexts go
        "pyacl_rt._runtime._run_late_releases": P.PRIORITY_CONTEXTS - 1,
        "pyacl_rt._context._release_contexts": P.PRIORITY_CONTEXTS,
        "pyacl_rt._device._release_devices": P.PRIORITY_DEVICES,
    }
    # the one tie: the copy engine (registered after the records it imports) forgets
    # its peer cache before the memory is released
    names = [n for _p, n in _runtime.release_hooks.priorities()]
    assert names.index("_forget_peers") < names.index("_release_memory")


def test_package_fork_hooks_priorities() -> None:
    got = _registered(_hooks.fork_hooks)
    runtime_first = got.pop("pyacl_rt._runtime._after_fork_in_child")
    assert runtime_first == P.PRIORITY_FIRST
    assert min(got.values()) > runtime_first  # the runtime marks the child first
    assert got["pyacl_rt._releaser._after_fork_in_child"] == P.PRIORITY_FIRST + 10
    assert got["pyacl_rt._device._after_fork_in_child"] == P.PRIORITY_DEVICES
    assert got["pyacl_rt._memory.records._after_fork_in_child"] == P.PRIORITY_MEMORY
    assert got["pyacl_rt._allocator._after_fork_in_child"] == P.PRIORITY_MEMORY + 50


def test_one_fork_handler_in_the_package() -> None:
    """Every module registers into _hooks.fork_hooks; only _hooks calls
    os.register_at_fork (the handlers used to run in import order)."""
    callers = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "register_at_fork"
            ):
                callers.append(path.relative_to(PKG).as_posix())
    assert callers == ["_hooks.py"]


def test_settle_hooks_priorities() -> None:
    """runtime.settle(), the one reset between tests: streams and devices, then the
    releaser, deferred frees, pooled marker events, the allocator caches."""
    assert [(p, n) for p, n in _runtime.settle_hooks.priorities()] == [
        (P.PRIORITY_STREAMS, "_settle"),
        (P.PRIORITY_STREAMS + 50, "_settle"),
        (P.PRIORITY_MEMORY, "_settle"),
        (P.PRIORITY_MEMORY + 10, "MarkerPool.drop_all"),
        (P.PRIORITY_MEMORY + 50, "_settle"),
    ]
    assert [h.fn.__module__ for h in _runtime.settle_hooks.hooks()] == [
        "pyacl_rt._stream",
        "pyacl_rt._releaser",
        "pyacl_rt._memory.records",
        "pyacl_rt._watch",
        "pyacl_rt._memory.stats",
    ]
