"""Which streams are capturing a graph right now, so that lower layers stay capture-aware.

The graph layer (:mod:`pyacl_rt._graph`) registers a :class:`Capture` for the stream it
calls ``aclmdlRICaptureBegin`` on and removes it after ``aclmdlRICaptureEnd``: pyacl_rt
tracks its own Begin/End instead of asking the runtime per call. While nothing
captures, the checks below are one dict-truthiness test.

What depends on it:

* ``Stream.keep_alive`` on a capturing stream (or on a side stream that joined the
  capture) records no marker event (querying an event recorded in a capture is
  forbidden, 107028): the objects go to :attr:`Capture.keep`, which the graph holds
  until :meth:`NPUGraph.reset` - the graph's tasks use their addresses at every replay.
* the caching allocator serves allocations on a capturing stream from the graph's
  private pool (:attr:`Capture.pool`) and defers frees of blocks that a capture used to
  the graph's reset (:attr:`Capture.deferred`), never recording guard events on a
  capturing stream.

Floor 4 (devices and contexts): imports floors 1-3 and ``_state`` only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Final

from . import lowlevel
from ._raw._abi_runtime import CONSTANTS as _C
from ._state import lib, local

__all__ = [
    "Capture",
    "begin",
    "by_stream",
    "end",
    "find",
    "graph_streams",
    "retire",
    "settle",
    "used_by",
]

STATUS_ACTIVE: Final = _C["ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE"]


class Capture:
    """One capture in progress (and, after it ended, what its graph must keep)."""

    __slots__ = ("deferred", "keep", "model", "pool", "stream", "streams", "thread")

    def __init__(self, stream: int, pool: Any) -> None:
        #: the capturing (origin) stream handle
        self.stream = stream
        #: the model handle (``aclmdlRI``) being captured, 0 until known
        self.model = 0
        #: the graph-private allocator pool (an object of the allocator layer) or None
        self.pool = pool
        #: objects kept alive until the graph is reset (buffers the tasks use)
        self.keep: list[object] = []
        #: frees of memory the graph's streams used, run at the graph's reset
        self.deferred: list[Callable[[], None]] = []
        #: the thread that began the capture
        self.thread = threading.get_ident()
        #: handles of the streams the graph's tasks were captured on (origin first)
        self.streams: list[int] = [stream]


#: capturing stream handle -> its Capture (only pyacl_rt's own captures)
by_stream: dict[int, Capture] = {}
_by_model: dict[int, Capture] = {}
#: stream handle -> the live graphs captured on it (see :func:`settle`)
graph_streams: dict[int, list[Capture]] = {}
_lock = threading.Lock()


def begin(cap: Capture) -> None:
    """Register ``cap`` (right after ``aclmdlRICaptureBegin`` succeeded)."""
    with _lock:
        by_stream[cap.stream] = cap
        if cap.model:
            _by_model[cap.model] = cap


def end(cap: Capture) -> None:
    """Forget ``cap`` as capturing (after ``aclmdlRICaptureEnd``, success or not)."""
    with _lock:
        if by_stream.get(cap.stream) is cap:
            del by_stream[cap.stream]
        if _by_model.get(cap.model) is cap:
            del _by_model[cap.model]


def settle(cap: Capture) -> None:
    """The capture ended in a graph: memory its streams used is freed only with it."""
    with _lock:
        for h in cap.streams:
            graph_streams.setdefault(h, []).append(cap)


def retire(cap: Capture) -> None:
    """The graph of ``cap`` is gone (its replays finished): forget its streams."""
    with _lock:
        for h in cap.streams:
            caps = graph_streams.get(h)
            if caps is not None and cap in caps:
                caps.remove(cap)
                if not caps:
                    del graph_streams[h]


def used_by(refs: list[Any]) -> Capture | None:
    """A capture running, or a live graph, whose streams include one of ``refs``
    (weak references to Streams, as noted on an allocation), else None: freeing that
    memory now could hand it to someone else while the graph's replays still use it.
    Conservative: any use on such a stream counts."""
    for r in refs:
        s = r()
        if s is None or s.closed:
            continue
        h = s.handle
        cap = find(h) if by_stream else None
        if cap is not None:
            return cap
        caps = graph_streams.get(h)
        if caps:
            return caps[-1]
    return None


def find(handle: int) -> Capture | None:
    """The capture ``handle`` belongs to (as origin, or a side stream that joined one
    of pyacl_rt's captures), else None. Costs nothing while no capture is active."""
    if not by_stream:
        return None
    cap = by_stream.get(handle)
    if cap is not None or not handle:
        return cap
    return _joined(handle)


def _joined(handle: int) -> Capture | None:
    """Ask the runtime whether ``handle`` joined a capture (only during captures)."""
    s = local.st.scratch
    if lib.aclmdlRICaptureGetInfo(handle, s.i32, s.uptr):
        lowlevel.clear_error()
        return None
    if s.i32[0] != STATUS_ACTIVE:
        return None
    return _by_model.get(int(s.uptr[0]))
