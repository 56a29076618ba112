"""Explicit ACL contexts (``aclrtCreateContext`` / ``aclrtDestroyContext``).

Most programs never need these: every device has one primary context that
pyacl_rt creates once and shares between threads (see :mod:`pyacl_rt._device`).
An explicit :class:`Context` is a separate context on a device, with its own
default stream, for code that wants isolation (pyACL's ``create_context``).

* ``with ctx:`` makes the context current on the calling thread for the block
  (new Streams/Events created on its device inside the block belong to it) and
  restores the previous selection exactly on exit.
* Objects created in a context keep it alive; :meth:`Context.close` first closes
  the Streams/Events still alive in it, then destroys the context.
* torch_npu hides contexts entirely; this is pyACL's concept.

Layer 4: imports :mod:`_device`, :mod:`_state`, :mod:`errors`, :mod:`_runtime`.
"""

from __future__ import annotations

import functools
import weakref
from typing import NoReturn

from . import _releaser, _runtime, errors
from ._device import Device, DeviceLike, device_index_arg, restore_selection
from ._hooks import fork_hooks
from ._log import get_logger
from ._state import (
    CtxRef,
    LiveSet,
    check,
    context_close_hooks,
    current,
    fast_get_current_context,
    finalized_error,
    gate_exit,
    gate_try_enter,
    lib,
    local,
    log_release_failure,
    refuse_copy,
    refuse_in_callback,
    restore_context,
    select_device,
    sliced_wait_device,
    validated_ctx,
)
from ._syncdebug import check_sync, sync_debug_active
from .errors import ObjectClosedError

__all__ = ["Context", "current_context"]

_log = get_logger("pyacl_rt")

_live: LiveSet[Context] = LiveSet()
#: Sliced, interruptible synchronize of the current context (gated per slice).


def _destroy(ref: CtxRef) -> None:
    """Finalizer body: destroy the context (exactly once) unless the runtime already
    did. Never raises. One gated section (see ``_stream._destroy_stream``): refused
    because finalize runs on another thread, it is handed to finalize; past the point
    where finalize takes such releases, the context dies with ``aclFinalize`` and its
    ref is marked dead so that nothing touches it again."""
    try:
        if ref.device < 0:
            return
        if local.st.in_callback:
            # Closing the children waits for their work: not on a host-callback thread.
            _releaser.defer(functools.partial(_destroy, ref))
            return
        if not gate_try_enter():
            if not _runtime.defer_to_finalize(functools.partial(_destroy, ref)):
                ref.kill("finalized")
            return
        try:
            if ref.device < 0:  # died before this thread entered the gate
                return
            # Releases of its objects on other threads (garbage collection) finish first;
            # later ones leave the handles to the destroy below.
            ref.close_wait()
            for hook in context_close_hooks:
                try:
                    hook(ref)
                except Exception:
                    _log.exception("pyacl_rt: closing objects of %r failed", ref)
            handle = ref.handle
            ref.kill("context is closed")
            if local.st.ctx is ref:
                local.st.ctx = None
            rc = lib.aclrtDestroyContext(handle)
            if rc:
                log_release_failure("aclrtDestroyContext", handle, rc)
        finally:
            gate_exit()
    except BaseException:  # pragma: no cover - interpreter shutdown
        pass


