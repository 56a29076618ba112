"""Process-wide lifecycle of the Ascend runtime (the role of torch_npu's ``NpuSysCtrl``).

States::

    UNINITIALIZED --init()/first use--> READY --finalize()/exit--> FINALIZED
                                          ^                            |
                                          +-------- init() ------------+

* :func:`init` calls ``aclInit`` (with ``config_path`` or ``PYACL_RT_ACL_CONFIG``).
  If ``aclInit`` answers ``ACL_ERROR_REPEAT_INITIALIZE`` (100002) someone else
  (torch_npu, a C extension) already initialised ACL in this process: pyacl_rt
  marks the runtime *external* and will never call ``aclFinalize``.
* :func:`ensure_initialized` is the hot-path guard every object calls: one
  module-level boolean test when the runtime is up; the lock is only taken on the
  slow path, which starts the runtime lazily (``PYACL_RT_LAZY_INIT=1``, the
  default) or raises :class:`~pyacl_rt.errors.NotInitializedError`
  (``PYACL_RT_LAZY_INIT=0``).
* :func:`finalize` runs the release hooks in priority order (events, streams,
  memory, contexts, devices; see the ``PRIORITY_*`` constants), then
  ``aclFinalize`` if pyacl_rt owns ACL. It is idempotent and also runs at
  interpreter exit (``atexit``). A hook that raises is logged and the rest still run.
* **Re-initialisation**: ACL itself allows ``aclInit`` again after ``aclFinalize``
  (acl_abi.md section 5.1, the implementation), so an explicit :func:`init` after
  :func:`finalize` starts a new *generation*. (The RT documentation contradicts
  itself and some older CANN releases refused it; if the loaded runtime refuses,
  its ``aclInit`` error is raised unchanged - pyacl_rt does not pretend.) Lazy init
  never restarts a finalized runtime: after :func:`finalize` implicit use raises
  :class:`~pyacl_rt.errors.RuntimeFinalizedError` until :func:`init` is called.
  This keeps stray objects (``__del__`` during interpreter shutdown) from
  re-initialising the runtime behind the user's back.
* **Generations**: an object captures :func:`generation` when it is created. Use
  :func:`check_alive` before touching the runtime (raises after finalize) and
  :func:`is_alive` in ``close()``/finalizers (return quietly when ``False``: the
  handle died with the runtime, releasing it again would be a use-after-free).
* **The finalize gate**: every runtime call of pyacl_rt's object layers passes a gate
  (``lowlevel.fast._gated``; see :mod:`pyacl_rt._state`). :func:`finalize` first waits,
  interruptibly, for the device work already queued (:data:`finalize_prepare`), then
  closes the gate and waits until no call is in flight on another thread; only then
  does it release anything. From then on (until :func:`init`) a call from another
  thread raises :class:`~pyacl_rt.errors.RuntimeFinalizedError` without reaching the
  runtime, so no handle is used after finalize destroyed it; a release refused there
  (a finalizer run by garbage collection on another thread) is handed to finalize
  (:func:`defer_to_finalize`), so every handle is destroyed exactly once.
* **Fork**: the package's fork handler (:data:`pyacl_rt._hooks.fork_hooks`, this
  module's hook first) marks a child forked from a parent that had
  initialised the runtime; any runtime use there raises
  :class:`~pyacl_rt.errors.ForkedProcessError` recommending ``spawn``. The
  child's exit does not finalize the parent's runtime. Processes started with
  ``spawn``/``forkserver`` are fresh and work normally.

Thread-safe. Layer 3: imports layers 1-2 only.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable
from typing import Final

from . import lowlevel
from ._hooks import Hook, PriorityHooks, fork_hooks
from ._log import get_logger
from ._options import get_options
from ._raw._abi_runtime import CONSTANTS
from ._sanitize import arm as _arm_sanitizer
from .errors import (
    AclError,
    ConfigError,
    ForkedProcessError,
    NotInitializedError,
    RuntimeFinalizedError,
)

__all__ = [
    "EXIT_WATCHDOG_SECONDS",
    "GATE_WARN_SECONDS",
    "PRIORITY_CONTEXTS",
    "PRIORITY_DEVICES",
    "PRIORITY_EVENTS",
    "PRIORITY_FIRST",
    "PRIORITY_LAST",
    "PRIORITY_MEMORY",
    "PRIORITY_STREAMS",
    "ReleaseHook",
    "Runtime",
    "check_alive",
    "defer_to_finalize",
    "ensure_initialized",
    "finalize",
    "finalize_prepare",
    "generation",
    "in_bad_fork",
    "init",
    "is_alive",
    "is_external",
    "is_finalized",
    "is_initialized",
    "register_release_hook",
    "registered_hook_count",
    "runtime",
    "settle",
    "state",
    "status",
]

_log = get_logger("pyacl_rt.runtime")

ACL_ERROR_REPEAT_INITIALIZE: Final = CONSTANTS["ACL_ERROR_REPEAT_INITIALIZE"]
ACL_ERROR_REPEAT_FINALIZE: Final = CONSTANTS["ACL_ERROR_REPEAT_FINALIZE"]

# ------------------------------------------------------ release-hook priorities
# Lower runs first. The gaps leave room for finer ordering (e.g. PRIORITY_MEMORY - 1
# for a caching allocator that must empty before raw buffers are freed).
PRIORITY_FIRST: Final = 0
"""Runs before everything else (e.g. synchronise devices, stop callback threads)."""
PRIORITY_EVENTS: Final = 100
PRIORITY_STREAMS: Final = 200
PRIORITY_MEMORY: Final = 300
PRIORITY_CONTEXTS: Final = 400
PRIORITY_DEVICES: Final = 500
PRIORITY_LAST: Final = 900
"""Runs after devices are reset, just before ``aclFinalize``."""

UNINITIALIZED: Final = "uninitialized"
READY: Final = "ready"
FINALIZED: Final = "finalized"


# ------------------------------------------------------------ the runtime object
class Runtime:
    """The process's one runtime object (the role of torch_npu's ``NpuSysCtrl``): the
    lifecycle state and the hook lists through which the layers above take part in
    finalize, settle and the fork reset. One instance, :data:`runtime`; the module
    functions are its interface.

    ``lock`` serialises init/finalize and guards the state. It is re-entrant so a
    release hook may call into the runtime. The hook lists have their own locks, so
    removing a hook (from any thread) never waits for a running finalize. The hot-path
    flags are module globals mirrored from it (:func:`_publish`): ``_ready`` (one global
    load in :func:`ensure_initialized`), ``_live_generation`` (:func:`is_alive`) and
    ``_generation``, which ``_memcore`` reads from the module dict.
    """

    __slots__ = (
        "at_exit",
        "bad_fork",
        "config_path",
        "current_step",
        "ever_initialized",
        "external",
        "finalize_guards",
        "finalize_prepare",
        "finalizing",
        "generation",
        "late",
        "late_lock",
        "lock",
        "release_hooks",
        "settle_hooks",
        "state",
    )

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.state: str = UNINITIALIZED
        #: 0 before the first init, +1 at each init.
        self.generation = 0
        self.external = False
        self.config_path: str | None = None
        self.ever_initialized = False
        #: a child forked from a parent that had initialised the runtime
        self.bad_fork = False
        self.finalizing = False
        #: set once the interpreter-exit finalize starts
        self.at_exit = False
        #: what finalize is doing right now (for the watchdog)
        self.current_step: str | None = None
        #: Run first by :func:`finalize`, in priority order (``PRIORITY_*``); a guard
        #: raises to refuse the call on this thread. Registered from higher layers: the
        #: callback layer refuses finalize on its host-callback (report) threads, where
        #: resetting the devices would wait for the stream that waits for the running
        #: callback (a deadlock); the memory layer refuses while buffers are exported.
        self.finalize_guards: PriorityHooks[Callable[[], None]] = PriorityHooks("finalize guard")
        #: Run by :func:`finalize` (also at interpreter exit) after the guards, before the
        #: gate closes, while the runtime is fully usable, in priority order: wait for the
        #: device work already queued, interruptibly (the device layer synchronizes every
        #: device pyacl_rt set, in slices). A hook that raises an ``Exception`` is logged;
        #: a ``KeyboardInterrupt`` (any non-``Exception``) aborts finalize with nothing
        #: released.
        self.finalize_prepare: PriorityHooks[Callable[[], None]] = PriorityHooks("finalize prepare")
        #: Releases refused by the closed gate on another thread (see
        #: :func:`defer_to_finalize`); None when finalize does not accept any (not
        #: running, or past the point where it runs them). Guarded by ``late_lock``.
        self.late: list[Callable[[], object]] | None = None
        self.late_lock = threading.Lock()
        #: Run by :func:`settle`, in priority order (the ``PRIORITY_*`` offsets say the
        #: order: streams and devices first, then the releaser, deferred frees, pooled
        #: events, caches).
        self.settle_hooks: PriorityHooks[Callable[[], None]] = PriorityHooks("settle")
        #: Run by :func:`finalize` / interpreter exit, in priority order (see
        #: :func:`register_release_hook`).
        self.release_hooks: PriorityHooks[Callable[[], object]] = PriorityHooks("release")


#: The runtime object.
runtime: Final = Runtime()
finalize_guards: Final = runtime.finalize_guards
finalize_prepare: Final = runtime.finalize_prepare
settle_hooks: Final = runtime.settle_hooks
release_hooks: Final = runtime.release_hooks

# Hot-path mirrors of the runtime object, read without the lock (see :class:`Runtime`).
_ready: bool = False
_live_generation: int = -1  # == _generation while READY, else -1
_generation: int = 0


def _publish() -> None:
    """Mirror the runtime object's state into the hot-path globals (under its lock)."""
    global _ready, _live_generation, _generation
    ready = runtime.state == READY and not runtime.bad_fork
    _generation = runtime.generation
    _live_generation = runtime.generation if ready else -1
    _ready = ready


