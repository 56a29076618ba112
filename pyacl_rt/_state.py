"""The kernel every object layer shares: thread state, context refs, live sets, hooks.

* :class:`CtxRef` - one ACL context as Python sees it (primary or explicit); objects
  compare it by identity with the calling thread's cached current context
  (``local.st.ctx``) before each runtime call and call :meth:`CtxRef.make_current`
  only when it differs (see :mod:`pyacl_rt._device` for the model).
* :class:`ThreadState` (``local.st``) - per thread: the cached current context, the
  selected device, the active explicit Context, the current streams, ``with`` guards,
  "inside a host callback", and the scratch out-parameter arrays.
* :class:`current` - ``with current(ctx):`` makes ``ctx`` current for a block and puts
  the thread's previous context back (:func:`restore_context`); the one context guard.
* :func:`validated_ctx` - the thread's cached context re-checked against the runtime
  (a foreign ``aclrtSetCurrentContext`` may have switched it).
* :class:`LiveSet` - weak registries of live Streams / Events / Contexts, which
  finalize and Context close make inert; :func:`run_finalizer` and the copy/callback
  refusals (releases a host-callback thread must not do itself go to
  :mod:`pyacl_rt._releaser`).
* Hooks the upper layers register into, each with an explicit priority
  (:mod:`pyacl_rt._hooks`): :data:`context_close_hooks` (an explicit Context is about
  to be destroyed: close its events, streams, buffers first) and
  :data:`device_sync_hooks` (a device synchronize succeeded: release keep-alive lists).

Layer 4 (with :mod:`pyacl_rt._device` / :mod:`pyacl_rt._context` above it): imports
:mod:`errors`, :mod:`lowlevel`, :mod:`_hooks`, :mod:`_log` and :mod:`_raw._extensions`
only (and :mod:`_runtime`, a lower layer, lazily).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Final, Generic, NoReturn, TypeVar

from . import errors, lowlevel
from ._hooks import PriorityHooks, fork_hooks
from ._log import get_logger
from ._raw._extensions import lib as _cffi_lib
from ._sanitize import TASK_CALLS
from .errors import CallbackContextError, ObjectClosedError

__all__ = [
    "context_close_hooks",
    "current",
    "device_sync_hooks",
    "forget_thread_context",
    "restore_context",
]

_log = get_logger("pyacl_rt")


# ------------------------------------------------------- raw layer binding
class _Gated:
    """A view of a raw-layer module whose functions run inside the finalize gate
    (``lowlevel.fast._gated``, see ``pyacl_rt/_raw/_fastcall.c``): while
    :func:`pyacl_rt.finalize` runs and after it (until ``init()``), a call from any other
    thread is refused with :class:`~pyacl_rt.errors.RuntimeFinalizedError` before it
    reaches the runtime, and finalize waits for the calls already in flight before it
    releases anything. Every runtime call of pyacl_rt's object layers goes through one
    of the two views below; :mod:`pyacl_rt.lowlevel` itself stays ungated (raw).

    A function is wrapped on first access and cached (an attribute of the view after
    that); names in ``passthrough`` (functions that pass the gate themselves) and the
    loader's ``pyacl_*`` helpers are returned unwrapped.
    """

    def __init__(self, target: Any, passthrough: tuple[str, ...] = ()) -> None:
        self._target = target
        self._passthrough = frozenset(passthrough)

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._target, name)
        if callable(fn) and name not in self._passthrough and not name.startswith("pyacl_"):
            # a call that may enqueue a task is tagged while the race sanitizer is on
            fn = gated_task(fn) if name in TASK_CALLS else _gated(fn)
        setattr(self, name, fn)
        return fn


_gated: Callable[[Callable[..., Any]], Callable[..., Any]] = lowlevel.fast._gated
gated_task: Callable[[Callable[..., Any]], Callable[..., Any]] = lowlevel.fast.gated_task
# The compiled dispatch module itself (``lowlevel.lib`` once loaded): binding it here
# does not load the library at import. Every path reaches _runtime.ensure_initialized()
# (which loads it) before its first call; before that a call would only return
# lowlevel.MISSING_SYMBOL, which check() reports as FunctionNotFoundError.
#: Ungated: only for calls that must go on while finalize runs (the report threads'
#: aclrtProcessReport, which runs the host callbacks finalize waits for).
raw_lib: Any = _cffi_lib
#: Every other runtime call of the object layers: gated.
lib: Any = _Gated(_cffi_lib)
check: Callable[[int, str], None] = lowlevel.check
_aclrtSetCurrentContext = lib.aclrtSetCurrentContext
#: Checked C fast paths (lowlevel.fast): value returned, typed error raised; gated. The
#: sliced waits (``_wait_*``: interruptible, timeouts kept exact) pass the gate once per
#: slice themselves.
fast: Any = _Gated(lowlevel.fast, ("_wait_stream", "_wait_event", "_wait_device"))
#: The sliced waits (``timeout`` ms, -1 = none): interruptible by Ctrl-C, timeouts kept
#: exact, gated per slice; ``lowlevel.fast``'s underscore functions, bound here once.
sliced_wait_stream: Callable[[int, int], None] = lowlevel.fast._wait_stream
sliced_wait_event: Callable[[int, int], None] = lowlevel.fast._wait_event
sliced_wait_device: Callable[[int], None] = lowlevel.fast._wait_device
fast_get_current_context: Callable[[], int] = lowlevel.fast.get_current_context
#: A section of Python code that must finish before finalize releases anything (a
#: release, a host-side copy into pinned memory): ``if gate_try_enter(): try: ...
#: finally: gate_exit()``; refused (False) once finalize started.
gate_try_enter: Callable[[], bool] = lowlevel.fast._gate_try_enter
gate_enter: Callable[[str], None] = lowlevel.fast._gate_enter
gate_exit: Callable[[], None] = lowlevel.fast._gate_exit
#: Address of the gate's state for the C extensions (pyacl_rt._memcore's hit paths).
gate_api: Callable[[], int] = lowlevel.fast._gate_api
_scratch: Callable[[], Any] = lowlevel.scratch
_get_ident = threading.get_ident
_sleep = time.sleep


# ------------------------------------------------------------ thread state
class CtxRef:
    """One ACL context as seen from Python: a primary context or an explicit one.

    ``device < 0`` means dead (runtime finalized, process forked, or the explicit
    context was destroyed); ``dead`` then says why. Identity (not the handle value,
    which the runtime may reuse) is what the per-thread cache compares.

    Closing an explicit context races with releases of its objects on other threads
    (garbage collection runs finalizers anywhere): :meth:`enter` / :meth:`leave` bracket
    such a release, :meth:`close_wait` (the closing thread) refuses new ones and waits
    for those in progress - the context's own small finalize gate (the process-wide one
    covers :func:`pyacl_rt.finalize`). Used for explicit contexts only: a primary
    context closes only at finalize.
    """

    __slots__ = ("__weakref__", "closer", "dead", "device", "handle", "owner", "users")

    def __init__(self, handle: int, device: int, owner: weakref.ref[Any] | None = None) -> None:
        self.handle = handle
        self.device = device
        self.dead: str | None = None
        #: weakref to the explicit :class:`~pyacl_rt.Context` (None for a
        #: primary context). Weak so that thread caches never keep a Context alive;
        #: objects created in a Context hold it strongly (see :func:`owner_of`).
        self.owner = owner
        #: idents of the threads releasing objects of this context right now (one entry
        #: per nested release; list append/remove are atomic under the GIL).
        self.users: list[int] = []
        #: ident of the thread closing this context, or 0.
        self.closer = 0

    def enter(self) -> bool:
        """Before a release uses handles of this context: False (nothing entered) when
        the context is dead or being closed by another thread - its handles go with it;
        else :meth:`leave` afterwards."""
        me = _get_ident()
        users = self.users
        users.append(me)
        closer = self.closer
        if self.device < 0 or (closer and closer != me):
            users.remove(me)
            return False
        return True

    def leave(self) -> None:
        self.users.remove(_get_ident())

    def close_wait(self) -> None:
        """The calling thread is about to close this context: refuse new releases on
        other threads (:meth:`enter`) and wait, GIL released, for those in progress."""
        me = _get_ident()
        self.closer = me
        while any(u != me for u in list(self.users)):
            _sleep(0.0005)

    def make_current(self) -> None:
        """Install this context on the calling thread (``aclrtSetCurrentContext``)."""
        if self.device < 0:
            raise_dead(self.dead)
        rc = _aclrtSetCurrentContext(self.handle)
        if rc:
            check(rc, "aclrtSetCurrentContext")
        local.st.ctx = self

    def ensure_current(self) -> None:
        """Make this context current on the calling thread unless it already is (the
        cached identity compare; ``aclrtSetCurrentContext`` only on a miss). Hot paths
        write the compare inline and call :meth:`make_current` on a miss."""
        if local.st.ctx is not self:
            self.make_current()

    def kill(self, reason: str) -> None:
        self.device = -1
        self.handle = 0
        self.dead = reason

    def __repr__(self) -> str:
        kind = "explicit" if self.owner is not None else "primary"
        if self.device < 0:
            return f"<{kind} context ({self.dead})>"
        return f"<{kind} context 0x{self.handle:x} on device {self.device}>"


class current:
    """``with current(ctx):`` - ``ctx`` is current on this thread inside the block and
    the thread's previous context is put back on exit (torch's device guard, for ACL
    contexts). The one way to "make this current, then restore".

    ``current(None)`` installs nothing: it only saves the thread's context and restores
    it on exit, for code that may switch contexts on its way (freeing, waiting for
    streams of other devices). Entering costs one identity compare when ``ctx`` is
    already current. Restoring never raises: a previous context that died meanwhile is
    left alone, and a failing ``aclrtSetCurrentContext`` clears the thread's cache (the
    next call re-installs its context), so the guard never masks the block's exception
    nor skips work after the block.
    """

    __slots__ = ("ctx", "prev")

    def __init__(self, ctx: CtxRef | None = None) -> None:
        self.ctx = ctx
        self.prev: CtxRef | None = None

    def __enter__(self) -> CtxRef | None:
        st = local.st
        self.prev = st.ctx
        ctx = self.ctx
        if ctx is not None and st.ctx is not ctx:
            ctx.make_current()
        return ctx

    def __exit__(self, *exc: object) -> None:
        restore_context(self.prev)


def restore_context(prev: CtxRef | None) -> None:
    """Make ``prev`` (a context saved earlier) current again if something switched
    away from it. Never raises an Exception: on failure the thread's cache is cleared."""
    st = local.st
    if prev is None or st.ctx is prev or prev.device < 0:
        return
    try:
        prev.make_current()
    except Exception:
        st.ctx = None


