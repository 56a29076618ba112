"""Profiling: a context manager over the ``aclprof*`` collection API.

Usage::

    from pyacl_rt import profiler

    with profiler.profile(output="prof", start_step=1, stop_step=3) as prof:
        for batch in batches:
            with prof.range("forward"):
                ...                      # enqueue work
            prof.mark("loss ready")
            prof.step()                  # one step done
    print(prof.outputs)                  # the result folders written

The same calls drive the real profiler (msprof's ``PROF_*`` folders under ``output``,
read with CANN's tools) and the mock's model (a ``mock_prof_<pid>_<n>`` folder per
collected period with ``trace.json`` - Chrome trace / Perfetto - and ``summary.json`` /
``*_summary.csv``; mock README "Profiling"). ``pyacl-rt trace summary`` and
``pyacl-rt trace plot`` read the mock's files.

* **Steps**: :meth:`Profile.step` closes the current step (``aclprofGetStepTimestamp``
  with ``ACL_STEP_END``, then ``ACL_STEP_START`` of the next one on the current stream).
  Steps are numbered from 0; tasks of steps ``start_step`` <= step < ``stop_step`` are
  collected (``aclprofStart`` when step ``start_step`` begins, ``aclprofStop`` when step
  ``stop_step`` begins or the block ends). ``stop_step=None``: until the block ends.
* **Ranges and marks** (msproftx): :meth:`Profile.range` is a named range
  (``aclprofRangeStart/Stop``, may end on another thread), :meth:`Profile.mark` an
  instant (``aclprofMark``; with ``stream=`` a marker task queued on that stream,
  ``aclprofMarkEx``). Outside the step window they do nothing (msproftx calls are only
  valid while collecting); a range open when the collection stops ends at the stop.
* **Environment switches**: the seed's ``ASCEND_PROFILER_FLAGS=enable`` (with
  ``ASCEND_PROFILER_OUTPUT=DIR``, ``ASCEND_PROFILER_START_STEP`` / ``STOP_STEP``) profile
  a whole process without code changes; the runtime reads them at ``aclInit``.
  :func:`env_settings` returns them. Steps still come from :meth:`Profile.step` (or
  :func:`step`). While the environment switch collects, :func:`profile` raises
  :class:`~pyacl_rt.errors.AclError` code 100042 (``ACL_ERROR_PROF_ALREADY_RUN``): one
  collection at a time.

One :func:`profile` block runs at a time in a process (``RuntimeError`` otherwise). It
initializes the runtime if needed (``pyacl_rt.init()``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from . import errors
from . import lowlevel as ll
from ._args import index_arg as _index_arg

__all__ = ["ENV_VARS", "Profile", "env_settings", "profile", "step"]

# acl_prof.h values (acl_next_semantics.md section 7.2)
_ACL_PROF_ACL_API = 0x1
_ACL_PROF_TASK_TIME = 0x2
_ACL_PROF_MSPROFTX = 0x80
_ACL_PROF_RUNTIME_API = 0x100
_ACL_AICORE_NONE = 0xFF
_ACL_STEP_START = 0
_ACL_STEP_END = 1
_MAX_MESSAGE = 127  # bytes of a mark/range name (aclprofMarkEx limit)

#: The seed's environment switches the runtime reads at ``aclInit``.
ENV_VARS = (
    "ASCEND_PROFILER_FLAGS",
    "ASCEND_PROFILER_OUTPUT",
    "ASCEND_PROFILER_START_STEP",
    "ASCEND_PROFILER_STOP_STEP",
)

_lock = threading.Lock()
_active: Profile | None = None


def env_settings() -> dict[str, str | None]:
    """The ``ASCEND_PROFILER_*`` switches as set in this process's environment (``None``
    when unset); ``ASCEND_PROFILER_FLAGS=enable`` profiles the whole process."""
    return {name: os.environ.get(name) for name in ENV_VARS}


def _text(value: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    raw = value.encode()
    if not raw or len(raw) > _MAX_MESSAGE or b"\0" in raw:
        raise ValueError(
            f"{what} must be 1..{_MAX_MESSAGE} bytes of UTF-8 without NUL, got {value!r}"
        )
    return raw


def _stream_handle(stream: Any) -> int:
    if stream is None:
        from . import current_device, current_stream, set_device

        try:
            ll.fast.get_current_context()
        except errors.AclError:  # a new thread: bind the device, as other calls do
            set_device(current_device())
        return int(current_stream().handle)
    handle = getattr(stream, "handle", None)
    if handle is None:
        raise TypeError(f"stream must be a pyacl_rt.Stream or None, not {type(stream).__name__}")
    return int(handle)


class Profile:
    """A profiling session (made by :func:`profile`): steps, ranges, marks.

    ``output``: the result directory (created); ``start_step`` / ``stop_step``: the
    window of steps collected; ``devices``: device ids profiled (default: the current
    device); ``outputs`` lists the folders written so far.
    """

    def __init__(
        self,
        output: str | os.PathLike[str],
        *,
        start_step: int = 0,
        stop_step: int | None = None,
        devices: Sequence[int] | None = None,
    ) -> None:
        if not isinstance(output, (str, os.PathLike)):
            raise TypeError(f"output must be a path, not {type(output).__name__}")
        self.output = Path(output).absolute()
        self.start_step = _index_arg(start_step, "start_step")
        if self.start_step < 0:
            raise ValueError(f"start_step must be >= 0, got {self.start_step}")
        self.stop_step: int | None = None
        if stop_step is not None:
            self.stop_step = _index_arg(stop_step, "stop_step")
            if self.stop_step <= self.start_step:
                raise ValueError(
                    f"stop_step must be > start_step ({self.start_step}), got {self.stop_step}"
                )
        self._devices: list[int] | None = None
        if devices is not None:
            self._devices = [_index_arg(d, "devices[i]") for d in devices]
            if not self._devices or any(d < 0 for d in self._devices):
                raise ValueError(f"devices must be non-empty device ids, got {list(devices)}")
        self.step_number = 0
        self.outputs: list[Path] = []
        self._config: Any = None
        self._collecting = False
        self._inited = False
        self._step_info: Any = None
        self._seen: set[str] = set()
        self._step_lock = threading.Lock()  # step() from several threads: one at a time
        #: Ranges open now (aclprofRangeStart ids): closed when the collection stops,
        #: since every msproftx call belongs between aclprofStart and aclprofStop.
        self._ranges: set[int] = set()
        self._ranges_lock = threading.Lock()

    # ----------------------------------------------------------------- state
    @property
    def collecting(self) -> bool:
        """True while the current step is inside the window (tasks are collected)."""
        return self._collecting

    def _start(self) -> None:
        self._seen = set(os.listdir(self.output))
        ll.check(ll.aclprofStart(self._config), "aclprofStart")
        self._collecting = True

    def _stop(self) -> None:
        self._collecting = False
        with self._ranges_lock:
            open_ranges, self._ranges = sorted(self._ranges), set()
        for rid in open_ranges:  # a range open across stop_step ends with the collection
            ll.check(ll.aclprofRangeStop(rid), "aclprofRangeStop")
        ll.check(ll.aclprofStop(self._config), "aclprofStop")
        new = sorted(set(os.listdir(self.output)) - self._seen)
        self.outputs.extend(self.output / name for name in new)

    def _open(self) -> None:
        from . import current_device, init

        init()
        devices = self._devices if self._devices is not None else [current_device()]
        self.output.mkdir(parents=True, exist_ok=True)
        path = str(self.output).encode()
        ll.check(ll.aclprofInit(path, len(path)), "aclprofInit")
        self._inited = True
        ids = ll.ffi.new("uint32_t[]", devices)
        flags = _ACL_PROF_ACL_API | _ACL_PROF_TASK_TIME | _ACL_PROF_MSPROFTX
        self._config = ll.aclprofCreateConfig(
            ids, len(devices), _ACL_AICORE_NONE, ll.ffi.NULL, flags
        )
        if self._config == ll.ffi.NULL:
            self._config = None
            msg = ll.aclGetRecentErrMsg()
            why = ll.ffi.string(msg).decode(errors="replace") if msg != ll.ffi.NULL else ""
            raise ValueError(f"aclprofCreateConfig refused devices {devices}: {why}".rstrip(": "))
        if self.start_step == 0:
            self._start()
        self._step_begin()

    def _close(self) -> None:
        try:
            if self._step_info is not None:
                ll.aclprofDestroyStepInfo(self._step_info)
                self._step_info = None
            if self._collecting:
                self._stop()
        finally:
            if self._config is not None:
                ll.aclprofDestroyConfig(self._config)
                self._config = None
            if self._inited:
                self._inited = False
                ll.check(ll.aclprofFinalize(), "aclprofFinalize")

    def _step_begin(self) -> None:
        if self._collecting:
            self._step_info = ll.aclprofCreateStepInfo()
            ll.check(
                ll.aclprofGetStepTimestamp(self._step_info, _ACL_STEP_START, _stream_handle(None)),
                "aclprofGetStepTimestamp",
            )

    # ------------------------------------------------------------------ API
    def step(self) -> int:
        """Ends the current step and begins the next; returns the new step number.
        Starts or stops the collection at the window's bounds."""
        with self._step_lock:
            return self._step()

    def _step(self) -> int:
        if self._config is None:
            raise RuntimeError("the profile is closed: step() only inside its with block")
        info = self._step_info if self._step_info is not None else ll.aclprofCreateStepInfo()
        self._step_info = None
        try:
            ll.check(
                ll.aclprofGetStepTimestamp(info, _ACL_STEP_END, _stream_handle(None)),
                "aclprofGetStepTimestamp",
            )
        finally:
            ll.aclprofDestroyStepInfo(info)
        self.step_number += 1
        if self._collecting and self.stop_step is not None and self.step_number >= self.stop_step:
            self._stop()
        elif not self._collecting and self.step_number == self.start_step:
            self._start()
        self._step_begin()
        return self.step_number

    def mark(self, message: str, *, stream: Any = None) -> None:
        """An instant named ``message`` (1..127 bytes); with ``stream=`` a marker task
        queued on that stream (ordered with its work). Nothing outside the window."""
        raw = _text(message, "message")
        handle = _stream_handle(stream) if stream is not None else 0
        if not self._collecting:
            return
        if stream is not None:
            ll.check(ll.aclprofMarkEx(raw, len(raw), handle), "aclprofMarkEx")
            return
        stamp = ll.aclprofCreateStamp()
        try:
            ll.check(
                ll.aclprofSetStampTraceMessage(stamp, raw, len(raw)), "aclprofSetStampTraceMessage"
            )
            ll.check(ll.aclprofMark(stamp), "aclprofMark")
        finally:
            ll.aclprofDestroyStamp(stamp)

    @contextmanager
    def range(self, name: str) -> Iterator[None]:
        """A named range around the block (``aclprofRangeStart/Stop``; 1..127 bytes).
        Nothing outside the window; a range still open when the window ends (a
        :meth:`step` reaching ``stop_step`` inside it, or the block's end) ends there."""
        raw = _text(name, "name")
        if not self._collecting:
            yield
            return
        stamp = ll.aclprofCreateStamp()
        rid = ll.ffi.new("uint32_t *")
        try:
            ll.check(
                ll.aclprofSetStampTraceMessage(stamp, raw, len(raw)), "aclprofSetStampTraceMessage"
            )
            ll.check(ll.aclprofRangeStart(stamp, rid), "aclprofRangeStart")
            with self._ranges_lock:
                self._ranges.add(int(rid[0]))
            try:
                yield
            finally:
                with self._ranges_lock:
                    still_open = int(rid[0]) in self._ranges
                    self._ranges.discard(int(rid[0]))
                if still_open:  # not ended by a stop at stop_step meanwhile
                    ll.check(ll.aclprofRangeStop(rid[0]), "aclprofRangeStop")
        finally:
            ll.aclprofDestroyStamp(stamp)

    @property
    def trace_files(self) -> list[Path]:
        """The Chrome-trace files among :attr:`outputs` (the mock's ``trace.json``)."""
        return [p / "trace.json" for p in self.outputs if (p / "trace.json").is_file()]

    def __enter__(self) -> Profile:
        global _active
        with _lock:
            if _active is not None:
                raise RuntimeError("a pyacl_rt.profiler.profile block is already running")
            _active = self
        try:
            self._open()
        except BaseException:
            try:
                self._close()
            finally:
                _active = None
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global _active
        try:
            self._close()
        finally:
            with _lock:
                _active = None

    def __repr__(self) -> str:
        return (
            f"<pyacl_rt.profiler.Profile output={str(self.output)!r} step={self.step_number} "
            f"collecting={self._collecting}>"
        )


