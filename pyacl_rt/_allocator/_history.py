"""Allocation history and snapshots in the format of torch's
``torch.cuda.memory._snapshot()`` (what PyTorch's memory visualizer,
https://pytorch.org/memory_viz, and ``torch.cuda._memory_viz`` read).

:func:`record_memory_history` turns recording on (``enabled="all"``: trace events and
the Python stack of each live block; ``"state"``: stacks only; ``None``: off).
:func:`snapshot` returns ``{"segments": [...], "device_traces": [[...] per device],
"allocator_settings": {...}}``; :func:`dump_snapshot` pickles it.

Segment: ``device, address, total_size, allocated_size, active_size, requested_size,
stream, segment_type ('small'/'large'), segment_pool_id, is_expandable, frames,
blocks``; block: ``address, size, requested_size, state ('active_allocated',
'active_pending_free', 'inactive'), frames``; trace entry: ``action ('alloc',
'free_requested', 'free_completed', 'segment_alloc', 'segment_free', 'oom'), addr,
size, stream, time_us, frames`` (plus ``device_free`` for 'oom'); frame:
``filename, line, name``.

Layer 7 (allocator): imports layers 1-6 only.
"""

from __future__ import annotations

import collections
import os
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from .. import _memcore
from .._cachecore import set_tracing
from ._graphpool import KEY_BASE as _GRAPH_POOL_KEYS

__all__ = ["dump_snapshot", "record_memory_history", "snapshot"]

_MAX_FRAMES = 64


class _State:
    __slots__ = ("frames", "max_entries", "stacks", "trace", "traces")

    def __init__(self) -> None:
        self.trace = False  # record device_traces
        self.stacks = False  # record frames of live blocks
        self.max_entries = sys.maxsize
        #: device -> trace entries (bounded by max_entries)
        self.traces: dict[int, collections.deque[dict[str, Any]]] = {}
        #: (device, address) -> frames of the live block / segment there
        self.frames: dict[tuple[int, int], list[dict[str, Any]]] = {}


state = _State()
#: True while anything is recorded (checked on the hot path).
enabled = False


def record_memory_history(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: object = None,
) -> None:
    """Start (or stop, ``enabled=None``) recording allocation history, like torch's
    ``torch.cuda.memory._record_memory_history``. ``enabled``: ``"all"`` (trace events
    plus stacks of live blocks) or ``"state"`` (stacks of live blocks only).
    ``context`` / ``stacks`` (``"python"`` / ``"all"``: Python frames are recorded)
    and ``device`` are accepted for compatibility; ``max_entries`` bounds each
    device's trace (oldest dropped)."""
    del context, device
    if enabled is not None and not isinstance(enabled, str):
        raise TypeError(f"enabled must be None, 'state' or 'all', not {type(enabled).__name__}")
    if not isinstance(stacks, str):
        raise TypeError(f"stacks must be 'python' or 'all', not {type(stacks).__name__}")
    if enabled not in (None, "all", "state"):
        raise ValueError(f"enabled must be None, 'state' or 'all', not {enabled!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks must be 'python' or 'all', not {stacks!r}")
    if isinstance(max_entries, bool) or not isinstance(max_entries, int):
        raise TypeError(f"max_entries must be an int, not {type(max_entries).__name__}")
    if max_entries < 1:
        raise ValueError(f"max_entries must be >= 1, got {max_entries}")
    state.trace = enabled == "all"
    state.stacks = enabled is not None
    state.max_entries = max_entries
    if enabled is None:
        state.frames.clear()
    else:
        for dev, q in list(state.traces.items()):
            state.traces[dev] = collections.deque(q, maxlen=max_entries)
    _set_enabled(enabled is not None)


def _set_enabled(on: bool) -> None:
    global enabled
    enabled = on
    set_tracing(on)  # raw handles take the traced Python path
    _memcore.set_tracing(on)  # so do DeviceBuffers


def frames(skip: int = 2) -> list[dict[str, Any]]:
    """The calling Python stack, innermost first (torch's frame dicts)."""
    out: list[dict[str, Any]] = []
    try:
        f: FrameType | None = sys._getframe(skip)
    except ValueError:
        return out
    while f is not None and len(out) < _MAX_FRAMES:
        code = f.f_code
        out.append({"filename": code.co_filename, "line": f.f_lineno, "name": code.co_name})
        f = f.f_back
    return out


