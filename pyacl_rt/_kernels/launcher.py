"""``launch(stream, config, kernel, *args)``: pack the arguments by their type and
enqueue the kernel (``aclrtLaunchKernelWithConfig``) as one plain stream task.

Argument packing:

* a :class:`~pyacl_rt.DeviceBuffer` (or a view of one) passes its device address (8
  bytes); a :class:`~pyacl_rt.HostBuffer` is refused (pinned host memory is not
  reachable by a kernel). The stream is noted on
  the allocation, as copies do: freeing it waits for (native allocator) or is ordered
  after (caching allocator, cross-stream rule) the launch, so the memory outlives it;
* a numpy scalar (``numpy.uint32(n)``, ``numpy.float16(x)`` ...) or a ctypes scalar or
  structure (``ctypes.c_int64(n)``) passes its own bytes (its own width; every argument
  sits in a slot of its size rounded up to 8 bytes, so its alignment holds);
* a bare Python ``int``, ``float`` or ``bool`` is refused with a ``TypeError`` naming
  the argument: its width would be a guess.

The hot path allocates nothing it can avoid: each :class:`~pyacl_rt.Kernel` keeps, per
argument signature (the kinds of its arguments), a pool of packing plans; a plan owns an
``aclrtArgsHandle`` with one appended slot per argument and the byte image of what the
list holds, and one C call (``lowlevel.fast.launch_objects``) reads each buffer's
address, packs each scalar, updates the changed slots, finalizes and launches with the
GIL released once. A plan is taken from the pool
for the call and put back afterwards, so threads launching the same kernel never share
one (the pool grows to the number of concurrent launches; argument lists die with their
binary, as the runtime defines no destroy call).

Layer 7 (higher tools): imports layers 1-6 and :mod:`.objectcode`, :mod:`.config`.
"""

from __future__ import annotations

import struct
from typing import Final, NoReturn

from .. import _sanitize, lowlevel
from .._args import type_name
from .._memory.buffers import DeviceBuffer
from .._memory.keepalive import note
from .._memory.records import Mem, raise_closed
from .._state import check, fast, lib, local
from .._stream import Stream
from .config import LaunchConfig
from .objectcode import Kernel, ParamInfo

__all__ = ["launch"]

#: Gated (pyacl_rt._state): a launch racing with finalize is refused before the runtime.
_launch_objects = fast.launch_objects

#: Signature marker of an argument passed as its address (an owned buffer).
_BUF: Final = object()
_ENTRY: Final = struct.Struct("<QII8s")  # PlanEntry of _fastcall.c


class _Plan:
    """One reusable argument list of a kernel for one signature."""

    __slots__ = ("entries", "handle")

    def __init__(self, handle: int, entries: bytearray) -> None:
        self.handle = handle
        self.entries = entries


