"""Graphs: capture work issued on a stream once, replay it with one call (torch_npu's names).

* :class:`NPUGraph` - ``capture_begin`` / ``capture_end`` / ``replay`` / ``reset`` /
  ``pool`` / ``debug_dump`` over the runtime's model run instances (``aclmdlRICapture*``,
  ``aclmdlRIExecuteAsync``, ``aclmdlRIDestroy``).
* :class:`graph` - ``with pyacl_rt.graph(g):`` captures on a side stream (the runtime
  refuses the default stream), with torch's ``capture_error_mode`` ("global",
  "thread_local", "relaxed").
* :func:`graph_pool_handle` / :meth:`NPUGraph.pool` - share a graph-private memory pool
  between graphs (:mod:`pyacl_rt._allocator._graphpool`).
* :func:`make_graphed_callables` - plain callables over buffers, captured once and
  replayed with static inputs and outputs.

While a capture runs, pyacl_rt itself issues nothing the capture forbids (see
:mod:`pyacl_rt._capture`): keep-alive lists record no marker event, the allocator
records no guard event on a capturing stream, synchronizes no device and frees no
memory a graph uses until the graph is reset. What the *application* does wrong is
refused by the runtime and raised as :class:`~pyacl_rt.errors.StreamCaptureError`
(and subclasses) with a message saying what to do.

Floor 7 (higher tools): imports floors 1-7 (the allocator).
"""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Final

from . import _capture, _memcore, _releaser, errors, lowlevel
from . import _runtime as runtime
from ._allocator import device_allocator
from ._allocator._graphpool import GraphPool
from ._device import device_index_arg
from ._device import synchronize as _device_synchronize
from ._memory import backend as _membackend
from ._memory.buffers import DeviceBuffer
from ._memory.engine import memcpy_async
from ._raw._abi_runtime import CONSTANTS as _C
from ._state import CtxRef, check, gate_exit, gate_try_enter, lib, local
from ._stream import Stream, current_stream, stream

__all__ = ["GraphPoolHandle", "NPUGraph", "graph", "graph_pool_handle", "make_graphed_callables"]

_MODES: Final = {
    "global": _C["ACL_MODEL_RI_CAPTURE_MODE_GLOBAL"],
    "thread_local": _C["ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL"],
    "relaxed": _C["ACL_MODEL_RI_CAPTURE_MODE_RELAXED"],
}
_ACTIVE: Final = _C["ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE"]
_execute_async = lib.aclmdlRIExecuteAsync


# ------------------------------------------------------------------ pools
class GraphPoolHandle:
    """An opaque handle of a graph memory pool (:func:`graph_pool_handle`,
    :meth:`NPUGraph.pool`): graphs captured with the same handle allocate from one
    private pool. The pool lives while a graph uses it."""

    __slots__ = ("__weakref__", "_lock", "_pools")

    def __init__(self) -> None:
        self._pools: dict[int, GraphPool] = {}
        self._lock = threading.Lock()

    def _pool_for(self, index: int) -> GraphPool | None:
        """The pool on device ``index`` (created on first use); None when the caching
        allocator is not the memory backend (no pool to keep private)."""
        if _membackend.device().name != "caching":
            return None
        _i, alloc = device_allocator(index)
        with self._lock:
            pool = self._pools.get(index)
            if pool is None or pool.alloc is not alloc:  # new allocator after re-init
                pool = self._pools[index] = GraphPool(alloc)
            return pool

    def __repr__(self) -> str:
        return f"<GraphPoolHandle 0x{id(self):x}>"


def graph_pool_handle() -> GraphPoolHandle:
    """A new pool handle to share one private memory pool between graphs
    (``pyacl_rt.graph(g, pool=h)`` / ``g.capture_begin(pool=h)``), as torch's."""
    return GraphPoolHandle()


# ------------------------------------------------------------------ graph
class _GraphState:
    """What the finalizer of an :class:`NPUGraph` releases (never the graph itself)."""

    __slots__ = ("cap", "ctx", "gen", "model", "own", "pool", "replayed", "stream")

    def __init__(self) -> None:
        self.model = 0
        self.cap: _capture.Capture | None = None
        self.ctx: CtxRef | None = None
        self.gen = runtime.generation()
        self.pool: GraphPool | None = None
        #: the streams replays were queued on (synchronized before the model goes)
        self.replayed: list[Stream] = []
        self.stream: Stream | None = None
        #: the side stream graph() made for the capture: kept until the graph goes, so
        #: that its handle (noted on the memory the graph uses) is not reused meanwhile
        self.own: Stream | None = None


