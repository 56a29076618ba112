"""The leak check of the pytest plugin: the mock's live counts before and after a test,
and, when they differ, which pyacl_rt objects are alive and where they were created.

Counts come from the mock's introspection (:class:`pyacl_rt.mock.MockControl`), per
device: contexts and streams the program created, events, allocations and bytes, the
runtime's own default contexts and streams; host allocations and bytes. Before the
comparison, what pyacl_rt legitimately keeps between calls is dropped (the thread's
selection and current streams, pooled streams, keep-alive lists, deferred releases,
pooled marker events, the allocator caches).

Creation sites are the allocation tracebacks of :mod:`tracemalloc`, which the plugin
starts with ``--npu-leak-frames N`` (off by default: tracemalloc records every Python
allocation, which slows allocation-heavy tests), from the end of collection to the end
of the session (imports and other plugins' summaries are not traced); nothing is recorded
by pyacl_rt itself, so a program outside pytest pays nothing. Without it the report
names the live objects and says how to see where they were created.
"""

from __future__ import annotations

import gc
import linecache
import sys
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pluggy
import pytest

__all__ = ["LeakCheck", "Snapshot", "mock_in_process", "settle"]

_DEVICE_STATS = (
    "contexts",
    "streams",
    "events",
    "allocations",
    "bytes",
    "default_contexts",
    "default_streams",
)
_HOST_STATS = ("host_allocations", "host_bytes")
#: Frames in pyacl_rt itself and in pytest's machinery are left out of creation
#: tracebacks.
_HIDDEN = (
    str(Path(__file__).resolve().parent.parent) + "/",
    str(Path(pytest.__file__).resolve().parent.parent / "_pytest") + "/",
    str(Path(pluggy.__file__).resolve().parent) + "/",
)

Snapshot = dict[object, dict[str, int]]


def mock_in_process() -> Any:
    """``pyacl_rt.lowlevel`` if a library is loaded in this process and is the mock,
    else None (nothing is loaded by asking)."""
    if "pyacl_rt.lowlevel" not in sys.modules:
        return None
    from .. import lowlevel

    if not lowlevel.is_loaded() or not lowlevel.is_mock_library():
        return None
    return lowlevel


def _snapshot() -> Snapshot:
    from ..mock import mock_control

    mc = mock_control()
    snap: Snapshot = {d: {k: mc.stat(k, d) for k in _DEVICE_STATS} for d in range(mc.device_count)}
    snap["host"] = {k: mc.stat(k) for k in _HOST_STATS}
    return snap


def _zero_snapshot() -> Snapshot:
    from ..mock import mock_control

    snap: Snapshot = {
        d: dict.fromkeys(_DEVICE_STATS, 0) for d in range(mock_control().device_count)
    }
    snap["host"] = dict.fromkeys(_HOST_STATS, 0)
    return snap


def settle() -> None:
    """Drop what pyacl_rt legitimately keeps between tests (the thread's selection and
    current streams, pooled streams, keep-alive lists, deferred releases, pooled marker
    events, the allocator caches): pyacl_rt's one reset call,
    :func:`pyacl_rt._runtime.settle`."""
    from .. import _runtime as runtime

    runtime.settle()


def _kept_companions() -> dict[int, int]:
    """device -> live companion streams of default and pooled streams (awaiting such a
    stream's events gives it one, kept as long as the stream: until its context goes)."""
    from .. import _stream as S

    out: dict[int, int] = {}
    for st in S.live_streams.snapshot():
        if st.kind == "owned":
            continue
        for side in (st.stream_state.side, st.stream_state.waiter):
            if side is not None and not side.closed:
                out[st.dev_index] = out.get(st.dev_index, 0) + 1
    return out


def _primaries() -> set[int]:
    from .. import _device as D

    return set(D.primaries)