def launch(stream: Stream, config: LaunchConfig, kernel: Kernel, *args: object) -> None:
    """Enqueue ``kernel`` on ``stream`` with ``config.blocks`` blocks and ``args``.

    Returns at once (the launch is a task on the stream, in order with copies, events
    and host callbacks). Buffers pass their device address and are kept valid until the
    launch completed; numpy / ctypes scalars pass their own bytes; bare Python numbers
    are refused (``TypeError``). Errors the runtime reports at the call raise the
    matching :class:`~pyacl_rt.errors.AclError`; a kernel fault while running (on the
    mock: a twin that fails) is raised by the next ``Stream.synchronize()`` of that stream.
    """
    try:
        sig, pool = kernel.cur_plans  # one read: another thread may switch signatures
        bs = kernel.bin_state
        tok = stream.stream_state
        ctx = stream.ctx_ref
        blocks = config.num_blocks
        cfg = config.cfg_ptr
    except AttributeError:
        _launch_type_error(stream, config, kernel)
    try:
        plan = pool.pop()
    except IndexError:
        return _launch_slow(stream, config, kernel, args)
    try:
        if not bs.handle:
            kernel.code_ref.ensure_current()  # raises: the binary is closed
        if bs.last is not tok:
            _note_binary(stream, kernel)
        if local.st.ctx is not ctx:
            stream.ensure_current()
        if _sanitize.armed:
            _declare_windows(args)
        while True:
            # The argument loop runs in C: each buffer's address (its record's ptr +
            # its offset), each scalar packed by its type, then the launch.
            r = _launch_objects(
                kernel.func_handle, blocks, stream.raw_handle, cfg, plan.handle, plan.entries, sig,
                args, tok, _BUF,
            )  # fmt: skip
            if r is None:
                break
            if r >= 0:
                # Buffer r is new on this stream: check its device and note the stream
                # (freeing it now waits for the stream; the caching allocator orders
                # reuse after it), then launch. Noted first: harmless if the launch fails.
                a = args[r]
                _note_buffer(stream, r, a, a.mem)
            elif r == -1:  # another signature: plan it
                pool.append(plan)
                plan = None
                return _launch_slow(stream, config, kernel, args)
            else:
                a = args[-2 - r]
                raise_closed(a.mem, f"launch(): argument {-2 - r} ({type(a).__name__})")
    except BaseException:
        if plan is not None:
            pool.append(plan)
        raise
    pool.append(plan)
    return None


def _declare_windows(args: tuple[object, ...]) -> None:
    """The race sanitizer: the window (bytes) of each buffer argument, so that a twin
    without declared extents is checked over the buffer (view) it was given, not up to
    the end of the allocation the caching allocator carved it from."""
    _sanitize.launch_extents([a.window_nbytes if isinstance(a, DeviceBuffer) else 0 for a in args])


def _note_buffer(stream: Stream, i: int, a: object, m: Mem) -> None:
    dev = stream.dev_index
    if m.device < 0:
        _host_memory(i, a)
    if m.device != dev:
        _wrong_device(i, a, m.device, dev)
    note(m, stream)


def _note_binary(stream: Stream, kernel: Kernel) -> None:
    if kernel.dev_index != stream.dev_index:
        _wrong_device(-1, kernel, kernel.dev_index, stream.dev_index)
    kernel.bin_state.note(stream)


def _launch_type_error(stream: object, config: object, kernel: object) -> NoReturn:
    if not isinstance(stream, Stream):
        raise TypeError(f"launch(): stream must be a Stream, not {type_name(stream)}")
    if not isinstance(config, LaunchConfig):
        raise TypeError(f"launch(): config must be a LaunchConfig, not {type_name(config)}")
    if not isinstance(kernel, Kernel):
        raise TypeError(
            "launch(): kernel must be a Kernel (ObjectCode.get_kernel(name)), "
            f"not {type_name(kernel)}"
        )
    raise TypeError("launch(): invalid arguments")  # pragma: no cover - defensive


def _wrong_device(i: int, obj: object, have: int, want: int) -> NoReturn:
    what = "the kernel's binary" if i < 0 else f"argument {i} ({type(obj).__name__})"
    raise ValueError(
        f"launch(): {what} is on device {have} but the stream is on device {want}; "
        "launch on a stream of that device"
    )


def _host_memory(i: int, a: object) -> NoReturn:
    raise TypeError(
        f"launch(): argument {i} ({type(a).__name__}) is host memory, which a kernel cannot "
        "reach; copy it into a DeviceBuffer and pass that"
    )


