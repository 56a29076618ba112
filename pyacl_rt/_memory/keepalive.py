"""What a memory operation leaves behind: streams noted on owned memory, foreign objects
kept alive until async work completed, and the waits before host-side work.

* :func:`note` - remember that a stream used an allocation (freeing it waits for
  that stream; the hot path compares ``m.last`` with the stream's state token first);
* :func:`finish` - after enqueueing an operation: note the stream on owned memory,
  then either keep the foreign objects (numpy arrays, bytearrays ...) alive on the
  stream until the work completed (``Stream.keep_alive``, async) or wait and release
  them (sync); a wait that fails strands them for the life of the process rather than
  let the device write into freed memory;
* :func:`host_wait` - before a host-side copy or memset (``memmove`` / ``memset``):
  wait for the given stream and the pending work on the owned memory involved.

Layer 6 (part of :mod:`pyacl_rt._memory`): imports layers 1-5, ``records`` and ``args``.
"""

from __future__ import annotations

import weakref

from .._state import current, refuse_in_callback
from .._stream import Stream
from .._syncdebug import check_sync, sync_debug_active
from .args import Side
from .records import Mem, wait_streams
from .registry import memory

__all__: list[str] = []

_wref = weakref.ref


def note(m: Mem, stream: Stream) -> None:
    """Remember that ``stream`` used ``m`` (slow part of the hot-path check).

    ``m.last`` is the stream's private state object: unique per Stream object and cheap
    to compare, and holding it does not keep the Stream alive (``m.streams`` holds
    weak references, which :func:`~pyacl_rt._memory.records.wait_streams` uses)."""
    m.last = stream.stream_state
    r = _wref(stream)
    # Reading m.streams also has the garbage collector track the record (m.last may close
    # a reference cycle through the stream's keep-alive list; see pyacl_rt/_memcore.c).
    if r not in m.streams:
        m.streams.append(r)


def host_wait(sides: tuple[Side, ...], stream: object) -> None:
    """Before a host-side operation: wait for the given stream and for pending async
    work on the owned buffers involved."""
    if stream is not None:
        if not isinstance(stream, Stream):
            raise TypeError(f"stream must be a Stream or None, not {type(stream).__name__}")
        stream.synchronize()
    for side in sides:
        m = side.m
        if m is not None and m.streams:
            if sync_debug_active():
                check_sync("waiting for the work pending on the buffer")
            with current():
                if not wait_streams(m, forget=False):
                    refuse_in_callback("a host-side copy or memset of memory with pending work")


def finish(st: Stream, sides: tuple[Side, ...], non_blocking: bool) -> None:
    """After enqueueing on ``st``: note the stream on owned memory, keep foreign
    objects alive (async) or wait and release them (sync)."""
    tok = st.stream_state
    foreign: list[object] = []
    for side in sides:
        m = side.m
        if m is not None:
            if m.last is not tok:
                note(m, st)
        elif side.cd is not None:
            foreign.append(side.cd)
        # The stream is noted: from now on freeing the memory waits for it.
        side.unhold()
    if non_blocking:
        if foreign:
            st.keep_alive(tuple(foreign))
        return
    try:
        st.synchronize()
    except BaseException:
        # The copy may still be queued (e.g. a device fault): never release memory
        # the device might still write.
        if foreign:
            try:
                st.keep_alive(tuple(foreign))
            except BaseException:
                memory.stranded.append(tuple(foreign))
        raise
    for side in sides:
        side.release()
