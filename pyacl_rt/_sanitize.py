"""The mock's race sanitizer seen from Python (``ASCEND_MOCK_SANITIZE=1``).

The mock checks every task's memory accesses with vector clocks (mock README "Race
sanitizer"). This module connects pyacl_rt to it, and only while it is on:

* **Tags.** Every call of pyacl_rt's object layers that may enqueue a task or touch
  memory as the host (copies, memsets, kernel launches, event records and waits, host
  callbacks, model runs, frees: :data:`TASK_CALLS`) is wrapped by
  ``_fastcall.gated_task`` (``_state._Gated``). :func:`arm` installs
  :func:`_task_call` as the task hook of ``_fastcall``, so such a call runs as
  ``_task_call(fn, *args)``: it tags the task with the user's line
  (``aclmockSetNextTaskTag("file.py:12")``, the first frame outside pyacl_rt) and, after
  the call, collects the reports it caused (the mock decides at submission).
* **Host reads.** A HostBuffer export (``memoryview(h)``, ``numpy.asarray(h)``,
  ``h.numpy()``, ``h.tobytes()``) and the host-side copies and memsets of the memory layer
  are declared with ``aclmockSanitizerHostAccess`` (:func:`host_read`,
  :func:`host_access`), so reading a HostBuffer while an async D2H into it is pending is
  reported.
* **Reports** become :class:`~pyacl_rt.errors.RaceWarning` (action ``"warn"``, default;
  each kind of race once) or :class:`~pyacl_rt.errors.RaceError` (action ``"raise"``),
  attributed to the user's line; the mock does not print them too
  (``aclmockSanitizerSetStderr(0)``).
* **Extents.** The caching allocator registers each block it hands out as a
  sub-allocation region (:func:`region_functions`), and a kernel launch declares the
  window of each buffer argument (:func:`launch_extents`): a kernel's pointer argument
  whose twin declares no extent is checked over its window, not up to the end of the
  allocator's segment.

Off (the default), nothing here runs: the task hook is NULL (one load and branch in
``_fastcall``'s gated call), the HostBuffer export hook is NULL, and the memory layer
tests one module flag before a host-side copy. :func:`arm` runs after every successful
``aclInit`` (``_runtime.init``) and asks the loaded library for its sanitizer mode.

Layer 2 (docs/architecture.md): the raw layer, errors and hooks only; the memory layer
registers into :data:`arm_hooks` what it switches on.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from collections import deque
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

from . import lowlevel
from ._hooks import PriorityHooks
from ._raw._extensions import fast as _fastcall
from .errors import RaceAccess, RaceError, RaceReport, RaceWarning

__all__ = [
    "TASK_CALLS",
    "arm",
    "arm_hooks",
    "clear_reports",
    "get_action",
    "host_access",
    "host_read",
    "is_armed",
    "launch_extents",
    "mode",
    "region_functions",
    "report_count",
    "reports",
    "set_action",
]

#: Raw-layer functions (``_state.lib`` / ``_state.fast`` names) that may enqueue a task
#: or touch memory as the host: tagged with the user's line while the sanitizer is on.
TASK_CALLS: Final[frozenset[str]] = frozenset(
    {
        # lowlevel.fast
        "memcpy_async",
        "memcpy",
        "memset_async",
        "record_event",
        "stream_wait_event",
        "wait_then_host_func",
        "launch_with_args",
        "launch_objects",
        # lowlevel.lib
        "aclrtMemcpy",
        "aclrtMemcpyAsync",
        "aclrtMemcpy2d",
        "aclrtMemcpy2dAsync",
        "aclrtMemcpyBatchAsync",
        "aclrtMemset",
        "aclrtMemsetAsync",
        "aclrtRecordEvent",
        "aclrtStreamWaitEvent",
        "aclrtLaunchCallback",
        "aclrtLaunchHostFunc",
        "aclrtLaunchKernel",
        "aclrtLaunchKernelWithConfig",
        "aclrtLaunchKernelV2",
        "aclrtReduceAsync",
        "aclrtRandomNumAsync",
        "aclmdlRIExecuteAsync",
        "aclrtFree",
        "aclrtFreeHost",
    }
)
#: Frees: a report on them is always warned, never raised (they run in finalizers too).
_FREES: Final = frozenset({"aclrtFree", "aclrtFreeHost"})

#: ``fn(on)`` run by :func:`arm` when it switches the sanitizer's Python side on
#: (the memory layer installs its HostBuffer export hook).
arm_hooks: Final[PriorityHooks[Callable[[bool], None]]] = PriorityHooks("sanitizer arm")

_KINDS: Final = {1: "race", 2: "host_race", 3: "use_after_free"}
_MODES: Final = ("off", "report", "fail", "abort")
_READ, _WRITE = 1, 2
_KEPT: Final = 1024  # the mock keeps its first 1024 reports; so do we (the latest)
_PKG_DIR: Final = os.path.dirname(os.path.abspath(__file__)) + os.sep
_caller_frame: Final = sys._getframe


def _bind(path: str) -> Any:
    """The sanitizer's ``aclmock*`` functions of the library at ``path`` (ctypes, imported
    here: ``import pyacl_rt`` does not load ctypes), or None when it has none."""
    import ctypes

    class Access(ctypes.Structure):
        _fields_ = (
            ("taskId", ctypes.c_uint64),
            ("device", ctypes.c_int32),
            ("streamId", ctypes.c_int32),
            ("stream", ctypes.c_void_p),
            ("access", ctypes.c_uint32),
            ("name", ctypes.c_char * 64),
            ("tag", ctypes.c_char * 256),
        )

    class Report(ctypes.Structure):
        _fields_ = (
            ("kind", ctypes.c_uint32),
            ("device", ctypes.c_int32),
            ("address", ctypes.c_uint64),
            ("size", ctypes.c_uint64),
            ("current", Access),
            ("previous", Access),
            ("message", ctypes.c_char * 1024),
        )

    dll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # the loaded copy (same state)
    if not hasattr(dll, "aclmockSanitizerGetMode"):
        return None
    m = _Mock()
    m.report_type = Report
    m.mode = dll.aclmockSanitizerGetMode
    m.mode.restype, m.mode.argtypes = ctypes.c_int, ()
    m.count = dll.aclmockSanitizerGetReportCount
    m.count.restype, m.count.argtypes = ctypes.c_uint64, ()
    m.get = dll.aclmockSanitizerGetReports
    m.get.restype = ctypes.c_size_t
    m.get.argtypes = (ctypes.POINTER(Report), ctypes.c_size_t, ctypes.c_size_t)
    m.clear = dll.aclmockSanitizerClearReports
    m.clear.restype, m.clear.argtypes = None, ()
    m.host = dll.aclmockSanitizerHostAccess
    m.host.restype = ctypes.c_int
    m.host.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32)
    m.tag = dll.aclmockSetNextTaskTag
    m.tag.restype, m.tag.argtypes = ctypes.c_int, (ctypes.c_char_p,)
    m.set_stderr = getattr(dll, "aclmockSanitizerSetStderr", None)
    if m.set_stderr is not None:
        m.set_stderr.restype, m.set_stderr.argtypes = ctypes.c_int, (ctypes.c_int,)
    m.extents = getattr(dll, "aclmockSetNextLaunchExtents", None)
    if m.extents is not None:
        m.extents.restype = ctypes.c_int
        m.extents.argtypes = (ctypes.POINTER(ctypes.c_uint64), ctypes.c_uint32)
    m.extents_type = ctypes.c_uint64 * 128
    m.regions = (0, 0)
    if hasattr(dll, "aclmockMemRegionRegister"):
        m.regions = (
            int(ctypes.cast(dll.aclmockMemRegionRegister, ctypes.c_void_p).value or 0),
            int(ctypes.cast(dll.aclmockMemRegionUnregister, ctypes.c_void_p).value or 0),
        )
    return m


class _Mock:
    """The sanitizer's ``aclmock*`` functions of the loaded library (set by :func:`_bind`)."""

    report_type: Any
    mode: Any
    count: Any
    get: Any
    clear: Any
    host: Any
    tag: Any
    set_stderr: Any
    extents: Any
    extents_type: Any
    regions: tuple[int, int]


