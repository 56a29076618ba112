"""The mock's diagnostics API for the CLI tools: timing model, device log, sanitizer and
profiler switches (``aclmockTiming*``, ``aclmockGetDeviceLog*``, ``aclmockSanitizerGetMode``,
``aclmockProfIsActive``, ``aclmockLaunchOp``; mock README "Timing model", "Device log").

ctypes on the library :mod:`pyacl_rt.lowlevel` has loaded (``CDLL`` of the same path
returns the same handle, so the same state). :func:`mock_diag` returns ``None`` when the
loaded library is not the mock. Layer 8 (public face and tools), used by the
``bench``, ``doctor`` and ``logs`` commands; imported lazily.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

__all__ = ["TIMING_MODES", "MockDiag", "mock_diag"]

#: aclmockTimingMode -> the ASCEND_MOCK_TIMING value that selects it.
TIMING_MODES = {0: "real", 1: "virtual", 2: "paced"}
#: aclmockSanitizerGetMode -> the ASCEND_MOCK_SANITIZE mode.
SANITIZER_MODES = {0: "off", 1: "report", 2: "fail", 3: "abort"}
#: aclmockProfIsActive -> state.
PROFILER_STATES = {0: "off", 1: "collecting", 2: "waiting for ASCEND_PROFILER_START_STEP"}
LOG_ALL = -1
LOG_HOST = -2


class _TimingModel(ctypes.Structure):
    _fields_ = (
        ("h2dGBps", ctypes.c_double),
        ("d2hGBps", ctypes.c_double),
        ("pageableGBps", ctypes.c_double),
        ("hbmGBps", ctypes.c_double),
        ("peerGBps", ctypes.c_double),
        ("hostGBps", ctypes.c_double),
        ("latencyNs", ctypes.c_uint64),
        ("kernelNs", ctypes.c_uint64),
        ("launchNs", ctypes.c_uint64),
        ("syncNs", ctypes.c_uint64),
        ("mallocNs", ctypes.c_uint64),
        ("freeNs", ctypes.c_uint64),
        ("computeLanes", ctypes.c_uint32),
        ("pace", ctypes.c_double),
    )


#: _TimingModel field -> the ASCEND_MOCK_TIMING_MODEL key (mock README).
_MODEL_KEYS = {
    "h2dGBps": "h2d_gbps",
    "d2hGBps": "d2h_gbps",
    "pageableGBps": "pageable_gbps",
    "hbmGBps": "hbm_gbps",
    "peerGBps": "peer_gbps",
    "hostGBps": "host_gbps",
    "latencyNs": "latency_ns",
    "kernelNs": "kernel_ns",
    "launchNs": "launch_ns",
    "syncNs": "sync_ns",
    "mallocNs": "malloc_ns",
    "freeNs": "free_ns",
    "computeLanes": "compute_lanes",
    "pace": "pace",
}


class _OpDesc(ctypes.Structure):
    _fields_ = (
        ("name", ctypes.c_char_p),
        ("costNs", ctypes.c_uint64),
        ("args", ctypes.c_void_p),
        ("numArgs", ctypes.c_uint32),
        ("func", ctypes.c_void_p),
        ("userData", ctypes.c_void_p),
    )


class MockDiag:
    """The mock's diagnostics calls (thread-safe: the C API is)."""

    def __init__(self, path: str) -> None:
        d = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        d.aclmockTimingGetMode.restype = ctypes.c_int
        d.aclmockTimingGetMode.argtypes = ()
        d.aclmockTimingGetModel.restype = ctypes.c_int
        d.aclmockTimingGetModel.argtypes = (ctypes.POINTER(_TimingModel),)
        d.aclmockTimingNow.restype = ctypes.c_uint64
        d.aclmockTimingNow.argtypes = ()
        d.aclmockGetDeviceLog.restype = ctypes.c_int
        d.aclmockGetDeviceLog.argtypes = (ctypes.c_int32, ctypes.c_char_p, ctypes.c_size_t)
        d.aclmockGetDeviceLogCount.restype = ctypes.c_uint64
        d.aclmockGetDeviceLogCount.argtypes = (ctypes.c_int32,)
        d.aclmockSanitizerGetMode.restype = ctypes.c_int
        d.aclmockSanitizerGetMode.argtypes = ()
        d.aclmockProfIsActive.restype = ctypes.c_int
        d.aclmockProfIsActive.argtypes = ()
        d.aclmockLaunchOp.restype = ctypes.c_int
        d.aclmockLaunchOp.argtypes = (ctypes.POINTER(_OpDesc), ctypes.c_void_p)
        d.aclmockGetDeviceLost.restype = ctypes.c_int
        d.aclmockGetDeviceLost.argtypes = (ctypes.c_int32,)
        self._dll = d
        self._op = _OpDesc(b"pyacl_rt_bench_empty", 0, None, 0, None, None)
        self._op_ref = ctypes.byref(self._op)

    def timing_mode(self) -> str:
        """``"real"``, ``"virtual"`` or ``"paced"`` (ASCEND_MOCK_TIMING)."""
        return TIMING_MODES.get(int(self._dll.aclmockTimingGetMode()), "unknown")

    def timing_model(self) -> dict[str, float]:
        """The model's numbers by ASCEND_MOCK_TIMING_MODEL key (GB/s, ns)."""
        m = _TimingModel()
        rc = int(self._dll.aclmockTimingGetModel(ctypes.byref(m)))
        if rc != 0:
            raise RuntimeError(f"aclmockTimingGetModel failed ({rc})")
        return {key: getattr(m, field) for field, key in _MODEL_KEYS.items()}

    def now_ns(self) -> int:
        """The calling thread's time in ns (modeled in virtual/paced mode)."""
        return int(self._dll.aclmockTimingNow())

    def device_log(self, device: int = LOG_ALL) -> str:
        """The kept entries of ``device``'s log (-1 all, -2 host) as text lines."""
        for _ in range(4):  # the log may grow between the two calls
            n = int(self._dll.aclmockGetDeviceLog(device, None, 0))
            if n < 0:
                raise ValueError(f"invalid device {device} for the mock's device log")
            buf = ctypes.create_string_buffer(n + 4096)
            m = int(self._dll.aclmockGetDeviceLog(device, buf, len(buf)))
            if m < len(buf):
                return buf.value.decode(errors="replace")
        return buf.value.decode(errors="replace")

    def device_log_count(self, device: int = LOG_ALL) -> int:
        """How many entries ``device``'s log received (also the dropped ones)."""
        return int(self._dll.aclmockGetDeviceLogCount(device))

    def sanitizer_mode(self) -> str:
        """``"off"``, ``"report"``, ``"fail"`` or ``"abort"`` (ASCEND_MOCK_SANITIZE)."""
        return SANITIZER_MODES.get(int(self._dll.aclmockSanitizerGetMode()), "unknown")

    def profiler_state(self) -> str:
        """The collection state (``ASCEND_PROFILER_FLAGS`` / ``aclprof*``)."""
        return PROFILER_STATES.get(int(self._dll.aclmockProfIsActive()), "unknown")

    def device_lost(self, device: int) -> int:
        """The sticky error code of a lost device, 0 when healthy."""
        return int(self._dll.aclmockGetDeviceLost(device))

    def launch_empty_op(self, stream: int) -> int:
        """Queue a modeled operator without work (``aclmockLaunchOp``, the model's
        ``kernel_ns``) on ``stream`` (a raw handle); returns the ACL error code."""
        return int(self._dll.aclmockLaunchOp(self._op_ref, stream or None))


_lock = threading.Lock()
_diag: MockDiag | None = None


def mock_diag() -> MockDiag | None:
    """The :class:`MockDiag` of the loaded library (loading it if needed), or ``None``
    when it is not the mock."""
    global _diag
    from . import lowlevel

    with _lock:
        if _diag is None:
            lowlevel.load()
            if not lowlevel.is_mock_library():
                return None
            _diag = MockDiag(lowlevel.selection().path)
        return _diag


def describe(diag: MockDiag | None) -> dict[str, Any] | None:
    """The mock's diagnostics configuration as a JSON-ready dict (``None``: real CANN)."""
    if diag is None:
        return None
    return {
        "timing_mode": diag.timing_mode(),
        "timing_model": diag.timing_model(),
        "sanitizer": diag.sanitizer_mode(),
        "profiler": diag.profiler_state(),
    }