# The gate (pyacl_rt/_raw/_fastcall.c): close + drain, release the finalizing thread, open.
_gate_close: Callable[[float], bool] = lowlevel.fast._gate_close
_gate_release: Callable[[], None] = lowlevel.fast._gate_release
_gate_open: Callable[[], None] = lowlevel.fast._gate_open

#: finalize logs a warning each time it has waited this many more seconds for calls in
#: flight on other threads (it keeps waiting: releasing under them would be a
#: use-after-free).
GATE_WARN_SECONDS: float = 10.0

#: Interpreter-exit watchdog: if finalize at exit takes longer than this many seconds,
#: log (once) which release hook or ACL call it is stuck in. Diagnostic only: a hook
#: blocked in C cannot be interrupted.
EXIT_WATCHDOG_SECONDS: float = 10.0


#: Handle returned by :func:`register_release_hook`; ``remove()`` unregisters.
ReleaseHook = Hook


# ----------------------------------------------------------------- queries
def state() -> str:
    """``"uninitialized"``, ``"ready"`` or ``"finalized"``."""
    return runtime.state


def is_initialized() -> bool:
    """True while the runtime is up (and this is not a bad forked child)."""
    return _ready


def is_finalized() -> bool:
    """True after :func:`finalize` (until an explicit :func:`init`)."""
    return runtime.state == FINALIZED