_mock: _Mock | None = None
#: True while the sanitizer's Python side is on (:func:`arm`); read by the memory layer.
armed = False
_action = "warn"
_lock = threading.Lock()
_seen = 0  # mock reports consumed (index into its kept list)
_total = 0  # reports collected in this process
_kept: deque[RaceReport] = deque(maxlen=_KEPT)
_warned: set[tuple[object, ...]] = set()
_names: dict[str, str] = {}  # co_filename -> shown name


# ------------------------------------------------------------------ switch
def arm() -> None:
    """Switch the Python side on if the loaded library is the mock with its sanitizer
    on (called after each successful ``aclInit``). Idempotent; a no-op otherwise."""
    global _mock, armed
    if armed or not lowlevel.is_loaded() or not lowlevel.is_mock_library():
        return
    m = _bind(lowlevel.selection().path)
    if m is None or int(m.mode()) == 0:
        return
    _mock = m
    armed = True
    if m.set_stderr is not None:
        m.set_stderr(0)  # each report is shown once: as the RaceWarning / RaceError
    _fastcall.set_task_hook(_task_call)
    for hook in arm_hooks:
        hook(True)


def is_armed() -> bool:
    """True while the mock's race sanitizer is on and pyacl_rt reports through it."""
    return armed


def mode() -> str:
    """The mock's sanitizer mode (``ASCEND_MOCK_SANITIZE``): ``"off"``, ``"report"``,
    ``"fail"`` or ``"abort"``; ``"off"`` when the loaded library is not the mock or
    pyacl_rt has not initialised it yet."""
    if _mock is None:
        return "off"
    m = int(_mock.mode())
    return _MODES[m] if 0 <= m < len(_MODES) else str(m)


