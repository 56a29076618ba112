"""Allocation records behind :mod:`pyacl_rt._memory`: freeing ordered after streams.

One :class:`Mem` per allocation (device memory from ``aclrtMalloc`` or pinned host
memory from ``aclrtMallocHost``), shared by a buffer and its views. It never
references its owner, so the owner's finalizer can hold it.

* **Stream tracking**: an operation on the memory notes its stream
  (``keepalive.note``; the hot path compares ``m.last`` with the stream's private
  state object first).
* **Ordered freeing**: :func:`free_mem` (the finalizer body, also what ``close()``
  calls) synchronizes every live stream the memory was used on, then frees it; it
  never raises and never touches a runtime of another generation. On a host-callback
  (report) thread, where a synchronize could deadlock, the free is deferred to the
  releaser thread (:mod:`pyacl_rt._releaser`; also done by the next allocation,
  ``empty_cache()``, finalize).
* **Registry and counters** of live allocations per device (-1 = pinned host), kept
  in C (:mod:`pyacl_rt._memcore`, which also implements :class:`Mem` and the buffer
  base types); the state changes that must be atomic (``hold`` for an operation,
  ``claim_close``, ``take_base``, ``add_export``) are single C calls, atomic under the
  GIL. ``registry.memory.live_lock`` only orders Python-side lists (deferred frees, DLPack tokens).
* **DLPack** (:mod:`pyacl_rt._dlpack`): ``exports`` lists the live DLPack exports of
  the memory (``close()`` refuses while any, like for buffer-protocol exports; so does
  finalize, unless the consumer is a pyacl_rt import, which the release hook frees
  first); a record of imported memory has ``release`` (the producer's deleter, called
  instead of ``aclrtFree``) and is not counted in the statistics.
* **Lifecycle**: a release hook (``PRIORITY_MEMORY``) synchronizes the devices that
  still have allocations and frees them (objects become inert); closing an explicit
  Context frees the device memory allocated in it; a forked child forgets everything
  without touching the parent's memory.

Layer 6 (the lowest module of :mod:`pyacl_rt._memory`): imports layers 1-5 only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

from .. import _capture, _memcore, _releaser, _state, errors
from .. import _runtime as runtime
from .._hooks import fork_hooks
from .._log import get_logger
from .._state import (
    CtxRef,
    context_close_hooks,
    current,
    finalized_error,
    gate_api,
    gate_exit,
    gate_try_enter,
    lib,
    local,
    sliced_wait_stream,
)
from ..errors import ObjectClosedError
from ..lowlevel import recent_error_message
from .registry import memory

_log = get_logger("pyacl_rt")

_aclrtSynchronizeStream = lib.aclrtSynchronizeStream
#: Sliced, interruptible wait (gated per slice): for the waits of host-side users.


# =============================================================== allocations
#: One allocation (device or pinned host), shared by a buffer and its views
#: (:class:`pyacl_rt._memcore.Mem`): ``Mem(base, nbytes, device, ctx)``.
#:
#: ``ptr`` is what Python may use (0 once closed / freed / made inert); ``base`` is what
#: is passed to ``aclrtFree`` or the cache (0 once freed). ``streams`` are weak
#: references to the streams the memory was used on (``last`` is the private state token
#: of the most recent, for a cheap identity test on the hot path). ``inuse`` counts the
#: synchronous operations using the memory now (``hold()`` / ``unhold()``; close()
#: refuses while nonzero); ``exports`` the live DLPack exports; ``owner`` is the owning
#: HostBuffer (host memory only, for finalize); ``keep`` the explicit Context the memory
#: was allocated in (kept alive); ``rel`` the allocation backend's releaser, or None (freed
#: here, after waiting for its streams: one aclrtFree per buffer); ``release`` the
#: producer's deleter of memory imported through DLPack (called instead of a free; not
#: counted in the statistics). Never references its owner strongly, so that freeing it
#: never depends on the owner.
Mem = _memcore.Mem

#: A permanently dead allocation: closed views point at it.
_DEAD: Final = _memcore.DEAD

#: ``base`` / ``ptr`` of a zero-byte allocation (``DeviceBuffer(0)``): nonzero, so the
#: buffer counts as open, but never passed to the runtime - no operation touches
#: memory for 0 bytes, nothing is allocated or freed, and the public ``ptr`` is 0.
ZERO_SIZE_BASE: Final = _memcore.ZERO_SIZE_BASE  # 1 << 63


def hold(m: Mem) -> int:
    """Mark ``m`` in use by an operation of the calling thread and return its address,
    or 0 (nothing marked) when it is closed. Release with ``m.unhold()``.

    Atomic with ``Mem.claim_close`` (each one C call): once this returned an address,
    close() refuses until the mark is dropped."""
    return m.hold()


def raise_closed(m: Mem, what: str) -> None:
    if m.dead == "finalized":
        raise finalized_error(what, " (its memory was released)")
    if m.dead == "forked":
        raise errors.ForkedProcessError()
    raise ObjectClosedError(f"{what} is closed ({m.dead}); allocate a new one", explanation="")


def wait_streams(m: Mem, forget: bool = True) -> bool:
    """Synchronize every live stream ``m`` was used on. Returns False when called on
    a host-callback thread while one of them is still busy (caller must defer).

    ``forget``: drop the streams waited for (when freeing). Host-side users (H2H copy,
    host memset) keep them: another thread may enqueue on them meanwhile."""
    refs = m.streams
    if not refs:
        return True
    in_cb = local.st.in_callback
    st = local.st.i32
    waited = list(refs)
    for r in waited:
        s = r()
        if s is None or s.closed:
            continue  # destroying a stream waits for its work
        ctx = s.ctx_ref
        explicit = ctx.owner is not None
        if explicit and not ctx.enter():
            continue  # its context is being closed on another thread (waits for it)
        try:
            ctx.ensure_current()
            if in_cb:
                rc = lib.aclrtStreamQuery(s.handle, st)
                if rc == 0 and st[0] == 0:
                    continue
                return False
            if not forget:
                # A host-side copy / memset waits here for the user: in slices, so that
                # Ctrl-C interrupts it (nothing was copied yet).
                try:
                    sliced_wait_stream(s.handle, -1)
                except errors.RuntimeFinalizedError:
                    raise
                except errors.AclError as exc:
                    _log.warning(
                        "pyacl_rt: synchronizing %r before using memory failed: %s", s, exc
                    )
                continue
            rc = _aclrtSynchronizeStream(s.handle)
            if rc:
                _log.warning(
                    "pyacl_rt: synchronizing %r before using or freeing memory failed (%d): %s",
                    s,
                    rc,
                    recent_error_message(),
                )
        finally:
            if explicit:
                ctx.leave()
    if forget:
        for r in waited:
            with contextlib.suppress(ValueError):
                refs.remove(r)
        m.last = None
    return True


def _take_base(m: Mem) -> int:
    """Claim ``m``'s allocation once: return its base address (0 if another thread
    already took it) and forget the record. The caller frees the address."""
    return m.take_base()


def free_mem(m: Mem) -> None:
    """Release ``m`` once (what ``close()`` and the collection of an unclosed buffer
    run when the C hit path does not). Never raises; never touches a runtime of another
    generation. Waits for the streams that used ``m`` first. One gated section (see
    ``_stream._destroy_stream``): finalize on another thread waits for it."""
    try:
        if not m.base:
            return
        m.invalidate()  # ptr = 0
        if not runtime.is_alive(m.gen):
            m.take_base()
            return
        if local.st.in_callback:
            # A host-callback (report) thread: waiting for the streams may deadlock and
            # ACL forbids freeing there. The releaser thread frees it.
            _defer_free(m)
            return
        if m.streams and (_capture.by_stream or _capture.graph_streams):
            cap = _capture.used_by(m.streams)
            if cap is not None:  # a graph uses the memory: free it with the graph
                cap.deferred.append(lambda: free_mem(m))
                return
        if not gate_try_enter():
            # finalize runs on another thread (the gate is closed): m is still
            # registered, its release hook frees it - or the memory goes with the
            # runtime; never freed twice, never into a torn-down allocator.
            return
        try:
            with current():
                if not runtime.is_alive(m.gen):  # finalized (and re-initialised) meanwhile
                    _take_base(m)
                    return
                rel = m.rel
                if rel is not None:  # a backend takes it back (no wait: it orders reuse)
                    base = _take_base(m)
                    if not base:
                        return
                    rel.release(m, base)
                    m.keep = None
                    return
                if not wait_streams(m):  # pragma: no cover - only on callback threads
                    _defer_free(m)
                    return
                base = _take_base(m)
                if not base:
                    return
                _free_raw(m, base)
                m.keep = None
        finally:
            gate_exit()
    except BaseException:  # pragma: no cover - interpreter shutdown, defensive
        with contextlib.suppress(BaseException):
            _log.debug("pyacl_rt: freeing memory failed", exc_info=True)


def _defer_free(m: Mem) -> None:
    """Free ``m`` later, on the releaser thread (or at the next allocation,
    ``empty_cache()``, finalize: whichever comes first). Safe in a finalizer."""
    with memory.live_lock:
        if m.base and m not in memory.deferred:
            memory.deferred.append(m)
    _releaser.defer(process_deferred)


def _free_raw(m: Mem, base: int) -> None:
    if m.release is not None:
        m.release()  # imported memory: the producer frees it
        return
    if base == ZERO_SIZE_BASE:
        return  # DeviceBuffer(0): nothing was allocated
    ctx = m.ctx
    # An explicit context being closed on another thread is not made current (it may be
    # destroyed any moment): the memory is freed through the current context.
    entered = ctx is not None and ctx.owner is not None and ctx.enter()
    try:
        usable = ctx is not None and (entered or ctx.owner is None) and ctx.device >= 0
        if usable and local.st.ctx is not ctx:
            assert ctx is not None
            try:
                ctx.make_current()
            except Exception as exc:  # e.g. a lost device: free anyway, the call reports it
                _log.debug("pyacl_rt: making %r current before a free failed: %s", ctx, exc)
        if m.device >= 0:
            rc = lib.aclrtFree(base)
            func = "aclrtFree"
        else:
            rc = lib.aclrtFreeHost(base)
            func = "aclrtFreeHost"
    finally:
        if entered:
            assert ctx is not None
            ctx.leave()
    if rc:
        _log.warning(
            "pyacl_rt: %s(0x%x) failed with %d: %s", func, base, rc, recent_error_message()
        )


def process_deferred() -> None:
    """Free allocations whose release was deferred from a host-callback thread."""
    if not memory.deferred or local.st.in_callback:
        return
    with memory.live_lock:
        items = list(memory.deferred)
        memory.deferred.clear()
    for m in items:
        free_mem(m)


def _unknown_block(base: int) -> None:
    """The cache did not know a block given back (logged, as StreamPool.release does)."""
    _log.warning("pyacl_rt allocator: freeing unknown block 0x%x", base)


def stat(index: int, key: str) -> int:
    """Counter ``key`` (allocated, peak, allocs, frees) of device ``index``."""
    return counters(index)[key]


def counters(index: int) -> dict[str, int]:
    """``allocated`` (bytes now), ``peak``, ``allocs``, ``frees``, ``bytes_allocated``,
    ``bytes_freed`` of the live records of device ``index`` (-1: pinned host memory)."""
    return _memcore.counters(index)


def reset_totals(index: int) -> None:
    """Zero the bytes allocated / freed totals of ``index``."""
    _memcore.reset_totals(index)


def reset_peak(index: int) -> None:
    _memcore.reset_peak(index)


# ================================================================= lifecycle
def _iter_live() -> Iterator[Mem]:
    return iter(_memcore.live())


def _sync_devices(mems: list[Mem]) -> None:
    done: set[int] = set()
    for m in mems:
        ctx = m.ctx
        if m.device < 0 or m.device in done or ctx is None or ctx.device < 0:
            continue
        done.add(m.device)
        try:
            ctx.ensure_current()
            rc = lib.aclrtSynchronizeDevice()
            if rc:
                _log.warning("pyacl_rt: aclrtSynchronizeDevice failed with %d at finalize", rc)
        except Exception:  # pragma: no cover - defensive
            _log.debug("pyacl_rt: synchronize before freeing failed", exc_info=True)


def _finalize_blockers() -> list[str]:
    """What forbids freeing every live buffer now: pinned HostBuffers with live
    exports (memoryview / numpy array: freeing would leave them pointing at freed
    memory) and buffers a synchronous operation on another thread is using."""
    out: list[str] = []
    for m in _iter_live():
        if not runtime.is_alive(m.gen):
            continue
        where = f"0x{m.ptr or m.base:x}"
        consumers = _foreign_exports(m)
        if consumers:
            kind = "HostBuffer" if m.device < 0 else f"DeviceBuffer on device {m.device}"
            out.append(f"{kind} of {m.nbytes} bytes at {where}: {consumers} DLPack export(s)")
            continue
        if m.inuse:
            kind = "HostBuffer" if m.device < 0 else f"DeviceBuffer on device {m.device}"
            out.append(
                f"{kind} of {m.nbytes} bytes at {where}: in use by a synchronous copy / "
                "memset on another thread"
            )
            continue
        if m.device >= 0:
            continue
        owner = m.owner
        if owner is None:
            # Collected, but an export still holds the memory (its destructor has not run).
            out.append(f"a garbage-collected HostBuffer of {m.nbytes} bytes at {where}: exported")
        else:
            n = owner.export_count()
            if n:
                out.append(f"HostBuffer of {m.nbytes} bytes at {where}: {n} exported view(s)")
    return out


def _foreign_exports(m: Mem) -> int:
    """DLPack exports of ``m`` whose consumer is not a pyacl_rt import (those are
    released by the same release hook, before their producers)."""
    return sum(1 for e in m.exports if not getattr(e, "internal", False))


def _finalize_guard() -> None:
    """runtime.finalize() guard: refuse (``BufferError``, nothing finalized) while
    :func:`_finalize_blockers` reports anything - the same rule as ``close()``. At
    interpreter exit (no guard runs) :func:`_release_memory` logs them instead."""
    blockers = _finalize_blockers()
    if blockers:
        raise BufferError(
            "cannot finalize: aclFinalize would free memory that is still in use ("
            + "; ".join(blockers)
            + "). Release the memoryviews / numpy arrays (or wait for those operations), "
            "then call finalize() again; nothing was finalized"
        )


def _release_memory() -> None:
    """Release hook (priority 'memory'): free every live buffer; objects become inert.

    Reached with exported (or in-use) pinned memory at interpreter exit (the finalize()
    guard refuses otherwise): that memory is left to aclFinalize and the process end,
    silently (a numpy array over it is just one more object dying with the process).
    Should an export appear between an explicit finalize()'s guard and this hook, that
    is logged."""
    _memcore.end_generation(runtime.generation())  # every free takes the Python path
    process_deferred()
    mems = list(_iter_live())
    with memory.live_lock:
        mems += [m for m in memory.deferred if m not in mems]
        memory.deferred.clear()
    # DLPack imports first: their release drops the exports of their producers.
    mems.sort(key=lambda m: m.release is None)
    _sync_devices(mems)
    exported = 0
    for m in mems:
        m.dead = "finalized"
        m.streams.clear()
        m.last = None
        if m.device < 0:
            owner = m.owner
            if owner is None or m.inuse or m.exports or owner.export_count():
                # Exports still reference the memory: leave it to aclFinalize.
                exported += 1
                m.invalidate()
                _take_base(m)
                continue
        free_mem(m)
    if exported:
        (_log.debug if runtime.at_exit() else _log.warning)(
            "pyacl_rt: %d pinned HostBuffer(s) were still exported (memoryview / numpy / "
            "DLPack) or in use at finalize(); aclFinalize releases that memory: do not use "
            "those views any more",
            exported,
        )


def _on_context_close(ctx: CtxRef) -> None:
    """An explicit Context is closing: free the buffers allocated in it first."""
    mems = [m for m in _iter_live() if m.ctx is ctx and m.device >= 0]
    if mems:
        try:
            ctx.ensure_current()
            _aclrtSynchronizeStream(0)
        except Exception:  # pragma: no cover - defensive
            _log.debug("pyacl_rt: synchronize before freeing failed", exc_info=True)
    for m in mems:
        m.dead = "its Context was closed"
        free_mem(m)
    # Host buffers allocated while this context was current: free through another
    # context later (any context works for host memory).
    for m in _iter_live():
        if m.ctx is ctx:
            m.ctx = None


def _after_fork_in_child() -> None:
    _memcore.after_fork()  # records (deferred ones too) forget the parent's memory
    memory.reset()  # the one reset of the memory registry


_memcore.bind(
    runtime_globals=vars(runtime),
    state_globals=vars(_state),
    thread_state=_state.ThreadState,
    ctx_ref=CtxRef,
    deferred=memory.deferred,
    free_mem=free_mem,
    raise_closed=raise_closed,
    unknown_block=_unknown_block,
    lowlevel_api=lib.pyacl_lowlevel_api(),
    gate_api=gate_api(),
)


def _settle() -> None:
    if runtime.is_initialized():
        process_deferred()


fork_hooks.add(_after_fork_in_child, runtime.PRIORITY_MEMORY)
runtime.settle_hooks.add(_settle, runtime.PRIORITY_MEMORY)
context_close_hooks.add(_on_context_close, runtime.PRIORITY_MEMORY)
runtime.register_release_hook(_release_memory, runtime.PRIORITY_MEMORY)
runtime.finalize_guards.add(_finalize_guard, runtime.PRIORITY_MEMORY)