def profile(
    output: str | os.PathLike[str],
    *,
    start_step: int = 0,
    stop_step: int | None = None,
    devices: Sequence[int] | None = None,
) -> Profile:
    """A profiling session for ``with``: results under ``output``, steps
    ``start_step`` <= step < ``stop_step`` collected (``None``: to the end), on
    ``devices`` (default: the current device). See :class:`Profile`."""
    return Profile(output, start_step=start_step, stop_step=stop_step, devices=devices)


def step() -> int | None:
    """Marks a step boundary. Inside a :func:`profile` block: :meth:`Profile.step` (returns
    the new step number). Outside one: a bare ``ACL_STEP_END`` boundary on the current
    stream (returns ``None``) - the steps of ``ASCEND_PROFILER_START_STEP`` /
    ``STOP_STEP`` (environment profiling) and of a dump's ``dump_step``."""
    current = _active
    if current is not None:
        return current.step()
    from . import init

    init()
    info = ll.aclprofCreateStepInfo()
    if info == ll.ffi.NULL:
        raise MemoryError("aclprofCreateStepInfo failed")
    try:
        ll.check(
            ll.aclprofGetStepTimestamp(info, _ACL_STEP_END, _stream_handle(None)),
            "aclprofGetStepTimestamp",
        )
    finally:
        ll.aclprofDestroyStepInfo(info)
    return None