def set_action(action: str) -> str:
    """What a report does: ``"warn"`` (:class:`~pyacl_rt.errors.RaceWarning`, each kind
    of race once; the default) or ``"raise"`` (:class:`~pyacl_rt.errors.RaceError` from
    the call that made the later access). Returns the previous action."""
    global _action
    if not isinstance(action, str):
        raise TypeError(f"set_race_action(): action must be a str, not {type(action).__name__}")
    if action not in ("warn", "raise"):
        raise ValueError(f"set_race_action(): action must be 'warn' or 'raise', not {action!r}")
    old, _action = _action, action
    return old


def get_action() -> str:
    """The current action: ``"warn"`` or ``"raise"`` (see :func:`set_action`)."""
    return _action


# -------------------------------------------------------------------- tags
def _shown(filename: str) -> str:
    name = _names.get(filename)
    if name is None:
        name = filename
        try:
            rel = os.path.relpath(filename)
            if not rel.startswith(".." + os.sep) and not os.path.isabs(rel):
                name = rel
        except ValueError:  # another drive (Windows)
            pass
        _names[filename] = name
    return name


def _user_frame(frame: FrameType | None) -> tuple[FrameType | None, int]:
    """The first frame outside pyacl_rt from ``frame`` up, and how many frames up."""
    level = 0
    while frame is not None and frame.f_code.co_filename.startswith(_PKG_DIR):
        frame = frame.f_back
        level += 1
    return frame, level


def _tag_of(frame: FrameType | None) -> bytes:
    if frame is None:
        return b""
    tag = f"{_shown(frame.f_code.co_filename)}:{frame.f_lineno}".encode(errors="replace")
    return tag if len(tag) < 256 else b"..." + tag[-250:]


# ------------------------------------------------------------------- hooks
def _task_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The task hook (``_fastcall.set_task_hook``): ``fn(*args)`` tagged with the
    user's line, then the reports it caused are warned or raised."""
    m = _mock
    if m is None:  # pragma: no cover - installed only once _mock is set
        return fn(*args, **kwargs)
    frame, level = _user_frame(_caller_frame(1))
    m.tag(_tag_of(frame))
    try:
        return fn(*args, **kwargs)
    finally:
        if m.count() != _seen:
            _emit(_collect(), level + 1, getattr(fn, "__name__", "") not in _FREES)


def host_access(ptr: int, nbytes: int, write: bool) -> None:
    """Declare that the host is about to read (or write) ``nbytes`` bytes at ``ptr``
    (a HostBuffer's memory): checked against pending tasks; a no-op when off."""
    m = _mock
    if m is None or nbytes <= 0:
        return
    frame, level = _user_frame(_caller_frame(1))
    m.tag(_tag_of(frame))
    m.host(ptr, nbytes, _WRITE if write else _READ)
    if m.count() != _seen:
        _emit(_collect(), level + 1, True)


