"""The shared kernel of the object layers (pyacl_rt._state): the context guard
``current`` / ``restore_context`` and ``CtxRef.ensure_current``."""

from __future__ import annotations

from typing import Any

import pytest

import pyacl_rt
from pyacl_rt import _state
from pyacl_rt._state import _local, current, restore_context


def _thread_ctx() -> int:
    return int(pyacl_rt.lowlevel.fast.get_current_context())


def test_current_installs_and_restores(mock_loaded: Any) -> None:
    pyacl_rt.set_device(0)
    primary = _local.st.ctx
    assert primary is not None
    with pyacl_rt.Context(0) as other:
        pass
    ref = other._ref
    with pyacl_rt.Context(0) as c:
        inner = c._ref
        with current(ref) as got:
            assert got is ref and _local.st.ctx is ref and _thread_ctx() == ref.handle
        assert _local.st.ctx is inner and _thread_ctx() == inner.handle
    other.close()


def test_current_none_only_saves_and_restores(mock_loaded: Any) -> None:
    pyacl_rt.set_device(0)
    primary = _local.st.ctx
    assert primary is not None
    with pyacl_rt.Context(0) as c, current() as got:
        assert got is None and _local.st.ctx is c._ref
        primary.make_current()  # something inside switches
    # leaving `with c:` restored the primary; the guard restored c's context meanwhile
    assert _local.st.ctx is primary


def test_current_restores_after_an_exception(mock_loaded: Any) -> None:
    pyacl_rt.set_device(0)
    primary = _local.st.ctx
    c = pyacl_rt.Context(0)
    with pytest.raises(KeyError), current(c._ref):
        assert _local.st.ctx is c._ref
        raise KeyError("body")
    assert _local.st.ctx is primary and _thread_ctx() == primary.handle  # type: ignore[union-attr]
    c.close()


def test_restore_never_raises_and_clears_the_cache(
    mock_loaded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing aclrtSetCurrentContext while restoring neither masks the block's
    outcome nor leaves a wrong cache: the next call re-installs its context."""
    pyacl_rt.set_device(0)
    primary = _local.st.ctx
    assert primary is not None
    c = pyacl_rt.Context(0)
    with current(c._ref):
        monkeypatch.setattr(_state, "_aclrtSetCurrentContext", lambda handle: 107002)
    assert _local.st.ctx is None  # the cache was cleared, nothing raised
    monkeypatch.undo()
    primary.ensure_current()
    assert _local.st.ctx is primary and _thread_ctx() == primary.handle
    c.close()


def test_restore_context_leaves_dead_and_unchanged_contexts_alone(mock_loaded: Any) -> None:
    pyacl_rt.set_device(0)
    primary = _local.st.ctx
    assert primary is not None
    restore_context(None)
    restore_context(primary)
    assert _local.st.ctx is primary
    c = pyacl_rt.Context(0)
    ref = c._ref
    c.close()  # ref is dead now
    restore_context(ref)
    assert _local.st.ctx is primary


def test_ensure_current_is_one_compare_on_a_hit(
    mock_loaded: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pyacl_rt.set_device(0)
    primary = _local.st.ctx
    assert primary is not None
    calls: list[int] = []
    monkeypatch.setattr(_state, "_aclrtSetCurrentContext", lambda h: calls.append(h) or 0)
    primary.ensure_current()
    assert calls == []
    _local.st.ctx = None
    primary.ensure_current()
    assert calls == [primary.handle] and _local.st.ctx is primary