def _teardown(st: _GraphState, raise_errors: bool) -> None:
    """Wait for the replays, destroy the model, free what the graph kept, drop the pool."""
    if not raise_errors and local.st.in_callback:
        _releaser.defer(functools.partial(_finalize, st))  # never wait on a callback thread
        return
    model, cap, pool, replayed = st.model, st.cap, st.pool, st.replayed
    st.model, st.cap, st.pool, st.replayed = 0, None, None, []
    ctx = st.ctx
    alive = runtime.is_alive(st.gen) and ctx is not None and ctx.device >= 0
    first: BaseException | None = None
    if alive:
        for s in replayed:
            try:
                if not s.closed:
                    s.synchronize()
            except BaseException as exc:  # report the first, release the rest anyway
                first = first or exc
        if model and ctx is not None:
            ctx.ensure_current()
            rc = lib.aclmdlRIDestroy(model)
            if rc:
                first = first or errors.error_from_code(
                    rc, function="aclmdlRIDestroy", recent_message=lowlevel.recent_error_message()
                )
    if cap is not None:
        _capture.retire(cap)
        deferred, cap.deferred = cap.deferred, []
        cap.keep.clear()
        if alive:
            for fn in deferred:
                fn()
    if pool is not None and alive:
        pool.drop()
    own, st.own = st.own, None
    if own is not None and alive:
        try:
            own.close()
        except BaseException as exc:
            first = first or exc
    if first is not None and raise_errors:
        raise first


def _finalize(st: _GraphState) -> None:
    """Finalizer body of an :class:`NPUGraph`: :func:`_teardown` as one gated section,
    like ``_stream._destroy_stream`` (refused because finalize runs on another thread,
    it is handed to finalize; past that point the model dies with the runtime). Never
    raises."""
    try:
        if not gate_try_enter():
            runtime.defer_to_finalize(functools.partial(_finalize, st))
            return
        try:
            _teardown(st, False)
        finally:
            gate_exit()
    except BaseException:  # a failed release is dropped: a finalizer never raises
        pass


