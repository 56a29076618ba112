"""Sync-debug mode: report calls that make the host wait for the device.

Like ``torch.cuda.set_sync_debug_mode``: in mode ``"warn"`` (1) every blocking entry
point issues a :class:`~pyacl_rt.errors.SyncDebugWarning` attributed to the user's line, in mode
``"error"`` (2) it raises :class:`~pyacl_rt.errors.SyncDebugError` instead of waiting;
``"default"`` (0) reports nothing. The mode lives in a :class:`contextvars.ContextVar`,
so it is scoped per thread and per asyncio task: setting it in one thread or task never
changes another (a task starts with a copy of its creator's context, so it inherits the
mode that was in force when it was created). A thread that never set it uses the
process default, ``PYACL_RT_SYNC_DEBUG`` (read once, on first need; ``"default"`` if
unset). :class:`sync_debug_mode` sets it for a ``with`` block and restores exactly what
was there before.

:data:`BLOCKING_CALLS` is the single list of public calls that may block and are
reported. Higher layers put one hook where such a call is about to wait::

    if sync_debug_active():
        check_sync("Stream.synchronize()")  # what waits here

``sync_debug_active`` *is* the ContextVar's bound ``get``: with reporting off, a blocking call
pays one ``ContextVar.get`` and a truth test, no Python call. It is true when the mode
is on or not yet known in this context (the first check of a thread or task reads the
process default and stores it in the context, so later checks stay on the fast path).
:func:`check_sync` decides and reports; the report names the pyacl_rt call the user
made, found on the stack (for ``buf.copy_to_host()`` the wait is in a synchronous copy,
the report says ``DeviceBuffer.copy_to_host()``).

Not reported (documented in docs/guides/service.md): waits pyacl_rt does on the user's behalf at
teardown, i.e. :func:`pyacl_rt.finalize` and interpreter exit, garbage
collection of streams and buffers, :meth:`pyacl_rt.Context.close` (closes what
is left in the context), and frees deferred from a host callback (done by the releaser
thread or at the next allocation). A teardown path must neither raise nor warn
(finalizers cannot report to anyone), so none of those paths has a hook. Nor are the
caching allocator's waits inside an allocation (a cache miss may wait for the event of
the allocation stream, out of memory frees the cache after a device synchronize): as in
torch, they are the allocator's business, not a call the user made.
The raw layer (:mod:`pyacl_rt.lowlevel`, ``lowlevel.fast``) is 1:1 and unchecked.

Rule for hooks that may nest: a pyacl_rt call that blocks in several places reports
once, at its first hook. When a hook fires, the pyacl_rt frames above it are looked
at: a frame of a function that has a hook on a line *before* the line that frame is
executing passed that hook already, so the inner hook stays silent (e.g. ``copy()``
waiting in ``Stream.synchronize()``). So put a hook before the nested blocking calls
it covers, and only under the same condition as they run.

Layer 1: imports only the standard library, :mod:`errors`, :mod:`_options` and
:mod:`_args`.
"""

from __future__ import annotations

import os
import sys
import warnings
from contextvars import ContextVar, Token
from types import CodeType, FrameType
from typing import Final

from ._args import index_arg
from ._options import SYNC_DEBUG_MODES, get_options
from .errors import SyncDebugError, SyncDebugWarning

__all__ = [
    "BLOCKING_CALLS",
    "get_sync_debug_mode",
    "set_sync_debug_mode",
    "sync_debug_mode",
]

#: Every public pyacl_rt call that may make the host wait for the device, as reported.
#: ``copy()``, ``copy_2d()``, ``memset()`` and the buffer methods block when
#: ``non_blocking`` is False; for host-to-host copies and host memsets, only when they
#: wait for a ``stream`` argument or for pending work on an owned buffer. Buffer
#: ``close()`` blocks when the buffer was used on a stream and its memory is not the
#: caching allocator's (a native or imported buffer: freeing synchronizes those streams;
#: the cache takes a block back without waiting). ``empty_cache()`` waits for the events
#: guarding cached blocks and synchronizes the device before freeing segments.
#: ``Event.synchronize()`` of a never-recorded event does not block.
#: ``memcpy_async()`` and ``copy(..., non_blocking=True)`` block only across two devices
#: without peer access (staged through pinned memory): reported as the call made.
#: DLPack: ``__dlpack__()`` with ``stream=None`` waits for the work pending on the buffer
#: (a consumer stream on another device: synchronizes the pending streams), and an
#: export or :func:`~pyacl_rt.from_dlpack` import that copies does so synchronously.
#: Kernels: ``ObjectCode.close()`` waits for the streams its kernels were launched on;
#: ``RandomGenerator.offset()`` copies the device counter to the host.
BLOCKING_CALLS: Final[tuple[str, ...]] = (
    "synchronize()",
    "Device.synchronize()",
    "Context.synchronize()",
    "Stream.synchronize()",
    "Stream.close()",
    "Event.synchronize()",
    "Event.elapsed_time()",
    "copy()",
    "copy_2d()",
    "memset()",
    "memcpy_async()",
    "DeviceBuffer.copy_from_host()",
    "DeviceBuffer.copy_to_host()",
    "DeviceBuffer.fill()",
    "DeviceBuffer.memset()",
    "DeviceBuffer.close()",
    "HostBuffer.fill()",
    "HostBuffer.close()",
    "empty_cache()",
    "DeviceBuffer.__dlpack__()",
    "HostBuffer.__dlpack__()",
    "DLPackView.__dlpack__()",
    "from_dlpack()",
    "ObjectCode.close()",
    "RandomGenerator.offset()",
)