def _arg_kind(i: int, a: object, name: str) -> tuple[object, int]:
    """The signature kind of argument ``i`` and its size in bytes."""
    m = getattr(a, "mem", None)
    if isinstance(m, Mem):
        if m.device < 0:
            _host_memory(i, a)
        return _BUF, 8
    try:
        mv = memoryview(a)  # type: ignore[arg-type]
    except TypeError:
        if isinstance(a, (int, float, complex)):  # bool, int, float and their subclasses
            raise TypeError(
                f"launch(): argument {i} of kernel '{name}' is a bare Python "
                f"{type(a).__name__} ({a!r}): its width would be a guess; pass a sized "
                "scalar such as numpy.uint32(x), numpy.float32(x) or ctypes.c_int64(x)"
            ) from None
        raise TypeError(
            f"launch(): argument {i} of kernel '{name}' must be a DeviceBuffer, "
            f"a numpy scalar or a ctypes scalar/structure, not {type_name(a)}"
        ) from None
    with mv:
        if mv.ndim != 0 or mv.nbytes == 0:
            raise TypeError(
                f"launch(): argument {i} of kernel '{name}' is a host array "
                f"({type_name(a)}, {mv.nbytes} bytes): kernels take device memory; copy it "
                "into a DeviceBuffer and pass that"
            )
        return type(a), mv.nbytes


def _launch_slow(
    stream: Stream, config: LaunchConfig, kernel: Kernel, args: tuple[object, ...]
) -> None:
    """First launch of a signature (or a type error): check the arguments, find or
    create the plan pool of their signature, then take the hot path."""
    if (
        not isinstance(stream, Stream)
        or not isinstance(config, LaunchConfig)
        or not isinstance(kernel, Kernel)
    ):
        _launch_type_error(stream, config, kernel)
    if len(args) > 128:
        raise TypeError(f"launch(): {len(args)} arguments; a kernel takes at most 128")
    kinds = []
    sizes = []
    for i, a in enumerate(args):
        k, size = _arg_kind(i, a, kernel.kernel_name)
        kinds.append(k)
        sizes.append(size)
    sig = tuple(kinds)
    pool = kernel.plan_pools.get(sig)
    if pool is None:
        kernel.code_ref.ensure_current()
        params = kernel.param_list()
        if params is not None:
            _check_params(kernel, args, sig, sizes, params)
        pool = kernel.plan_pools.setdefault(sig, [])
        if not pool:
            pool.append(_new_plan(kernel, sizes))
    elif not pool:
        kernel.code_ref.ensure_current()
        pool.append(_new_plan(kernel, sizes))
    kernel.cur_plans = (sig, pool)
    launch(stream, config, kernel, *args)


def _check_params(
    kernel: Kernel,
    args: tuple[object, ...],
    sig: tuple[object, ...],
    sizes: list[int],
    params: tuple[ParamInfo, ...],
) -> None:
    if len(params) != len(args):
        raise TypeError(
            f"launch(): kernel '{kernel.kernel_name}' takes {len(params)} arguments, "
            f"{len(args)} given"
        )
    for i, (p, size) in enumerate(zip(params, sizes, strict=True)):
        if p.size != size:
            what = "a buffer (an 8-byte address)" if sig[i] is _BUF else f"{size} bytes"
            raise TypeError(
                f"launch(): argument {i} of kernel '{kernel.kernel_name}' is {what} "
                f"({type_name(args[i])}) but the parameter takes {p.size} bytes"
            )


def _new_plan(kernel: Kernel, sizes: list[int]) -> _Plan:
    """A new argument list for ``kernel`` with one slot per size (values zero until
    the first launch writes them). The calling thread has the binary's context."""
    ffi = lowlevel.ffi
    out = local.st.scratch.uptr
    check(lib.aclrtKernelArgsInit(kernel.func_handle, out), "aclrtKernelArgsInit")
    handle = int(out[0])
    zeros = ffi.new("uint8_t[]", max(sizes, default=1) or 1)
    zaddr = int(ffi.cast("uintptr_t", zeros))
    entries = bytearray()
    for size in sizes:
        check(lib.aclrtKernelArgsAppend(handle, zaddr, size, out), "aclrtKernelArgsAppend")
        entries += _ENTRY.pack(int(out[0]), size, 0, bytes(8))
    if not sizes:  # no argument ever changes: the empty list is complete now
        check(lib.aclrtKernelArgsFinalize(handle), "aclrtKernelArgsFinalize")
    return _Plan(handle, entries)