def at_exit() -> bool:
    """True once pyacl_rt's interpreter-exit finalize has started (release hooks use it
    to stay quiet about what the process end releases anyway)."""
    return runtime.at_exit


def is_external() -> bool:
    """True if ACL was initialised by someone else; pyacl_rt will not call aclFinalize."""
    return runtime.external


def in_bad_fork() -> bool:
    """True in a process forked from a parent that had initialised the runtime."""
    return runtime.bad_fork


def generation() -> int:
    """The current runtime generation; objects capture it at creation.

    Starts at 0 (never initialised) and increases by one at each :func:`init`.
    """
    return _generation


def is_alive(gen: int) -> bool:
    """True if an object of generation ``gen`` may still touch its handles.

    ``close()`` and finalizers should return quietly when this is False.
    """
    return gen == _live_generation


def check_alive(gen: int, what: str = "object") -> None:
    """Raise unless an object of generation ``gen`` may still be used.

    :class:`~pyacl_rt.errors.ForkedProcessError` in a bad forked child,
    :class:`~pyacl_rt.errors.RuntimeFinalizedError` after finalize (or after a
    re-init, for objects of an older generation).
    """
    if gen == _live_generation:
        return
    if runtime.bad_fork:
        raise ForkedProcessError()
    if runtime.state == READY:
        msg = (
            f"this {what} belongs to an earlier runtime generation ({gen}; current "
            f"{_generation}): it died when the runtime was finalized. Create a new one."
        )
    else:
        msg = (
            f"this {what} cannot be used: the runtime was finalized "
            "(pyacl_rt.finalize() or interpreter exit). Its resources were released; "
            "create a new one after pyacl_rt.init()."
        )
    raise RuntimeFinalizedError(msg)


