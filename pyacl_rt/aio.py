"""asyncio forms of the calls that wait for the device (``from pyacl_rt import aio``).

``await event`` and ``await stream`` work directly (:class:`pyacl_rt.Event`,
:class:`pyacl_rt.Stream`); this module adds the awaitable twins of the blocking calls,
named like them::

    await aio.synchronize(s, timeout=500)      # Stream.synchronize(timeout=500)
    data = await aio.copy_to_host(buf)         # buf.copy_to_host()
    await aio.copy_from_host(buf, arr)         # buf.copy_from_host(arr)
    await aio.copy(dst, src)                   # pyacl_rt.copy(dst, src)

They enqueue the work on a stream (default: the current stream of the buffer's device)
and wait in the running loop without blocking it: the runtime reports completion
through a C host callback that signals an eventfd the loop reads (like ``await
event``: no GIL needed on the way). So they pass sync-debug mode ``"error"``. Cancelling
one (``task.cancel()``, ``asyncio.wait_for``) stops the waiting only: work already
enqueued runs to completion and what it uses is kept alive until then.

Other frameworks (trio, anyio, a GUI loop) adapt the same primitive:
:meth:`pyacl_rt.Event.add_done_callback` or the :class:`concurrent.futures.Future`
of :meth:`pyacl_rt.Event.as_future` / :meth:`pyacl_rt.Stream.as_future`.

Public module (floor 8): imports the package's lower floors; asyncio on first use.
"""

from __future__ import annotations

from typing import Any, cast

from . import errors
from ._args import index_arg, timeout_ms_arg
from ._event import Event
from ._memory import DeviceBuffer, HostBuffer
from ._memory import copy as _copy
from ._memory.engine import BufferLike
from ._stream import Stream, current_stream

__all__ = ["copy", "copy_from_host", "copy_to_host", "synchronize"]


async def synchronize(
    target: Stream | Event | None = None, *, timeout: float | None = None
) -> None:
    """Wait until ``target`` (a :class:`~pyacl_rt.Stream`, an :class:`~pyacl_rt.Event`;
    default: the current stream) is done, without blocking the loop.

    ``timeout`` in milliseconds (as ``synchronize(timeout=...)``): on expiry
    :class:`~pyacl_rt.errors.SyncTimeoutError` (a ``TimeoutError``) is raised and the
    device work goes on. A failed stream raises its mapped error.
    """
    if target is None:
        target = current_stream()
    elif not isinstance(target, (Stream, Event)):
        raise TypeError(
            f"aio.synchronize(): target must be a Stream, an Event or None, "
            f"not {type(target).__name__}"
        )
    ms = None if timeout is None else timeout_ms_arg(timeout)
    if ms is None:
        await target  # a Stream raises the mapped error of a task that failed
        return
    import asyncio

    try:
        await asyncio.wait_for(_awaited(target), ms / 1000.0)
    except TimeoutError:
        raise errors.SyncTimeoutError(
            f"aio.synchronize(): {target!r} was not done after {ms} ms (the device work goes on)",
            function="aio.synchronize",
            explanation="",
        ) from None


async def _awaited(target: Stream | Event) -> None:
    await target


def _stream_of(stream: Stream | None, *objs: object) -> Stream | None:
    """The stream a copy of ``objs`` runs on: ``stream``, else the current stream of
    the first device buffer; None when no side is device memory."""
    if stream is not None:
        return stream
    for obj in objs:
        if isinstance(obj, DeviceBuffer):
            return current_stream(obj.device_index)
    return None