#: Mode numbers by name, as torch: default 0, warn 1, error 2.
_MODES: Final = {name: i for i, name in enumerate(SYNC_DEBUG_MODES)}
_UNRESOLVED: Final = -1

#: The mode of this thread / task; _UNRESOLVED (true) until set or first checked.
_mode: ContextVar[int] = ContextVar("pyacl_rt_sync_debug_mode", default=_UNRESOLVED)
#: The hooks' fast test (see the module docstring): true = call check_sync.
sync_debug_active: Final = _mode.get
#: The process default (PYACL_RT_SYNC_DEBUG) once read.
_default = _UNRESOLVED


def _env_default() -> int:
    global _default
    if _default == _UNRESOLVED:
        _default = _MODES[get_options().sync_debug]
    return _default


_ACCEPTED: Final = "'default', 'warn', 'error' or 0, 1, 2"


def _parse(mode: object) -> int:
    """A ``debug_mode`` argument as its number (ints through ``__index__``)."""
    if isinstance(mode, str):
        value = _MODES.get(mode)
        if value is None:
            raise ValueError(f"debug_mode must be one of {_ACCEPTED}, got {mode!r}")
        return value
    value = index_arg(mode, "debug_mode", f"one of {_ACCEPTED}")
    if not 0 <= value < len(SYNC_DEBUG_MODES):
        raise ValueError(f"debug_mode must be one of {_ACCEPTED}, got {value}")
    return value


def set_sync_debug_mode(debug_mode: str | int) -> None:
    """Report blocking calls in the current thread / asyncio task from now on.

    ``debug_mode``: ``"default"`` or 0 (report nothing), ``"warn"`` or 1 (issue a
    :class:`~pyacl_rt.errors.SyncDebugWarning` naming the call), ``"error"`` or 2 (raise
    :class:`~pyacl_rt.errors.SyncDebugError` instead of waiting). Other threads and
    tasks are not affected; tasks created afterwards inherit it. torch's name and values.
    """
    _mode.set(_parse(debug_mode))


def get_sync_debug_mode() -> int:
    """The sync-debug mode of the current thread / asyncio task: 0 (default), 1 (warn)
    or 2 (error); where never set, the process default from ``PYACL_RT_SYNC_DEBUG``."""
    mode = _mode.get()
    return _env_default() if mode == _UNRESOLVED else mode


class sync_debug_mode:
    """``with sync_debug_mode("error"):`` sets the mode of the current thread / asyncio
    task for the block (see :func:`set_sync_debug_mode`) and restores the previous one
    on exit, also a ``set_sync_debug_mode`` made inside the block. ``__enter__``
    returns the mode number. Re-entrant; exit in the thread / task that entered."""

    __slots__ = ("_tokens", "mode")

    def __init__(self, debug_mode: str | int) -> None:
        self.mode = _parse(debug_mode)
        self._tokens: list[Token[int]] = []

    def __enter__(self) -> int:
        self._tokens.append(_mode.set(self.mode))
        return self.mode

    def __exit__(self, *exc: object) -> None:
        _mode.reset(self._tokens.pop())


# --------------------------------------------------------------- slow path
_PKG_DIR: Final = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: Code of each function whose hook has fired -> line of that hook (nesting rule).
_hook_lines: dict[CodeType, int] = {}


def _called_name(frame: FrameType) -> str:
    """``Type.method()`` / ``function()`` for the pyacl_rt frame the user called."""
    code = frame.f_code
    owner = frame.f_locals.get("self") if "." in code.co_qualname else None
    if owner is not None:
        return f"{type(owner).__name__}.{code.co_name}()"
    return f"{code.co_qualname}()"


def check_sync(what: str) -> None:
    """A hook saw :data:`sync_debug_active` true: report the wait (``what`` waits there)
    according to the mode, or, the first time in this context, learn the mode."""
    _report(what, sys._getframe(1))


def _report(what: str, hook: FrameType) -> None:
    """Warn or raise for the hook in frame ``hook``, unless nested (module docstring)."""
    mode = _mode.get()
    if mode == _UNRESOLVED:
        mode = _env_default()
        _mode.set(mode)  # this context knows it now: later checks take the fast path
    if not mode:
        return
    line = hook.f_lineno
    if line < _hook_lines.get(hook.f_code, line + 1):
        _hook_lines[hook.f_code] = line  # the first hook of that function
    frame = hook
    level = 3  # warnings.warn's stacklevel of `frame`
    while True:
        up = frame.f_back
        if up is None or not up.f_code.co_filename.startswith(_PKG_DIR):
            break
        line = _hook_lines.get(up.f_code)
        if line is not None and up.f_lineno > line:
            return  # an outer pyacl_rt call reported this wait already
        frame = up
        level += 1
    called = _called_name(frame)
    text = f"pyacl_rt: {called} makes the host wait for the device"
    if what != called:
        text += f" ({what})"
    name = SYNC_DEBUG_MODES[mode]
    text += f" [sync debug mode {name!r}, see pyacl_rt.set_sync_debug_mode]"
    if mode == 1:
        warnings.warn(text, SyncDebugWarning, stacklevel=level + 1)
        return
    raise SyncDebugError(text, function=called, explanation="")