@dataclass
class LeakCheck:
    """One test's check: :meth:`start` before it, :meth:`finish` after it."""

    before: Snapshot | None = None
    generation: int = -1
    primaries: set[int] = field(default_factory=set)
    companions: dict[int, int] = field(default_factory=dict)
    armed: int = 0

    def start(self) -> None:
        """Re-initialise a finalized runtime (tests start with a usable one) and take
        the counts; nothing when the mock is not loaded in this process."""
        if mock_in_process() is None:
            return
        from .. import _runtime as runtime

        if runtime.is_finalized():
            runtime.init()
        runtime.ensure_initialized()
        gc.collect()
        self.before = _snapshot()
        self.generation = runtime.generation()
        self.primaries = _primaries()
        self.companions = _kept_companions()
        self.armed = _armed_records()

    def finish(self) -> str | None:
        """The leak report, or None when the counts are back where they were.

        Allowed: the primary context and default stream of a device used for the first
        time (pyacl_rt keeps them until finalize); a test that finalized the runtime
        is compared with an empty runtime plus the primaries of the current one."""
        if mock_in_process() is None:
            return None
        from .. import _callbacks as CB
        from .. import _runtime as runtime
        from .._memory.registry import memory
        from ..mock import mock_control

        settle()
        before, primaries = self.before, self.primaries
        if before is None or runtime.generation() != self.generation:
            before, primaries = _zero_snapshot(), set()
        after = _snapshot()
        expected = {key: dict(counts) for key, counts in before.items()}
        for d in _primaries() - primaries:
            if d in expected:
                expected[d]["default_contexts"] += 1
                expected[d]["default_streams"] += 1
        if runtime.generation() == self.generation:
            # awaiting a default / pooled stream's events gave it a companion stream,
            # kept with it (pyacl_rt._event, "companion streams"), like the stream itself
            for d, n in _kept_companions().items():
                if d in expected:
                    expected[d]["streams"] += n - self.companions.get(d, 0)
        diff = {
            key: {
                k: (expected[key].get(k, 0), v)
                for k, v in counts.items()
                if v != expected[key].get(k, 0)
            }
            for key, counts in after.items()
            if counts != expected.get(key)
        }
        problems: list[str] = []
        if diff:
            problems.append(_describe(diff))
            problems.append("mock leak report: " + mock_control().leak_report().strip())
            problems.extend(_live_objects({k for counts in diff.values() for k in counts}))
        if CB.pending_count():
            problems.append(f"{CB.pending_count()} host callback(s) still pending")
        if memory.deferred:
            problems.append(f"{len(memory.deferred)} deferred buffer release(s) left")
        armed = _armed_records() - (self.armed if runtime.generation() == self.generation else 0)
        if armed > 0:
            problems.append(
                f"{armed} await(s) still armed after the devices were synchronized: their "
                "device point was never reached (a stream held forever?)"
            )
        return "\n".join(problems) if problems else None


def _armed_records() -> int:
    """Awaits whose C completion is launched and has not run (process-wide)."""
    from .. import _reportcore

    return _reportcore.stats()[1]


def _describe(diff: dict[object, dict[str, tuple[int, int]]]) -> str:
    lines = ["pyacl_rt objects left alive by the test (mock live counts, expected -> now):"]
    for key, counts in diff.items():
        where = "host" if key == "host" else f"device {key}"
        parts = ", ".join(f"{k} {exp} -> {now}" for k, (exp, now) in counts.items())
        lines.append(f"  {where}: {parts}")
    return "\n".join(lines)


def _kinds() -> dict[str, tuple[type, ...]]:
    from .._context import Context
    from .._event import Event
    from .._memory import DeviceBuffer, HostBuffer
    from .._stream import Stream

    return {
        "contexts": (Context,),
        "streams": (Stream,),
        "events": (Event,),
        "allocations": (DeviceBuffer,),
        "bytes": (DeviceBuffer,),
        "host_allocations": (HostBuffer,),
        "host_bytes": (HostBuffer,),
    }


def _alive(obj: Any) -> bool:
    try:
        if obj.closed:
            return False
        if getattr(obj, "is_view", False):
            return False  # the allocation it views is what holds the memory
        kind = getattr(obj, "kind", "owned")
        return kind in ("owned", "external")
    except Exception:  # a half-built object: not reportable
        return False


def _live_objects(leaked_stats: set[str]) -> Iterator[str]:
    kinds = _kinds()
    wanted = tuple({t for stat in leaked_stats for t in kinds.get(stat, ())})
    if not wanted:
        return
    found = [o for o in gc.get_objects() if isinstance(o, wanted) and _alive(o)]
    if not found:
        yield "no live pyacl_rt object holds them (raw lowlevel handles, or C code)"
        return
    yield f"live pyacl_rt objects ({len(found)}):"
    for obj in found[:20]:
        yield f"  {obj!r} created at:"
        yield from ("    " + line for line in creation_site(obj))
    if len(found) > 20:
        yield f"  ... and {len(found) - 20} more"


def creation_site(obj: object) -> list[str]:
    """Where ``obj`` was created, innermost call last (frames inside pyacl_rt left
    out), from tracemalloc; a hint when tracing was off at the time."""
    tb = tracemalloc.get_object_traceback(obj) if tracemalloc.is_tracing() else None
    if tb is None:
        return ["(creation site not recorded: rerun with --npu-leak-frames 12)"]
    frames = [f for f in tb if not str(Path(f.filename).resolve()).startswith(_HIDDEN)]
    lines: list[str] = []
    for f in frames or list(tb):  # oldest frame first
        lines.append(f'File "{f.filename}", line {f.lineno}')
        src = linecache.getline(f.filename, f.lineno).strip()
        if src:
            lines.append(f"  {src}")
    return lines