class Context:
    """An explicitly created context on ``device`` (default: the current device).

    ``aclrtCreateContext`` makes the new context current on the creating thread;
    pyacl_rt restores the thread's previous context right away (also one installed
    behind pyacl_rt's back by raw calls) so that creating a Context has no side
    effect. Use ``with ctx:`` to work inside it.
    """

    __slots__ = ("__weakref__", "_device", "_finalizer", "_ref", "_saved")

    def __init__(self, device: DeviceLike = None) -> None:
        _runtime.ensure_initialized()
        index = device_index_arg(device)
        st = local.st
        # The context current before (re-validated: something other than pyacl_rt may
        # have switched it); a foreign one is restored by its raw handle.
        prev = validated_ctx(st)
        foreign = 0
        if prev is None:
            try:
                foreign = fast_get_current_context()
            except errors.AclError:
                foreign = 0  # no current context
        s = st.scratch
        check(lib.aclrtCreateContext(s.uptr, index), "aclrtCreateContext")
        handle = int(s.uptr[0])
        # The ref points back weakly: threads' context caches hold the ref, and must not
        # keep the Context alive. Objects created in it hold the Context strongly.
        self._ref = CtxRef(handle, index, weakref.ref(self))
        self._device = index
        self._saved: list[tuple[int, CtxRef | None]] = []
        # aclrtCreateContext made it current; put the previous context back.
        local.st.ctx = self._ref
        if prev is not None and prev.device >= 0:
            restore_context(prev)
        elif foreign and lib.aclrtSetCurrentContext(foreign) == 0:
            local.st.ctx = None  # a context pyacl_rt does not know is current again
        # The finalizer must not reference self: it holds only the CtxRef.
        self._finalizer = weakref.finalize(self, _destroy, self._ref)
        self._finalizer.atexit = False
        _live.add(self)

    # Owning a raw handle: a copy would alias it (use after free once one is closed).
    def __reduce__(self) -> NoReturn:
        refuse_copy(self, "aclrtContext")

    def __copy__(self) -> NoReturn:
        refuse_copy(self, "aclrtContext")

    def __deepcopy__(self, memo: object) -> NoReturn:
        refuse_copy(self, "aclrtContext")

    # ------------------------------------------------------------ properties
    @property
    def handle(self) -> int:
        """The raw ``aclrtContext`` as an int (0 once closed)."""
        return self._ref.handle

    @property
    def device(self) -> Device:
        """The :class:`~pyacl_rt.Device` this context lives on."""
        return Device(self._device)

    @property
    def closed(self) -> bool:
        """True after :meth:`close` (or finalize)."""
        return self._ref.device < 0

    def __repr__(self) -> str:
        if self.closed:
            return f"<Context closed ({self._ref.dead})>"
        return f"<Context 0x{self._ref.handle:x} on device {self._device}>"

    # ------------------------------------------------------------- use
    def _require_open(self) -> None:
        if self._ref.device < 0:
            if self._ref.dead == "finalized":
                raise finalized_error("Context")
            raise ObjectClosedError("this Context is closed", explanation="")

    def make_current(self) -> None:
        """Make this context current on the calling thread (and select its device)."""
        self._require_open()
        self._ref.make_current()
        local.st.active = self._ref
        select_device(local.st, self._device)

    def __enter__(self) -> Context:
        self._require_open()
        local.st.guards.append((local.st.device, local.st.active))
        self.make_current()
        return self

    def __exit__(self, *exc: object) -> None:
        if local.st.guards:
            prev_device, prev_active = local.st.guards.pop()
            restore_selection(prev_device, prev_active)

    def synchronize(self) -> None:
        """Wait for all work in this context (``aclrtSynchronizeDevice`` within it)."""
        refuse_in_callback("Context.synchronize()")
        if sync_debug_active():
            check_sync("Context.synchronize()")
        self._require_open()
        self._ref.ensure_current()
        sliced_wait_device(-1)  # in slices: Ctrl-C interrupts the wait, the work stays queued

    def close(self) -> None:
        """Close the Streams/Events still alive in this context, then destroy it.

        Idempotent; a no-op after :func:`pyacl_rt.finalize`. Waits for the context's
        work first, in slices (Ctrl-C leaves the context open and usable).
        """
        ref = self._ref
        if ref.device >= 0 and self._finalizer.alive and not local.st.in_callback:
            try:
                with current(ref):  # the thread's context is put back afterwards
                    sliced_wait_device(-1)
            except errors.AclError:
                pass  # a failed task, finalize on another thread: left to the destroy
        if self._finalizer.detach() is None:
            return
        _live.discard(self)
        _destroy(self._ref)
        if local.st.active is self._ref:
            local.st.active = None


def current_context() -> Context | None:
    """The explicit :class:`Context` active on this thread (``with ctx:``), else ``None``."""
    active = local.st.active
    if active is None or active.device < 0:
        return None
    owner = active.owner
    ctx = owner() if owner is not None else None
    return ctx if isinstance(ctx, Context) else None


def _release_contexts() -> None:
    """Release hook (priority 'contexts'): destroy every explicit context still alive."""
    for ctx in _live.snapshot(clear=True):
        try:
            if ctx._finalizer.detach() is not None:
                _destroy(ctx._ref)
            ctx._ref.dead = "finalized"
        except BaseException:  # pragma: no cover - defensive
            _log.exception("pyacl_rt: destroying %r at finalize failed", ctx)


def _wait_for_contexts() -> None:
    """finalize_prepare hook: wait for the work of every live explicit context, in
    slices (interruptible; see ``_device._wait_for_devices``). Restores this thread's
    context afterwards."""
    contexts = [c for c in _live.snapshot() if c._ref.device >= 0]
    if not contexts:
        return
    with current(None):
        for ctx in contexts:
            try:
                ctx._ref.ensure_current()
                sliced_wait_device(-1)
            except errors.AclError:
                _log.debug("pyacl_rt: waiting for %r before finalize failed", ctx)


def _after_fork_in_child() -> None:
    for ctx in _live.snapshot():
        ctx._finalizer.detach()
        ctx._ref.kill("forked")


fork_hooks.add(_after_fork_in_child, _runtime.PRIORITY_CONTEXTS)
_runtime.register_release_hook(_release_contexts, _runtime.PRIORITY_CONTEXTS)
_runtime.finalize_prepare.add(_wait_for_contexts, _runtime.PRIORITY_CONTEXTS)
