"""Copy arguments -> addresses, for :mod:`pyacl_rt._memory`, checked before any C call.

* :func:`_int_arg` (:func:`pyacl_rt._args.size_arg`): sizes, offsets and pitches are
  ints (``__index__`` accepted, e.g. ``numpy.int64``; ``bool`` refused), ``>= 0`` and
  ``<= 2**64 - 1``; messages name the argument.
* :func:`resolve`: an owned buffer gives its int address (refused once closed) and
  is marked in use (``Mem.hold()``) until :meth:`Side.release` / :meth:`Side.unhold`:
  meanwhile ``close()`` on another thread raises ``BufferError`` instead of freeing
  memory a host-side ``memmove``/``memset`` (GIL released) is still touching; any
  other object must support the buffer protocol and be C-contiguous, and writable
  when it is a destination (``TypeError`` for bytes, read-only memoryviews and numpy
  arrays with ``writeable=False``). Its address comes from one ``ffi.from_buffer``
  per call, which also holds the export (a bytearray cannot be resized meanwhile)
  until :meth:`Side.release` or until the object is no longer needed by an async copy.
* :func:`offsets`: ``nbytes`` / offsets against both sides.
* :class:`ReleaseOnExit`: ``with ReleaseOnExit(d, s):`` releases the sides when the
  block raises (``always=True``: also when it returns) - the one place that undoes a
  :func:`resolve`.

Layer 6 (part of :mod:`pyacl_rt._memory`): imports layers 1-5 and ``records``.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from .._args import size_arg
from ..lowlevel import ffi
from .records import Mem, hold, raise_closed

_int_arg = size_arg


class Side:
    """One resolved side of a copy: address, size, device, and what owns the memory."""

    __slots__ = ("cd", "dev", "held", "m", "mv", "n", "obj", "ptr")

    def __init__(self) -> None:
        self.ptr = 0
        self.n = 0
        self.dev = -1
        self.m: Mem | None = None
        self.cd: Any = None
        self.mv: memoryview | None = None
        self.obj: object = None
        self.held = False

    def unhold(self) -> None:
        """Drop the in-use mark of an owned buffer (once)."""
        if self.held:
            self.held = False
            m = self.m
            assert m is not None
            m.unhold()

    def release(self) -> None:
        """Drop the in-use mark of an owned buffer and release the buffer export of a
        foreign object (sync paths, failures)."""
        if self.held:
            self.unhold()
        cd = self.cd
        if cd is not None:
            self.cd = None
            ffi.release(cd)
        mv = self.mv
        if mv is not None:
            self.mv = None
            mv.release()


def resolve(obj: object, name: str, writable: bool) -> Side:
    side = Side()
    side.obj = obj
    m = getattr(obj, "mem", None)
    if isinstance(m, Mem):  # a DeviceBuffer (or view) or a HostBuffer
        p = hold(m)
        if not p:
            raise_closed(m, f"{name} ({type(obj).__name__})")
        side.m = m
        side.held = True
        owned: Any = obj
        side.ptr = p + owned.mem_offset
        side.n = owned.window_nbytes
        side.dev = m.device
        return side
    try:
        mv = memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{name} must be a DeviceBuffer, a HostBuffer or an object supporting the buffer "
            f"protocol (numpy array, bytearray, memoryview, ...), not {type(obj).__name__}"
        ) from None
    if writable and mv.readonly:
        mv.release()
        raise TypeError(
            f"{name} is read-only ({type(obj).__name__}): cannot write into it "
            "(bytes, a read-only memoryview or a numpy array with writeable=False)"
        )
    if not mv.c_contiguous:
        mv.release()
        raise ValueError(
            f"{name} is not C-contiguous: copies need one contiguous block of memory "
            "(use numpy.ascontiguousarray)"
        )
    side.n = mv.nbytes
    side.mv = mv
    if side.n:
        try:
            cd = ffi.from_buffer("char[]", mv, require_writable=writable)
        except (TypeError, ValueError) as exc:
            mv.release()
            raise TypeError(f"{name}: cannot get its memory ({exc})") from None
        side.cd = cd
        side.ptr = int(ffi.cast("uintptr_t", cd))
    return side


def offsets(
    d: Side, s: Side, nbytes: object, dst_offset: object, src_offset: object
) -> tuple[int, int, int]:
    doff = _int_arg(dst_offset, "dst_offset")
    soff = _int_arg(src_offset, "src_offset")
    if doff > d.n:
        raise ValueError(f"dst_offset {doff} is past the end of dst ({d.n} bytes)")
    if soff > s.n:
        raise ValueError(f"src_offset {soff} is past the end of src ({s.n} bytes)")
    if nbytes is None:
        n = s.n - soff
        if n > d.n - doff:
            raise ValueError(
                f"src has {n} bytes from src_offset {soff} but dst has only {d.n - doff} bytes "
                f"from dst_offset {doff}; pass nbytes to copy part of it"
            )
    else:
        n = _int_arg(nbytes, "nbytes")
        if n > s.n - soff:
            raise ValueError(
                f"nbytes {n} runs past the end of src ({s.n} bytes, src_offset {soff})"
            )
        if n > d.n - doff:
            raise ValueError(
                f"nbytes {n} runs past the end of dst ({d.n} bytes, dst_offset {doff})"
            )
    return n, doff, soff


def check_2d(
    d: Side,
    s: Side,
    dpitch: object,
    spitch: object,
    width: object,
    height: object,
    dst_offset: object,
    src_offset: object,
) -> tuple[int, int, int, int, int, int]:
    """The arguments of a 2D copy, checked against both sides:
    ``(dpitch, spitch, width, height, dst_offset, src_offset)``."""
    dp = _int_arg(dpitch, "dpitch")
    sp = _int_arg(spitch, "spitch")
    w = _int_arg(width, "width")
    h = _int_arg(height, "height")
    doff = _int_arg(dst_offset, "dst_offset")
    soff = _int_arg(src_offset, "src_offset")
    if w > dp:
        raise ValueError(f"width {w} is larger than dpitch {dp}")
    if w > sp:
        raise ValueError(f"width {w} is larger than spitch {sp}")
    if doff > d.n:
        raise ValueError(f"dst_offset {doff} is past the end of dst ({d.n} bytes)")
    if soff > s.n:
        raise ValueError(f"src_offset {soff} is past the end of src ({s.n} bytes)")
    if w and h:
        dext = (h - 1) * dp + w
        sext = (h - 1) * sp + w
        if dext > d.n - doff:
            raise ValueError(
                f"(height - 1) * dpitch + width = {dext} bytes run past the end of dst "
                f"({d.n} bytes, dst_offset {doff})"
            )
        if sext > s.n - soff:
            raise ValueError(
                f"(height - 1) * spitch + width = {sext} bytes run past the end of src "
                f"({s.n} bytes, src_offset {soff})"
            )
    return dp, sp, w, h, doff, soff


def memset_range(b: Side, nbytes: object, offset: object) -> tuple[int, int]:
    """``(nbytes, offset)`` of a memset of ``b``, checked (``None`` = to the end)."""
    off = _int_arg(offset, "offset")
    if off > b.n:
        raise ValueError(f"offset {off} is past the end of buf ({b.n} bytes)")
    if nbytes is None:
        return b.n - off, off
    n = _int_arg(nbytes, "nbytes")
    if n > b.n - off:
        raise ValueError(f"nbytes {n} runs past the end of buf ({b.n} bytes, offset {off})")
    return n, off


def resolve_pair(dst: object, src: object) -> tuple[Side, Side]:
    """Both sides of a copy (``dst`` writable); nothing stays exported on failure."""
    d = resolve(dst, "dst", True)
    with ReleaseOnExit(d):
        s = resolve(src, "src", False)
    return d, s


class ReleaseOnExit:
    """``with ReleaseOnExit(*sides):`` releases every side if the block raises (any
    exception, also ``KeyboardInterrupt``) and lets the exception propagate;
    ``always=True`` releases them when the block returns too. Releasing is idempotent,
    so nested uses are fine."""

    __slots__ = ("always", "sides")

    def __init__(self, *sides: Side, always: bool = False) -> None:
        self.sides = sides
        self.always = always

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None or self.always:
            for side in self.sides:
                side.release()
