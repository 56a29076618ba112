"""Launch configurations: the block count and the launch attributes of
``aclrtLaunchKernelCfg`` (built once, reused by every launch).

Layer 7 (higher tools): imports layers 1-2.
"""

from __future__ import annotations

from typing import Any, Final, NoReturn

from .. import lowlevel
from .._args import index_arg, type_name
from .._raw._abi_runtime import CONSTANTS as _C

__all__ = ["LaunchConfig"]

_A: Final = {
    "schedule_mode": _C["ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE"],
    "dynamic_ub_size": _C["ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE"],
    "engine": _C["ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE"],
    "block_offset": _C["ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET"],
    "no_prefetch": _C["ACL_RT_LAUNCH_KERNEL_ATTR_BLOCK_TASK_PREFETCH"],
    "data_dump": _C["ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP"],
    "timeout_s": _C["ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT"],
    "timeout_us": _C["ACL_RT_LAUNCH_KERNEL_ATTR_TIMEOUT_US"],
    "profiling": _C["ACL_RT_LAUNCH_KERNEL_ATTR_ENABLE_PROFILING"],
}
_SCHEDULE_MODES: Final = {"normal": 0, "batch": 1}
_ENGINES: Final = {"aic": _C["ACL_RT_ENGINE_TYPE_AIC"], "aiv": _C["ACL_RT_ENGINE_TYPE_AIV"]}


def _uint(value: object, name: str, bits: int) -> int:
    v = index_arg(value, f"LaunchConfig(): {name}")
    if not 0 <= v < 1 << bits:
        raise ValueError(f"LaunchConfig(): {name} must be in [0, 2**{bits}), got {v}")
    return v


def _flag(value: object, name: str) -> int:
    if value is not True and value is not False:
        raise TypeError(f"LaunchConfig(): {name} must be a bool or None, not {type_name(value)}")
    return int(value)


