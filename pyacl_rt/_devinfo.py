"""Device queries as torch_npu-style functions: SoC and CANN versions, feature checks
(INF/NaN mode, bf16), the operator timeout, and the per-device queries that wrap
:class:`~pyacl_rt._device.Device` (properties, memory, utilisation, peer access).

Layer 4, above :mod:`pyacl_rt._device`: imports :mod:`errors`, :mod:`_runtime`,
:mod:`_args`, :mod:`_state` and :mod:`_device`.
"""

from __future__ import annotations

from typing import Any

from . import _runtime, errors
from ._args import index_arg
from ._device import (
    ACL_ERROR_RT_CONTEXT_NULL,
    Device,
    DeviceLike,
    DeviceProperties,
    current_device,
    device_index_arg,
    ensure_device_current,
    query_soc_name,
)
from ._state import check, lib, local

__all__ = [
    "can_device_access_peer",
    "get_cann_version",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_soc_version",
    "is_bf16_supported",
    "is_support_inf_nan",
    "mem_get_info",
    "set_op_timeout_ms",
    "utilization",
]


# ---------------------------------------------------------------- SoC / CANN
def get_device_name(dev: DeviceLike = None) -> str:
    """SoC name of the device, e.g. ``'Ascend910B1'`` (``aclrtGetSocName``).

    As in torch_npu the index is validated but ACL only reports one SoC name per
    process (all cards of a server are the same SoC).
    """
    device_index_arg(dev)
    return query_soc_name()


def get_soc_version() -> str:
    """The SoC name (``aclrtGetSocName``).

    Differs from torch_npu, which returns an internal integer enum with no ACL
    counterpart; the name is what ACL reports and what users compare against.
    """
    return query_soc_name()


def get_cann_version(module: str = "CANN") -> str:
    """CANN version string as the loader found it (``pyacl_rt.backend_info()``).

    ``module`` is accepted for torch_npu compatibility; only ``"CANN"`` (the runtime
    package version) is known here; other modules return ``""``.
    """
    from ._raw._backend import backend_info

    if not isinstance(module, str):
        raise TypeError(f"get_cann_version(): module must be a str, not {type(module).__name__}")
    if module.upper() not in ("CANN", "RUNTIME"):
        return ""
    info: Any = backend_info()
    version = getattr(info, "cann_version", None)
    if version is None and isinstance(info, dict):
        version = info.get("cann_version")
    return "" if version is None else str(version)


def _modern_soc(name: str) -> bool:
    """A2 (910B), A3 (910_93) and 950 SoCs support INF/NaN mode and bf16."""
    return name.startswith(("Ascend910B", "Ascend910_93", "Ascend950"))


def is_support_inf_nan() -> bool:
    """True on SoCs whose float overflow mode is INF/NaN (Atlas A2/A3, Ascend 950).

    Decided from the SoC name like torch_npu; creates no context.
    """
    return _modern_soc(query_soc_name())


def is_bf16_supported() -> bool:
    """True on SoCs with bfloat16 support (Atlas A2/A3, Ascend 950), from the SoC name."""
    return _modern_soc(query_soc_name())


def set_op_timeout_ms(timeout_ms: int) -> int:
    """Set the operator execution timeout in milliseconds; returns the value the
    runtime actually applied, in ms.

    Uses ``aclrtSetOpExecuteTimeOutV2`` (microseconds) and falls back to the
    second-granular ``aclrtSetOpExecuteTimeOut`` on older CANN. Unlike torch_npu it
    does not drain task queues first (pyacl_rt has none). 0 means the maximum.
    """
    timeout_ms = index_arg(timeout_ms, "timeout_ms", "an int (milliseconds)")
    if timeout_ms < 0:
        raise ValueError(f"timeout_ms must be >= 0, got {timeout_ms}")
    _runtime.ensure_initialized()
    s = local.st.scratch
    try:
        fn = lib.aclrtSetOpExecuteTimeOutV2
        rc = fn(timeout_ms * 1000, s.u64)
        if rc == ACL_ERROR_RT_CONTEXT_NULL:
            ensure_device_current(current_device())
            rc = fn(timeout_ms * 1000, s.u64)
        check(rc, "aclrtSetOpExecuteTimeOutV2")
        return int(s.u64[0]) // 1000
    except errors.FunctionNotFoundError:
        seconds = -(-timeout_ms // 1000)
        rc = lib.aclrtSetOpExecuteTimeOut(seconds)
        if rc == ACL_ERROR_RT_CONTEXT_NULL:
            ensure_device_current(current_device())
            rc = lib.aclrtSetOpExecuteTimeOut(seconds)
        check(rc, "aclrtSetOpExecuteTimeOut")
        return seconds * 1000


# ----------------------------------------------------- per-device queries
def get_device_properties(dev: DeviceLike = None) -> DeviceProperties:
    """Properties of ``dev``: name, total memory (bytes), core counts, L2 size (bytes).

    torch_npu fills a few CUDA-compat fields with ``None`` (major/minor, warp size);
    those are left out here. Creates no context when the runtime reports the total
    memory attribute.
    """
    return Device(dev).properties


def get_device_capability(dev: DeviceLike = None) -> None:
    """Always ``None``: Ascend devices have no CUDA-style compute capability.

    torch_npu returns ``None`` too (or an env-var override); use
    :meth:`Device.capability` / :meth:`Device.info` for real attributes.
    """
    device_index_arg(dev)
    return None


def mem_get_info(dev: DeviceLike = None) -> tuple[int, int]:
    """``(free, total)`` memory of ``dev`` in bytes (``aclrtGetMemInfo(ACL_HBM_MEM)``)."""
    return Device(dev).mem_get_info()


def utilization(dev: DeviceLike = None) -> int:
    """Utilisation of ``dev`` in percent (see :meth:`Device.utilization`)."""
    return Device(dev).utilization()


def can_device_access_peer(dev: DeviceLike, peer: DeviceLike) -> bool:
    """Whether ``dev`` can access ``peer``'s memory (see :meth:`Device.can_access_peer`)."""
    return Device(dev).can_access_peer(peer)