def status() -> dict[str, object]:
    """A snapshot of the lifecycle state (for ``pyacl-rt info`` and debugging)."""
    with runtime.lock:
        return {
            "state": runtime.state,
            "generation": runtime.generation,
            "external": runtime.external,
            "config_path": runtime.config_path,
            "bad_fork": runtime.bad_fork,
            "release_hooks": registered_hook_count(),
        }


# ------------------------------------------------------------------- init
def ensure_initialized() -> None:
    """Make sure the runtime is up; the cheap guard for every hot path.

    Fast path: one module-level boolean test. Slow path (under the lock): lazy
    :func:`init`, or raise :class:`~pyacl_rt.errors.ForkedProcessError`,
    :class:`~pyacl_rt.errors.RuntimeFinalizedError` or
    :class:`~pyacl_rt.errors.NotInitializedError`.
    """
    if _ready:
        return
    _ensure_slow()


def _ensure_slow() -> None:
    if runtime.bad_fork:
        raise ForkedProcessError()
    with runtime.lock:
        if _ready:
            return
        if runtime.state == FINALIZED:
            raise RuntimeFinalizedError(
                "the pyacl_rt runtime was finalized; call pyacl_rt.init() to start it "
                "again (lazy initialisation does not restart a finalized runtime)"
            )
        if not get_options().lazy_init:
            raise NotInitializedError(
                "the pyacl_rt runtime is not initialised and PYACL_RT_LAZY_INIT=0: call "
                "pyacl_rt.init() first"
            )
        init()