def host_read(ptr: int, nbytes: int) -> None:
    """:func:`host_access` for a read (the HostBuffer export hook of ``_memcore``)."""
    m = _mock
    if m is None or nbytes <= 0:
        return
    frame, level = _user_frame(_caller_frame(1))
    m.tag(_tag_of(frame))
    m.host(ptr, nbytes, _READ)
    if m.count() != _seen:
        _emit(_collect(), level + 1, True)


def region_functions() -> tuple[int, int]:
    """The addresses of the mock's ``aclmockMemRegionRegister`` / ``Unregister`` while
    the sanitizer is on (the caching allocator registers each block it hands out as a
    sub-allocation region), else ``(0, 0)``."""
    m = _mock
    return m.regions if m is not None else (0, 0)


def launch_extents(extents: list[int]) -> None:
    """Declare the window (bytes; 0 = none) of each argument of the calling thread's next
    kernel launch (``aclmockSetNextLaunchExtents``): a pointer argument whose twin declares
    no extent is checked over its window. A no-op when off."""
    m = _mock
    if m is None or m.extents is None or not extents or len(extents) > 128:
        return
    arr = m.extents_type(*extents)
    m.extents(arr, len(extents))


# ----------------------------------------------------------------- reports
def _access(a: Any) -> RaceAccess:
    bits = int(a.access)
    how = "read-write" if bits == (_READ | _WRITE) else "write" if bits & _WRITE else "read"
    return RaceAccess(
        task_id=int(a.taskId),
        device=int(a.device),
        stream_id=int(a.streamId),
        stream=int(a.stream or 0),
        access=how,
        name=a.name.decode(errors="replace"),
        tag=a.tag.decode(errors="replace"),
    )


def _convert(r: Any) -> RaceReport:
    return RaceReport(
        kind=_KINDS.get(int(r.kind), str(int(r.kind))),
        device=int(r.device),
        address=int(r.address),
        size=int(r.size),
        current=_access(r.current),
        previous=_access(r.previous),
        message=r.message.decode(errors="replace"),
    )


def _collect() -> list[RaceReport]:
    """The mock's reports not seen yet (kept here; the mock's list is emptied before it
    fills up, so it never drops one between two calls)."""
    global _seen, _total
    m = _mock
    if m is None:
        return []
    with _lock:
        n = int(m.count())
        if n < _seen:  # someone cleared the mock's list
            _seen = 0
        if n == _seen:
            return []
        want = n - _seen
        buf = (m.report_type * want)()
        got = int(m.get(buf, want, _seen))
        new = [_convert(buf[i]) for i in range(got)]
        _total += want
        _seen = n
        if _seen >= _KEPT // 2:
            m.clear()
            _seen = 0
        _kept.extend(new)
        return new


def _signature(r: RaceReport) -> tuple[object, ...]:
    c, p = r.current, r.previous
    return (r.kind, c.name, c.tag, c.stream_id, p.name, p.tag, p.stream_id)


def _settle(found: list[RaceReport]) -> None:
    """Wait for the streams of the later accesses, so that raising leaves nothing the
    call enqueued pending (its keep-alive bookkeeping did not run)."""
    for stream in {r.current.stream for r in found if r.current.stream_id >= 0}:
        if stream and lowlevel.lib.aclrtSynchronizeStream(stream) != 0:
            lowlevel.clear_error()


def _emit(found: list[RaceReport], level: int, may_raise: bool) -> None:
    """Warn (once per kind of race) or raise for ``found``; ``level``: frames from the
    caller of this function's caller to the user's frame."""
    if not found:
        return
    if _action == "raise" and may_raise:
        _settle(found)
        raise RaceError(reports=found, function=found[0].current.name or None)
    for r in found:
        sig = _signature(r)
        if sig in _warned:
            continue
        _warned.add(sig)
        try:
            warnings.warn(RaceWarning(r.message, r), stacklevel=level + 2)
        except BaseException:  # a warnings filter "error": it propagates like RaceError
            _settle(found)
            raise


def reports() -> list[RaceReport]:
    """The reports collected in this process (the latest 1024), oldest first."""
    _collect()
    with _lock:
        return list(_kept)


def report_count() -> int:
    """How many reports the sanitizer made in this process (all of them)."""
    _collect()
    return _total


def clear_reports() -> None:
    """Forget the collected reports and the kinds of race already warned about."""
    _collect()
    with _lock:
        _kept.clear()
        _warned.clear()