def owner_of(ref: CtxRef) -> object:
    """The explicit Context behind ``ref`` (to hold it alive), or None."""
    owner = ref.owner
    return owner() if owner is not None else None


def finalized_error(what: str, detail: str = "") -> errors.RuntimeFinalizedError:
    """The error for an object of a finalized runtime: what happened and what to do
    (start the runtime again if it is not, then create a new object)."""
    from . import _runtime  # layer 3, below this module

    if _runtime.is_initialized():
        advice = "the runtime was started again since: create a new one"
    else:
        advice = "call pyacl_rt.init() to start the runtime again, then create a new one"
    return errors.RuntimeFinalizedError(
        f"this {what} belongs to a runtime that was finalized (pyacl_rt.finalize() or "
        f"interpreter exit) and cannot be used any more{detail}; {advice}",
        explanation="",
    )


def raise_dead(reason: str | None) -> None:
    if reason == "forked":
        raise errors.ForkedProcessError()
    if reason == "finalized":
        raise finalized_error("object")
    if reason is None:
        raise ObjectClosedError("object is not bound to a context", explanation="")
    raise ObjectClosedError(reason, explanation="")


#: Sentinels objects switch to when closed / made inert by finalize.
CLOSED_REF = CtxRef(0, -1)
CLOSED_REF.dead = "object is closed"
FINALIZED_REF = CtxRef(0, -1)
FINALIZED_REF.dead = "finalized"