def init(config_path: str | os.PathLike[str] | None = None) -> None:
    """Start the runtime: load the library and call ``aclInit``. Idempotent.

    ``config_path``: JSON file passed to ``aclInit`` (default ``PYACL_RT_ACL_CONFIG``,
    else none). Calling ``init`` again while ready is a no-op, unless a *different*
    config is requested, which raises :class:`~pyacl_rt.errors.ConfigError` (ACL
    cannot change its configuration without a finalize).

    If ACL was already initialised by someone else (``aclInit`` returns 100002),
    the runtime is marked external and ``aclFinalize`` is left to its owner.
    """
    rt = runtime
    if rt.bad_fork:
        raise ForkedProcessError(function="aclInit")
    path: str | None
    if config_path is not None:
        if not isinstance(config_path, (str, os.PathLike)):
            raise TypeError(
                "init(): config_path must be a str or os.PathLike (a JSON file) or None, "
                f"not {type(config_path).__name__}"
            )
        path = os.path.abspath(os.fspath(config_path))
        if not os.path.isfile(path):
            raise ConfigError(
                f"ACL config file {path!r} does not exist (expected a JSON file for aclInit)",
                variable=None,
                value=path,
                accepted="path to an existing JSON file",
            )
    else:
        path = None
    with rt.lock:
        if rt.state == READY:
            if path is not None and path != rt.config_path:
                raise ConfigError(
                    f"the runtime is already initialised with config {rt.config_path!r}; "
                    f"cannot switch to {path!r} without finalize()",
                    value=path,
                )
            return
        if path is None:
            path = get_options().acl_config
        lowlevel.load()
        rc = lowlevel.lib.aclInit(os.fsencode(path) if path is not None else lowlevel.ffi.NULL)
        if rc == ACL_ERROR_REPEAT_INITIALIZE:
            external = True
            # aclInit records the "error" on this thread; clear it so it does not
            # show up as the recent message of the next genuine failure.
            lowlevel.clear_error()
        else:
            lowlevel.check(rc, "aclInit")
            external = False
        rt.external = external
        rt.config_path = path
        rt.generation += 1
        rt.state = READY
        rt.ever_initialized = True
        _publish()
        _gate_open()
        _arm_sanitizer()  # the mock's race sanitizer, when on (else a no-op)
        _log.debug(
            "runtime initialised (generation %d, %s)",
            rt.generation,
            "external ACL" if external else "owned ACL",
        )


# ----------------------------------------------------------- release hooks
def register_release_hook(
    fn: Callable[[], object],
    priority: int,
    name: str | None = None,
    *,
    once: bool = False,
) -> Hook[Callable[[], object]]:
    """Register ``fn()`` to run at :func:`finalize` / interpreter exit.

    Hooks run in ascending ``priority`` (use the ``PRIORITY_*`` constants: events,
    streams, memory, contexts, devices), hooks of equal priority in reverse order of
    registration (like ``atexit``; the rule of every :class:`~pyacl_rt._hooks.PriorityHooks`
    list). An exception a hook raises is logged, never
    propagated, and the remaining hooks still run.

    By default a hook stays registered and runs at *every* finalize (a module-level
    registry that releases whatever it holds, e.g. the devices that were set).
    ``once=True`` unregisters it when it runs (a hook tied to one object).
    Returns a handle whose ``remove()`` unregisters it (cheap: call it from an
    object's ``close()``).
    """
    return release_hooks.add(fn, priority, name=name, once=once)


def registered_hook_count() -> int:
    """Number of release hooks currently registered."""
    return len(release_hooks)


def _hook_failed(hook: Hook[Callable[[], object]], exc: BaseException) -> None:
    _log.error(
        "pyacl_rt release hook %r raised during finalize",
        hook.name,
        exc_info=(type(exc), exc, exc.__traceback__),
    )


def _hook_step(hook: Hook[Callable[[], object]] | None) -> None:
    step = None if hook is None else f"release hook {hook.name!r} (priority {hook.priority})"
    runtime.current_step = step


def _run_hooks() -> None:
    # A hook may remove later hooks (closing an object removes its own hook) or
    # register new ones (run in a further round); one that raises is logged.
    release_hooks.run(on_error=_hook_failed, step=_hook_step)


# ------------------------------------------------------------------ settle
def settle() -> None:
    """Bring pyacl_rt to rest without finalizing: the calling thread's device and
    stream selection are forgotten, pooled streams destroyed, the devices in use
    synchronized (keep-alive lists released), deferred releases run, pooled marker
    events destroyed and the allocator caches emptied. The one call a test harness
    makes between tests (tests/conftest.py); what is left alive is what the
    application still holds. Runs :data:`settle_hooks`; an error propagates."""
    settle_hooks.run()