async def copy(
    dst: DeviceBuffer | HostBuffer,
    src: DeviceBuffer | HostBuffer,
    nbytes: int | None = None,
    *,
    dst_offset: int = 0,
    src_offset: int = 0,
    stream: Stream | None = None,
) -> None:
    """:func:`pyacl_rt.copy` without blocking the loop: enqueue the copy on ``stream``
    (default: the current stream of the device side), then wait for that stream.

    Both sides are :class:`~pyacl_rt.DeviceBuffer` or pinned
    :class:`~pyacl_rt.HostBuffer` (a copy from or to pageable host memory waits in the
    runtime: use :func:`copy_to_host` / :func:`copy_from_host`, which stage it)."""
    for name, obj in (("dst", dst), ("src", src)):
        if not isinstance(obj, (DeviceBuffer, HostBuffer)):
            raise TypeError(
                f"aio.copy(): {name} must be a DeviceBuffer or a HostBuffer, not "
                f"{type(obj).__name__} (pageable host memory: use aio.copy_to_host / "
                "aio.copy_from_host)"
            )
    st = _stream_of(stream, dst, src)
    if st is None:  # host to host: no device involved
        _copy(dst, src, nbytes, dst_offset=dst_offset, src_offset=src_offset)
        return
    _copy(
        dst,
        src,
        nbytes,
        dst_offset=dst_offset,
        src_offset=src_offset,
        stream=st,
        non_blocking=True,
    )
    await synchronize(st)


async def copy_to_host(
    src: DeviceBuffer,
    dst: BufferLike | None = None,
    *,
    offset: int = 0,
    stream: Stream | None = None,
) -> Any:
    """:meth:`DeviceBuffer.copy_to_host` without blocking the loop: copy ``src`` (from
    ``offset``) into ``dst`` (default: a new ``bytearray`` of the remaining bytes) on
    ``stream`` and return ``dst`` once it arrived. Pageable ``dst`` memory is staged
    through a pinned block of the host pool (a copy into pageable memory would make
    the runtime wait)."""
    if not isinstance(src, DeviceBuffer):
        raise TypeError(f"aio.copy_to_host(): src must be a DeviceBuffer, not {type(src).__name__}")
    off = _offset_arg(offset, src.nbytes)
    st = _stream_of(stream, src)
    if isinstance(dst, HostBuffer):
        src.copy_to_host_async(dst, st, offset=off)
        await synchronize(st)
        return dst
    if dst is None:
        dst = bytearray(src.nbytes - off)
    with memoryview(cast(Any, dst)) as view, view.cast("B") as out:
        n = out.nbytes
        if n == 0:
            return dst
        stage = HostBuffer(n)
        try:
            src.copy_to_host_async(stage, st, offset=off)
            await synchronize(st)
            with memoryview(stage) as mv:
                out[:] = mv
        finally:
            stage.close()  # a pooled block: reused once the stream passed it
    return dst


async def copy_from_host(
    dst: DeviceBuffer, src: BufferLike, *, offset: int = 0, stream: Stream | None = None
) -> None:
    """:meth:`DeviceBuffer.copy_from_host` without blocking the loop: copy all of
    ``src`` into ``dst`` at ``offset`` on ``stream`` and return once it arrived.
    Pageable ``src`` memory is staged through a pinned block of the host pool."""
    if not isinstance(dst, DeviceBuffer):
        raise TypeError(
            f"aio.copy_from_host(): dst must be a DeviceBuffer, not {type(dst).__name__}"
        )
    st = _stream_of(stream, dst)
    if not isinstance(src, HostBuffer):
        with memoryview(cast(Any, src)) as view, view.cast("B") as data:
            if data.nbytes == 0:
                return
            stage = HostBuffer(data.nbytes)
            try:
                with memoryview(stage) as mv:
                    mv[:] = data
                dst.copy_from_host_async(stage, st, offset=offset)
            finally:
                stage.close()  # a pooled block: reused once the stream passed it
    else:
        dst.copy_from_host_async(src, st, offset=offset)
    await synchronize(st)


def _offset_arg(offset: object, nbytes: int) -> int:
    """``offset`` checked as a byte offset into ``nbytes`` bytes."""
    off = index_arg(offset, "aio.copy_to_host(): offset")
    if not 0 <= off <= nbytes:
        raise ValueError(f"aio.copy_to_host(): offset {off} is outside the buffer ({nbytes} bytes)")
    return off