class LaunchConfig:
    """How to launch a kernel: ``blocks`` (``numBlocks``, >= 1) and launch attributes.

    Every attribute is optional (``None`` = not set, the runtime's default):

    * ``schedule_mode``: ``"normal"`` or ``"batch"`` (``ACL_RT_LAUNCH_KERNEL_ATTR_SCHEM_MODE``);
    * ``timeout_s`` (seconds, 0..65535, 0 = forever) or ``timeout_us`` (microseconds,
      0 = forever): the task's scheduler timeout; not both;
    * ``dynamic_ub_size``: dynamic unified-buffer bytes of a SIMT kernel (Ascend 950);
    * ``engine`` (``"aic"`` / ``"aiv"``) and ``block_offset`` (310P: split a launch
      over AI Cores and vector cores);
    * ``no_prefetch``: stop the hardware prefetching this task; ``data_dump``: dump
      it; ``profiling``: per-task profiling switch.

    The attribute array is built once here; a LaunchConfig is immutable and may be
    shared by threads and launches.
    """

    __slots__ = ("_cd", "_values", "cfg_ptr", "num_blocks")

    _cd: tuple[Any, Any] | None  # the C structs (kept alive)
    #: Internal interface (read by the launcher's hot path): ``blocks`` and
    #: ``cfg_address`` as plain slots.
    num_blocks: int
    cfg_ptr: int

    def __init__(
        self,
        blocks: int = 1,
        *,
        schedule_mode: str | None = None,
        timeout_s: int | None = None,
        timeout_us: int | None = None,
        dynamic_ub_size: int | None = None,
        engine: str | None = None,
        block_offset: int | None = None,
        no_prefetch: bool | None = None,
        data_dump: bool | None = None,
        profiling: bool | None = None,
    ) -> None:
        b = index_arg(blocks, "LaunchConfig(): blocks")
        if not 1 <= b < 1 << 32:
            raise ValueError(f"LaunchConfig(): blocks must be in [1, 2**32), got {b}")
        if timeout_s is not None and timeout_us is not None:
            raise ValueError(
                "LaunchConfig(): timeout_s and timeout_us are mutually exclusive (the runtime "
                "refuses both attributes together); give one"
            )
        values: dict[str, object] = {}
        attrs: list[tuple[int, str, int]] = []  # (id, union member, value)
        if schedule_mode is not None:
            if schedule_mode not in _SCHEDULE_MODES:
                if not isinstance(schedule_mode, str):
                    raise TypeError(
                        "LaunchConfig(): schedule_mode must be 'normal', 'batch' or None, not "
                        f"{type_name(schedule_mode)}"
                    )
                raise ValueError(
                    "LaunchConfig(): schedule_mode must be 'normal' or 'batch', "
                    f"got {schedule_mode!r}"
                )
            attrs.append((_A["schedule_mode"], "schemMode", _SCHEDULE_MODES[schedule_mode]))
            values["schedule_mode"] = schedule_mode
        if timeout_s is not None:
            attrs.append((_A["timeout_s"], "timeout", _uint(timeout_s, "timeout_s", 16)))
            values["timeout_s"] = int(timeout_s)
        if timeout_us is not None:
            attrs.append((_A["timeout_us"], "timeoutUs", _uint(timeout_us, "timeout_us", 64)))
            values["timeout_us"] = int(timeout_us)
        if dynamic_ub_size is not None:
            v = _uint(dynamic_ub_size, "dynamic_ub_size", 32)
            attrs.append((_A["dynamic_ub_size"], "dynUBufSize", v))
            values["dynamic_ub_size"] = v
        if engine is not None:
            if engine not in _ENGINES:
                if not isinstance(engine, str):
                    raise TypeError(
                        "LaunchConfig(): engine must be 'aic', 'aiv' or None, "
                        f"not {type_name(engine)}"
                    )
                raise ValueError(f"LaunchConfig(): engine must be 'aic' or 'aiv', got {engine!r}")
            attrs.append((_A["engine"], "engineType", _ENGINES[engine]))
            values["engine"] = engine
        if block_offset is not None:
            v = _uint(block_offset, "block_offset", 32)
            attrs.append((_A["block_offset"], "blockDimOffset", v))
            values["block_offset"] = v
        for name, member, flag in (
            ("no_prefetch", "isBlockTaskPrefetch", no_prefetch),
            ("data_dump", "isDataDump", data_dump),
            ("profiling", "enableProfiling", profiling),
        ):
            if flag is not None:
                attrs.append((_A[name], member, _flag(flag, name)))
                values[name] = bool(flag)
        self.num_blocks = b
        self._values = values
        if attrs:
            ffi = lowlevel.ffi
            arr: Any = ffi.new("aclrtLaunchKernelAttr[]", len(attrs))
            for i, (aid, member, v) in enumerate(attrs):
                arr[i].id = aid
                if member == "timeoutUs":
                    arr[i].value.timeoutUs.timeoutLow = v & 0xFFFFFFFF
                    arr[i].value.timeoutUs.timeoutHigh = v >> 32
                else:
                    setattr(arr[i].value, member, v)
            cfg: Any = ffi.new("aclrtLaunchKernelCfg *")
            cfg.attrs = arr
            cfg.numAttrs = len(attrs)
            self._cd = (arr, cfg)  # keeps the C structs alive
            self.cfg_ptr = int(ffi.cast("uintptr_t", cfg))
        else:
            self._cd = None
            self.cfg_ptr = 0  # NULL: no attributes

    @property
    def blocks(self) -> int:
        """The number of blocks (``numBlocks``) of each launch."""
        return self.num_blocks

    @property
    def attributes(self) -> dict[str, object]:
        """The attributes that are set, by keyword name."""
        return dict(self._values)

    @property
    def cfg_address(self) -> int:
        """Address of the ``aclrtLaunchKernelCfg`` (0 = NULL when no attribute is set),
        valid while this object lives: for raw ``lowlevel`` launches."""
        return self.cfg_ptr

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self._values.items())
        return f"LaunchConfig(blocks={self.num_blocks}{extra})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LaunchConfig):
            return NotImplemented
        return self.num_blocks == other.num_blocks and self._values == other._values

    def __hash__(self) -> int:
        return hash((self.num_blocks, tuple(sorted(self._values.items()))))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.num_blocks, self._values))

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, "cfg_ptr"):
            _immutable()
        object.__setattr__(self, name, value)


def _immutable() -> NoReturn:
    raise AttributeError("LaunchConfig is immutable; create a new one")


def _rebuild(blocks: int, values: dict[str, Any]) -> LaunchConfig:
    return LaunchConfig(blocks, **values)