# ---------------------------------------------------------------- finalize
def finalize() -> None:
    """Release everything pyacl_rt holds and, if it owns ACL, call ``aclFinalize``.

    Runs the release hooks in priority order first. Idempotent: a second call, a
    call before :func:`init`, or a call in a bad forked child does nothing.
    Objects created before become inert (``close()`` is a no-op, use raises
    :class:`~pyacl_rt.errors.RuntimeFinalizedError`).

    Raises the :class:`~pyacl_rt.errors.AclError` of ``aclFinalize`` if it fails
    (the runtime is considered finalized anyway). Refused with
    :class:`~pyacl_rt.errors.CallbackContextError` on a host-callback thread (it
    would wait for the callback itself); nothing is released then.
    """
    finalize_guards.run()
    err = _finalize()
    if err is not None:
        raise err


def defer_to_finalize(fn: Callable[[], object]) -> bool:
    """Hand a release the closed gate refused (on a thread other than the finalizing
    one) to the running :func:`finalize`, which runs ``fn()`` on its own thread before
    it destroys contexts and resets devices. Returns False when finalize does not take
    it (not running, or already past that point): the handle then dies with its
    context / device / ``aclFinalize``, and must not be touched. Never raises; safe in a
    finalizer. ``fn`` must never raise (it is logged if it does)."""
    rt = runtime
    with rt.late_lock:
        if rt.late is None:
            return False
        rt.late.append(fn)
        return True


def _run_late_releases() -> None:
    """Release hook (just before contexts): run the releases handed over by
    :func:`defer_to_finalize`; later ones are refused."""
    rt = runtime
    with rt.late_lock:
        items, rt.late = rt.late, None
    for fn in items or ():
        try:
            fn()
        except BaseException:  # pragma: no cover - release functions never raise
            _log.exception("pyacl_rt: a release handed to finalize raised")


def _prepare() -> None:
    """Run the :data:`finalize_prepare` hooks (the gate is still open). A hook raising
    an ``Exception`` is logged; anything else (KeyboardInterrupt) propagates."""
    for hook in finalize_prepare:
        step = f"waiting for queued device work ({getattr(hook, '__qualname__', hook)})"
        runtime.current_step = step
        try:
            hook()
        except Exception:
            _log.warning("pyacl_rt: finalize preparation %r failed", hook, exc_info=True)
        finally:
            runtime.current_step = None


def _finalize() -> AclError | None:
    rt = runtime
    if rt.bad_fork:
        return None
    with rt.lock:
        if rt.state != READY or rt.finalizing:
            return None
        rt.finalizing = True
        try:
            # 1. Wait (interruptibly) for the work already queued: a KeyboardInterrupt
            # here or in 2. leaves everything as it was.
            _prepare()
            # 2. Close the gate; wait until no call is in flight on another thread.
            # Releases refused from now on are handed to this finalize.
            with rt.late_lock:
                rt.late = []
            rt.current_step = "waiting for pyacl_rt calls in flight on other threads"
            try:
                waited = 0.0
                while not _gate_close(GATE_WARN_SECONDS):
                    waited += GATE_WARN_SECONDS
                    _log.warning(
                        "pyacl_rt: finalize has waited %.3g s for pyacl_rt calls in flight on "
                        "other threads (%d); it releases nothing before they return (a "
                        "thread blocked in a release, e.g. by a lock this thread holds?)",
                        waited,
                        lowlevel.fast._gate_state()[1],
                    )
            except BaseException:
                # Interrupted: the gate is open again, nothing was released; run what
                # was handed over meanwhile (it would have run normally a moment later).
                _run_late_releases()
                raise
            finally:
                rt.current_step = None
            # 3. Release everything, on this thread only.
            try:
                _run_hooks()
                err: AclError | None = None
                if not rt.external:
                    rt.current_step = "aclFinalize()"
                    try:
                        rc = lowlevel.lib.aclFinalize()
                    finally:
                        rt.current_step = None
                    if rc not in (0, ACL_ERROR_REPEAT_FINALIZE):
                        try:
                            lowlevel.check(rc, "aclFinalize")
                        except AclError as exc:
                            err = exc
                    elif rc == ACL_ERROR_REPEAT_FINALIZE:
                        _log.warning(
                            "aclFinalize reported 100037: ACL was already finalized by "
                            "another component of this process"
                        )
                        lowlevel.clear_error()
            finally:
                with rt.late_lock:
                    rt.late = None
                _gate_release()  # the gate stays closed until init()
            rt.state = FINALIZED
            rt.external = False
            _publish()
            _log.debug("runtime finalized (generation %d)", rt.generation)
            return err
        finally:
            rt.finalizing = False