def event(device: int, action: str, addr: int, size: int, stream: int, **extra: Any) -> None:
    """Record one trace entry (and the stack of a new block / segment)."""
    fr: list[dict[str, Any]] = []
    if state.stacks:
        key = (device, addr)
        if action in ("alloc", "segment_alloc"):
            fr = frames(3)
            if action == "alloc":
                state.frames[key] = fr
            else:
                state.frames[(device, -addr)] = fr
        elif action == "free_completed":
            state.frames.pop(key, None)
        elif action == "segment_free":
            state.frames.pop((device, -addr), None)
        elif action in ("free_requested", "oom"):
            fr = frames(3)
    if not state.trace:
        return
    q = state.traces.get(device)
    if q is None:
        q = state.traces[device] = collections.deque(maxlen=state.max_entries)
    entry: dict[str, Any] = {
        "action": action,
        "addr": addr,
        "size": size,
        "stream": stream,
        "time_us": time.time_ns() // 1000,
        "frames": fr,
    }
    entry.update(extra)
    q.append(entry)


_STATE_NAMES = ("inactive", "active_allocated", "active_pending_free")


def segment_dicts(
    device: int, segments: list[tuple[int, int, int, bool, list[tuple[int, int, int, int]]]]
) -> list[dict[str, Any]]:
    """torch's segment dicts from ``_cachecore.Core.segments()`` rows."""
    out = []
    for base, size, stream, small, blocks in segments:
        bl = []
        allocated = active = requested = 0
        for ptr, bsize, req, st in blocks:
            if st == 1:
                allocated += bsize
                requested += req
            if st:
                active += bsize
            bl.append(
                {
                    "address": ptr,
                    "size": bsize,
                    "requested_size": req if st else 0,
                    "state": _STATE_NAMES[st],
                    "frames": list(state.frames.get((device, ptr), [])) if st else [],
                }
            )
        out.append(
            {
                "device": device,
                "address": base,
                "total_size": size,
                "allocated_size": allocated,
                "active_size": active,
                "requested_size": requested,
                "stream": 0 if stream >= _GRAPH_POOL_KEYS else stream,
                "segment_type": "small" if small else "large",
                # torch's (0, n): the n-th graph-private pool (see _graphpool), else (0, 0)
                "segment_pool_id": (0, stream - _GRAPH_POOL_KEYS)
                if stream >= _GRAPH_POOL_KEYS
                else (0, 0),
                "is_expandable": False,
                "frames": list(state.frames.get((device, -base), [])),
                "blocks": bl,
            }
        )
    return out


def device_traces(ndevices: int) -> list[list[dict[str, Any]]]:
    """One list of trace entries per device 0..ndevices-1 (oldest first)."""
    n = max([ndevices, *(d + 1 for d in state.traces)])
    return [list(state.traces.get(d, ())) for d in range(n)]


def forget() -> None:
    """Drop recorded traces and stacks (finalize, fork); recording stays as set."""
    state.traces.clear()
    state.frames.clear()


#: Builds the snapshot: :func:`pyacl_rt._allocator.snapshot`, registered by the package
#: when it is imported (this module sits below it and must not import it back).
snapshot_builder: Callable[[], dict[str, Any]] | None = None


def snapshot() -> dict[str, Any]:
    """The snapshot (see the module docstring); filled in by the allocator package."""
    builder = snapshot_builder
    if builder is None:  # pragma: no cover - the package registers it at import
        raise RuntimeError("pyacl_rt._allocator is not imported: import pyacl_rt first")
    return builder()


def dump_snapshot(filename: str | os.PathLike[str] = "dump_snapshot.pickle") -> None:
    """Pickle :func:`snapshot` into ``filename`` (torch's ``_dump_snapshot``)."""
    import pickle

    if not isinstance(filename, (str, bytes, os.PathLike)):
        raise TypeError(f"filename must be a path, not {type(filename).__name__}")
    data = snapshot()
    with open(filename, "wb") as f:
        pickle.dump(data, f)