class ThreadState:
    """Per-thread state (one per thread, reached through ``local.st``).

    A plain slotted object: hot paths pay one thread-local lookup (``local.st``),
    then cheap slot loads, instead of one thread-local lookup per attribute.
    """

    __slots__ = ("active", "ctx", "device", "guards", "i32", "in_callback", "scratch", "streams")

    def __init__(self) -> None:
        #: The context known to be current on this thread (None = unknown / none).
        self.ctx: CtxRef | None = None
        #: The device selected by set_device / ``with device()`` (-1 = none).
        self.device: int = -1
        #: The explicit Context activated on this thread (``with ctx:``), or None.
        self.active: CtxRef | None = None
        #: device index -> current Stream of this thread (managed by :mod:`pyacl_rt._stream`).
        self.streams: dict[int, Any] = {}
        #: Saved states of ``with Device(i):`` blocks.
        self.guards: list[tuple[int, CtxRef | None]] = []
        #: True on a host-callback (report) thread, for its whole life: blocking calls
        #: are refused there and finalizers defer releases (pyacl_rt._releaser).
        self.in_callback: bool = False
        #: lowlevel's per-thread out-parameter arrays, and its int32_t[4] directly
        #: (one attribute load less on the hot paths).
        self.scratch: Any = _scratch()
        self.i32: Any = self.scratch.i32