def _watchdog_warn() -> None:
    step = runtime.current_step
    _log.warning(
        "pyacl_rt: finalize at interpreter exit has taken more than %.3g s; it is in %s. "
        "A release hook or the runtime is blocked (e.g. waiting for device work or a "
        "host callback that cannot run any more).",
        EXIT_WATCHDOG_SECONDS,
        step or "an unknown step",
    )


_previous_excepthook: Callable[[threading.ExceptHookArgs], object] | None = None


def _quiet_thread_excepthook(args: threading.ExceptHookArgs) -> None:
    """``threading.excepthook`` during interpreter exit: a thread (a daemon thread still
    running while the interpreter exits) that dies of ``RuntimeFinalizedError`` - the
    documented answer to a pyacl_rt call made after finalize - ends quietly instead of
    printing a traceback into the shutdown. Anything else goes to the previous hook."""
    if runtime.at_exit and isinstance(args.exc_value, RuntimeFinalizedError):
        _log.debug("pyacl_rt: %s ended at interpreter exit: %s", args.thread, args.exc_value)
        return
    hook = _previous_excepthook or threading.__excepthook__
    hook(args)


def _atexit_finalize() -> None:
    global _previous_excepthook
    runtime.at_exit = True
    if not runtime.bad_fork and threading.excepthook is not _quiet_thread_excepthook:
        _previous_excepthook = threading.excepthook
        threading.excepthook = _quiet_thread_excepthook
    watchdog: threading.Timer | None = None
    if runtime.state == READY and not runtime.bad_fork and EXIT_WATCHDOG_SECONDS > 0:
        watchdog = threading.Timer(EXIT_WATCHDOG_SECONDS, _watchdog_warn)
        watchdog.daemon = True
        try:
            watchdog.start()
        except RuntimeError:
            # Python >= 3.12 refuses new threads once interpreter shutdown has begun;
            # finalize must still run, just without the watchdog.
            watchdog = None
    try:
        err = _finalize()
    except KeyboardInterrupt:
        _log.warning(
            "pyacl_rt: finalize at interpreter exit was interrupted before it released "
            "anything; the runtime is left to process exit"
        )
        return
    except BaseException:
        _log.exception("pyacl_rt: finalize at interpreter exit failed")
        return
    finally:
        if watchdog is not None:
            watchdog.cancel()
    if err is not None:
        _log.warning("pyacl_rt: aclFinalize at interpreter exit failed: %s", err)


# -------------------------------------------------------------------- fork
def _after_fork_in_child() -> None:
    rt = runtime
    # The parent's threads are gone; a lock they held would never be released, a call
    # they had in flight never leaves the gate.
    rt.lock = threading.RLock()
    rt.late_lock = threading.Lock()
    lowlevel.fast._gate_after_fork()
    if not rt.ever_initialized:
        # The parent never started the runtime: the child may start its own, and the
        # module-level hooks registered at import (device, stream registries) stay.
        return
    rt.bad_fork = True
    rt.state = UNINITIALIZED
    _publish()
    # The parent's hooks refer to the parent's handles: never run them here.
    release_hooks.clear()


fork_hooks.add(_after_fork_in_child, PRIORITY_FIRST)
atexit.register(_atexit_finalize)
register_release_hook(_run_late_releases, PRIORITY_CONTEXTS - 1)
