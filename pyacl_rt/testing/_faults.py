"""Fault injection scoped to one test: the ``npu_faults`` fixture's object."""

from __future__ import annotations

from typing import Any

__all__ = ["NpuFaults"]


class NpuFaults:
    """Inject runtime failures into the mock for the current test only.

    Everything armed here is undone when the test ends: injected faults are cleared
    and devices marked lost are revived (the mock's fault table is process-wide, so a
    fault left armed would fail a later test). Needs the bundled mock.
    """

    def __init__(self, control: Any) -> None:
        self._control = control
        self._lost: set[int] = set()

    def inject(self, func: str, code: int, nth: int = 1) -> None:
        """Make the ``nth`` next call (1 = the next one; 0 = every call) of the
        AscendCL function ``func`` (e.g. ``"aclrtMalloc"``) fail with error ``code``
        (e.g. 207001), before it has any effect, as a real failure would."""
        if not isinstance(func, str) or not func:
            raise TypeError(f"func must be a non-empty function name, got {func!r}")
        for name, value in (("code", code), ("nth", nth)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}")
        if not 0 <= nth <= 0xFFFFFFFF:
            raise ValueError(f"nth must be in 0..2**32-1, got {nth}")
        self._control.inject_fault(func, code, nth)

    def hits(self, func: str) -> int:
        """How many times an injected fault of ``func`` has fired."""
        return int(self._control.fault_hits(func))

    def lose_device(self, device: int, code: int = 507010) -> None:
        """Mark ``device`` lost: every later call on it fails with the sticky ``code``
        (default ACL_ERROR_RT_LOST_HEARTBEAT, 507010); revived after the test."""
        self._control.set_device_lost(device, code)
        self._lost.add(device)

    def clear(self) -> None:
        """Disarm every injected fault and revive the devices marked lost."""
        self._control.clear_faults()
        for device in sorted(self._lost):
            self._control.set_device_lost(device, 0)
        self._lost.clear()