class _Local(threading.local):
    def __init__(self) -> None:
        global _main_state
        self.st = ThreadState()
        # get_ident, not current_thread(): this also runs on threads threading does not
        # know (C threads, a thread being torn down while it releases its objects),
        # where current_thread() would register a stray _DummyThread.
        if threading.get_ident() == _main_ident:
            _main_state = self.st


_main_ident = threading.main_thread().ident
#: The main thread's state: its selected device is the fallback of other threads.
_main_state: ThreadState | None = None
#: ``_main_state.device`` if >= 0 else 0, kept up to date by :func:`select_device`.
_fallback_device = 0


def select_device(st: ThreadState, index: int) -> None:
    """Set a thread's selected device (-1 = none); tracks the main thread's as the
    fallback of threads that never selected one."""
    global _fallback_device
    st.device = index
    if st is _main_state:
        _fallback_device = index if index >= 0 else 0


#: ``local.st`` is the calling thread's :class:`ThreadState`.
local: Final = _Local()
#: The same object under the name the compiled extension ``_memcore`` looks up
#: (``pyacl_rt._state._local``) and that a few modules still import.
_local: Final = local


def run_finalizer(f: weakref.finalize[..., Any] | None) -> bool:
    """Run an object's finalizer now, exactly once; True if it ran.

    Uses ``detach()`` rather than ``f()``: at interpreter exit ``weakref.finalize``
    turns ``f()`` into a no-op once its own atexit hook ran, which may be before
    pyacl_rt's finalize, and the handle would then never be released.
    """
    if f is None:
        return False
    info = f.detach()
    if info is None:
        return False
    _obj, func, args, kwargs = info
    func(*args, **kwargs)
    return True


def log_release_failure(func: str, handle: int, rc: int) -> None:
    """Log a failed destroy/free in a finalizer and consume the runtime's error text
    (it must not become the message of this thread's next error)."""
    _log.warning("%s(0x%x) failed with %d: %s", func, handle, rc, lowlevel.recent_error_message())


_T = TypeVar("_T")