class NPUGraph:
    """A captured graph of device work (torch_npu's ``NPUGraph``).

    Capture with ``with pyacl_rt.graph(g): ...`` (or :meth:`capture_begin` /
    :meth:`capture_end` on a non-default current stream), then :meth:`replay` enqueues
    the whole graph on the current stream as one task. Buffers the graph uses keep the
    addresses they had at capture: update their *contents* between replays (copy new
    inputs into the static input buffers), never free them before :meth:`reset`.
    """

    __module__ = "pyacl_rt"

    def __init__(self) -> None:
        self._st = _GraphState()
        self._pool_handle: GraphPoolHandle | None = None
        self._device = -1
        self._finalizer = weakref.finalize(self, _finalize, self._st)
        self._last: Stream | None = None

    # ------------------------------------------------------------- capture
    def capture_begin(
        self, pool: GraphPoolHandle | None = None, capture_error_mode: str = "global"
    ) -> None:
        """Begin capturing the work issued on the current stream (not the default
        stream: :class:`~pyacl_rt.errors.StreamCaptureError`). ``pool``: share the
        memory pool of another graph (:meth:`pool`, :func:`graph_pool_handle`);
        ``capture_error_mode``: "global", "thread_local" or "relaxed" (torch's)."""
        if not isinstance(capture_error_mode, str):
            raise TypeError(
                "capture_begin(): capture_error_mode must be a str, not "
                f"{type(capture_error_mode).__name__}"
            )
        mode = _MODES.get(capture_error_mode)
        if mode is None:
            raise ValueError(
                "capture_begin(): capture_error_mode must be 'global', 'thread_local' or "
                f"'relaxed', not {capture_error_mode!r}"
            )
        if pool is not None and not isinstance(pool, GraphPoolHandle):
            raise TypeError(
                "capture_begin(): pool must be a handle from graph_pool_handle() or "
                f"NPUGraph.pool(), or None, not {type(pool).__name__}"
            )
        st = self._st
        if st.model or st.cap is not None:
            raise errors.StreamCaptureError(
                "this NPUGraph already holds a capture; call reset() before capturing again",
                explanation="",
            )
        s = current_stream()
        if s.kind == "default":
            raise errors.StreamCaptureError(
                "cannot capture on the default stream (the runtime forbids it, 107031): use "
                "`with pyacl_rt.graph(g):` or make a side stream current "
                "(`with pyacl_rt.stream(pyacl_rt.Stream()):`)",
                explanation="",
            )
        handle = pool if pool is not None else GraphPoolHandle()
        index = s.device_index
        gpool = handle._pool_for(index)
        s.ensure_current()
        ctx = local.st.ctx
        if gpool is not None and gpool.alloc.ctx is not ctx:
            gpool = None  # a stream of an explicit context: the cache does not serve it
        rc = lib.aclmdlRICaptureBegin(s.handle, mode)
        if rc:
            check(rc, "aclmdlRICaptureBegin")
        cap = _capture.Capture(s.handle, gpool)
        sc = local.st.scratch
        if lib.aclmdlRICaptureGetInfo(s.handle, sc.i32, sc.uptr) == 0:
            cap.model = int(sc.uptr[0])
        else:
            lowlevel.clear_error()
        if gpool is not None:
            gpool.acquire()
        st.cap, st.ctx, st.pool, st.stream, st.gen = cap, ctx, gpool, s, runtime.generation()
        self._pool_handle = handle
        self._device = index
        _capture.begin(cap)
        _memcore.forget_pools()  # the C hit path asks the allocator again: pool blocks

    def capture_end(self) -> None:
        """End the capture begun by :meth:`capture_begin`. Raises
        :class:`~pyacl_rt.errors.StreamCaptureInvalidatedError` if a forbidden call
        invalidated the capture (the capture is discarded), other
        :class:`~pyacl_rt.errors.StreamCaptureError` (e.g. a side stream that did not
        rejoin, 107025; the wrong thread in global / thread_local mode, 107038)."""
        st = self._st
        cap, s = st.cap, st.stream
        if cap is None or s is None or st.model:
            raise errors.StreamCaptureError(
                "capture_end() without capture_begin(): nothing is being captured",
                explanation="",
            )
        joined = self._joined_streams(cap, s)
        s.ensure_current()
        sc = local.st.scratch
        rc = lib.aclmdlRICaptureEnd(s.handle, sc.uptr)
        model = int(sc.uptr[0]) if rc == 0 else 0
        if rc:
            msg = lowlevel.recent_error_message()
            if lib.aclmdlRICaptureGetInfo(s.handle, sc.i32, sc.uptr) == 0 and (
                sc.i32[0] == _ACTIVE
            ):
                # still capturing (e.g. End on the wrong thread): the capture goes on
                raise errors.error_from_code(rc, function="aclmdlRICaptureEnd", recent_message=msg)
            lowlevel.clear_error()
        _capture.end(cap)
        _memcore.forget_pools()
        if rc:
            st.stream = None
            _teardown(st, raise_errors=False)  # discarded: nothing replays its memory
            raise errors.error_from_code(rc, function="aclmdlRICaptureEnd", recent_message=msg)
        cap.streams.extend(h for h in joined if h not in cap.streams)
        _capture.settle(cap)
        st.model = model
        st.stream = None

    @staticmethod
    def _joined_streams(cap: _capture.Capture, origin: Stream) -> list[int]:
        """Handles of the live streams that joined this capture (asked before End)."""
        from ._stream import live_streams  # the live-stream registry of the stream layer

        out = []
        sc = local.st.scratch
        for s in live_streams.snapshot():
            h = s.handle
            if s is origin or not h or s.closed:
                continue
            try:
                s.ensure_current()
            except errors.AclError:
                continue
            if lib.aclmdlRICaptureGetInfo(h, sc.i32, sc.uptr):
                lowlevel.clear_error()
                continue
            if sc.i32[0] == _ACTIVE and int(sc.uptr[0]) == cap.model:
                out.append(h)
        return out

    # -------------------------------------------------------------- replay
    def replay(self) -> None:
        """Enqueue one run of the graph on the current stream (one task: later work on
        the stream waits for it). Runs of one graph never overlap."""
        st = self._st
        model = st.model
        if not model:
            raise errors.StreamCaptureError(
                "replay() needs a captured graph: capture first (with pyacl_rt.graph(g): ...)",
                explanation="",
            )
        s = current_stream(self._device)
        ctx = st.ctx
        if local.st.ctx is not ctx and ctx is not None:
            ctx.make_current()
        rc = _execute_async(model, s.handle)
        if rc:
            check(rc, "aclmdlRIExecuteAsync")
        if s is not self._last:
            self._last = s
            if s not in st.replayed:
                st.replayed.append(s)

    def reset(self) -> None:
        """Wait for the graph's replays, destroy it and release what it kept (its
        buffers' deferred frees, its memory pool when no other graph uses it)."""
        st = self._st
        if st.stream is not None:
            raise errors.StreamCaptureError(
                "reset() while capturing: end the capture first (capture_end())",
                explanation="",
            )
        self._last = None
        _teardown(st, raise_errors=True)

    def pool(self) -> GraphPoolHandle:
        """The handle of this graph's memory pool, to share it with another capture
        (``pyacl_rt.graph(g2, pool=g1.pool())``)."""
        if self._pool_handle is None:
            self._pool_handle = GraphPoolHandle()
        return self._pool_handle

    def debug_dump(self, debug_path: str | os.PathLike[str]) -> None:
        """Write the captured graph as chrome://tracing JSON to ``debug_path`` (a file,
        or a directory: ``aclmdlRI_<id>.json`` in it); ``aclmdlRIDebugJsonPrint``."""
        if not isinstance(debug_path, str | bytes | os.PathLike):
            raise TypeError(
                f"debug_dump(): debug_path must be a path, not {type(debug_path).__name__}"
            )
        st = self._st
        if not st.model or st.ctx is None:
            raise errors.StreamCaptureError("debug_dump() needs a captured graph", explanation="")
        path = os.fsencode(os.fspath(debug_path))
        st.ctx.ensure_current()
        check(lib.aclmdlRIDebugJsonPrint(st.model, path, 0), "aclmdlRIDebugJsonPrint")

    @property
    def handle(self) -> int:
        """The runtime's model handle (``aclmdlRI``) as an int; 0 before capture_end."""
        return self._st.model

    def __repr__(self) -> str:
        st = self._st
        state = "capturing" if st.stream is not None else ("captured" if st.model else "empty")
        return f"<pyacl_rt.NPUGraph {state} device={self._device}>"