class LiveSet(Generic[_T]):
    """Weak registry of the live objects of one kind (Streams, Events, Contexts): what
    finalize and closing a Context make inert. Thread-safe; its lock is replaced in a
    forked child (a parent thread may have held it)."""

    __slots__ = ("_items", "_lock")

    def __init__(self) -> None:
        self._items: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        fork_hooks.add(self._after_fork, 10)  # _runtime.PRIORITY_FIRST + 10

    def _after_fork(self) -> None:
        self._lock = threading.Lock()

    def add(self, obj: _T) -> None:
        with self._lock:
            self._items.add(obj)

    def discard(self, obj: _T) -> None:
        with self._lock:
            self._items.discard(obj)

    def snapshot(self, clear: bool = False) -> list[_T]:
        """The live objects now (and forget them all if ``clear``)."""
        with self._lock:
            items = list(self._items)
            if clear:
                self._items.clear()
        return items

    def make_inert(self, ctx_filter: CtxRef | None, reason: CtxRef) -> None:
        """``obj.make_inert(reason)`` for each live object (of context ``ctx_filter``
        only, unless None) and forget it. Never raises: failures are logged."""
        for obj in self.snapshot():
            if ctx_filter is not None and getattr(obj, "ctx_ref", None) is not ctx_filter:
                continue
            try:
                obj.make_inert(reason)  # type: ignore[attr-defined]
            except BaseException:  # pragma: no cover - defensive
                _log.exception("pyacl_rt: closing %r failed", obj)
            self.discard(obj)


def forget_thread_context() -> None:
    """Forget which context pyacl_rt believes is current on this thread.

    Call this after changing the thread's context through raw
    :mod:`pyacl_rt.lowlevel` calls (or torch_npu / a C extension did) and before using
    existing objects on this thread (``Stream.query``, ``Event.record``, copies...):
    the next pyacl_rt call re-installs the right context. Creating objects,
    allocating and selecting a device detect a foreign switch by themselves (see the
    module docstring). Not needed when only pyacl_rt objects are used.
    """
    local.st.ctx = None


def refuse_copy(obj: object, what: str) -> NoReturn:
    """``__reduce__`` / ``__copy__`` / ``__deepcopy__`` of an object owning a handle."""
    raise TypeError(
        f"{type(obj).__name__} objects cannot be pickled or copied: a copy would share "
        f"the raw {what} handle and keep using it after the original is closed. "
        f"Pass the {type(obj).__name__} object itself around (it is thread-safe)."
    )


def refuse_in_callback(what: str) -> None:
    """Raise :class:`CallbackContextError` when called on a host-callback thread."""
    if local.st.in_callback:
        raise CallbackContextError(
            f"{what} called from inside a host callback: this would wait for the "
            "callback itself and deadlock. Do blocking work outside the callback "
            "(e.g. hand it to another thread).",
            explanation="",
        )


def validated_ctx(st: ThreadState) -> CtxRef | None:
    """The thread's cached current context if the runtime agrees, else None (and the
    cache is cleared, so the next ``st.ctx is not ref`` test re-installs ``ref``).

    Something other than pyacl_rt (raw :mod:`lowlevel` calls, torch_npu, a C
    extension) may have switched this thread's ACL context behind the cache. One
    GIL-held ``aclrtGetCurrentContext`` (``lowlevel.fast``, ~30 ns) detects it. Called
    on the non-hot entry points only: object creation, allocation, device selection.
    """
    cur = st.ctx
    if cur is None:
        return None
    if cur.device >= 0:
        try:
            if fast_get_current_context() == cur.handle:
                return cur
        except errors.AclError:
            pass  # no current context (or no runtime): the cache is wrong either way
    st.ctx = None
    return None


# ------------------------------------------------------------------ hooks
#: Run with the dying explicit context before it is destroyed, in priority order
#: (``_runtime.PRIORITY_*``): events, streams (and their callback subscriptions),
#: buffers allocated in it, then the copy engine's peer-access cache.
context_close_hooks: Final[PriorityHooks[Callable[[CtxRef], None]]] = PriorityHooks("context close")
#: Run with the device index after a successful device synchronize (the stream
#: layer releases keep-alive lists there).
device_sync_hooks: Final[PriorityHooks[Callable[[int], None]]] = PriorityHooks("device sync")