# ---------------------------------------------------------- the context manager
class graph:
    """``with pyacl_rt.graph(g, pool=None, stream=None, capture_error_mode="global"):``
    captures the work issued in the block into :class:`NPUGraph` ``g``.

    The device is synchronized first and the capture runs on ``stream`` (default: a
    new side stream of the current device, made current inside the block and closed
    after it: the graph does not need it). If the block
    raises, the capture is ended and discarded and the block's exception propagates.
    """

    __module__ = "pyacl_rt"

    def __init__(
        self,
        npu_graph: NPUGraph,
        pool: GraphPoolHandle | None = None,
        stream: Stream | None = None,
        capture_error_mode: str = "global",
    ) -> None:
        if not isinstance(npu_graph, NPUGraph):
            raise TypeError(
                f"graph(): npu_graph must be an NPUGraph, not {type(npu_graph).__name__}"
            )
        if stream is not None and not isinstance(stream, Stream):
            raise TypeError(
                f"graph(): stream must be a Stream or None, not {type(stream).__name__}"
            )
        self.npu_graph = npu_graph
        self.pool = pool
        self.capture_stream = stream
        self.capture_error_mode = capture_error_mode
        self._guard: Any = None
        self._own: Stream | None = None

    def __enter__(self) -> NPUGraph:
        s = self.capture_stream
        if s is None:  # a side stream of our own, closed when the capture ends
            s = self._own = Stream(device_index_arg(None))
        _device_synchronize(s.device_index)
        guard = stream(s)
        guard.__enter__()
        try:
            self.npu_graph.capture_begin(pool=self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            guard.__exit__(None, None, None)
            self._close_own()
            raise
        self._guard = guard
        return self.npu_graph

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        guard, self._guard = self._guard, None
        try:
            self.npu_graph.capture_end()
        except errors.AclError:
            if exc_type is None:
                raise
        finally:
            if guard is not None:
                guard.__exit__(None, None, None)
            self._close_own()

    def _close_own(self) -> None:
        own, self._own = self._own, None
        if own is not None:
            if self.npu_graph.handle:
                self.npu_graph._st.own = own  # the graph keeps it (see _GraphState.own)
            else:
                own.close()


# ------------------------------------------------------- graphed callables
def make_graphed_callables(
    callables: Callable[..., Any] | Sequence[Callable[..., Any]],
    sample_args: tuple[DeviceBuffer, ...] | Sequence[tuple[DeviceBuffer, ...]],
    num_warmup_iters: int = 3,
    pool: GraphPoolHandle | None = None,
) -> Any:
    """Capture each callable over its sample buffers once; return callables that copy
    their arguments into the captured (static) input buffers, replay, and return the
    static outputs (torch's ``make_graphed_callables`` for plain callables: no autograd).

    ``callables``: one callable or a sequence; ``sample_args``: for each, a tuple of
    :class:`~pyacl_rt.DeviceBuffer` arguments (static inputs). Warm-up runs
    ``num_warmup_iters`` times on a side stream; the captures share one memory pool.
    A graphed callable takes buffers of the same sizes (copied device to device on the
    current stream before the replay; the static input itself is not copied).
    """
    single = callable(callables)
    if not single and not isinstance(callables, Sequence):
        raise TypeError(
            "make_graphed_callables(): callables must be a callable or a sequence of them, "
            f"not {type(callables).__name__}"
        )
    if not isinstance(sample_args, Sequence):
        raise TypeError(
            "make_graphed_callables(): sample_args must be a tuple, not "
            f"{type(sample_args).__name__}"
        )
    fns: list[Callable[..., Any]] = [callables] if single else list(callables)  # type: ignore[arg-type, list-item]
    args_list: list[tuple[DeviceBuffer, ...]] = (
        [tuple(sample_args)] if single else [tuple(a) for a in sample_args]  # type: ignore[arg-type]
    )
    if len(fns) != len(args_list):
        raise ValueError("make_graphed_callables(): one sample_args tuple per callable")
    for fn, args in zip(fns, args_list, strict=True):
        if not callable(fn):
            raise TypeError(f"make_graphed_callables(): {fn!r} is not callable")
        for a in args:
            if not isinstance(a, DeviceBuffer):
                raise TypeError(
                    "make_graphed_callables(): sample arguments must be DeviceBuffers, not "
                    f"{type(a).__name__}"
                )
    if (
        isinstance(num_warmup_iters, bool)
        or not isinstance(num_warmup_iters, int)
        or (num_warmup_iters < 0)
    ):
        raise ValueError("make_graphed_callables(): num_warmup_iters must be an int >= 0")
    shared = pool if pool is not None else graph_pool_handle()
    out: list[Callable[..., Any]] = []
    for fn, args in zip(fns, args_list, strict=True):
        cur = current_stream()
        side = Stream(cur.device_index)
        side.wait_stream(cur)
        with stream(side):
            for _ in range(num_warmup_iters):
                fn(*args)
        cur.wait_stream(side)
        g = NPUGraph()
        with graph(g, pool=shared):
            static_out = fn(*args)
        out.append(_graphed(g, args, static_out))
    return out[0] if single else tuple(out)


def _graphed(
    g: NPUGraph, static_in: tuple[DeviceBuffer, ...], static_out: Any
) -> Callable[..., Any]:
    """The replaying twin of a captured callable."""

    def run(*args: DeviceBuffer) -> Any:
        if len(args) != len(static_in):
            raise TypeError(f"graphed callable takes {len(static_in)} buffers, got {len(args)}")
        s = current_stream(g._device)
        for new, old in zip(args, static_in, strict=True):
            if new is old:
                continue
            if not isinstance(new, DeviceBuffer) or new.nbytes != old.nbytes:
                raise ValueError(
                    "graphed callable: each argument must be a DeviceBuffer of the sample's "
                    f"size ({old.nbytes} bytes)"
                )
            memcpy_async(old, new, old.nbytes, s)
        g.replay()
        return static_out

    run.graph = g  # type: ignore[attr-defined]
    return run
