"""pyacl_rt: a fast cffi binding over AscendCL with Pythonic objects and a bundled mock.

The top-level names follow ``torch_npu.npu`` where the concept exists, so code written
against ``torch_npu.npu`` devices, streams, events and memory queries ports by changing
the import (``import pyacl_rt as npu``; the README lists the differences)::

    import pyacl_rt as npu

    npu.set_device(0)
    s = npu.Stream()
    start, end = npu.Event(enable_timing=True), npu.Event(enable_timing=True)
    with npu.stream(s):
        start.record()
        ...
        end.record()
    end.synchronize()
    print(start.elapsed_time(end), "ms", npu.mem_get_info())

Layers (lowest first): :mod:`pyacl_rt.lowlevel` (raw 1:1 calls, also
``lowlevel.fast``), :mod:`pyacl_rt.runtime` (init/finalize), then the objects:
:mod:`~pyacl_rt.device`, :mod:`~pyacl_rt.context`, :mod:`~pyacl_rt.stream`,
:mod:`~pyacl_rt.event`, :mod:`~pyacl_rt.callbacks`, :mod:`~pyacl_rt.memory`. Errors are
in :mod:`pyacl_rt.errors` (also re-exported here). The bundled mock runtime and its build
flags: ``python -m pyacl_rt.mock --cflags``; test controls: :func:`pyacl_rt.mock.mock_control`.

``import pyacl_rt`` loads no library and starts no runtime: the library is loaded and
``aclInit`` called on first real use (or by :func:`init`).

``pyacl_rt.device`` and ``pyacl_rt.stream`` are both the submodules and torch_npu's
context managers: calling the module, ``pyacl_rt.device(1)`` / ``pyacl_rt.stream(s)``,
returns ``pyacl_rt.device.device(1)`` / ``pyacl_rt.stream.stream(s)``. (Python binds a
package attribute to its submodule on import, so the two names cannot simply be
rebound; a callable module keeps ``from pyacl_rt import device`` working both ways.)
Type checkers see the modules: type-checked code writes ``pyacl_rt.device.device(1)``.
"""

from __future__ import annotations

import types
from typing import Any

from . import callbacks, context, device, errors, event, lowlevel, memory, runtime, stream
from ._allocator import (
    caching_allocator,
    caching_allocator_alloc,
    caching_allocator_delete,
    dump_snapshot,
    get_per_process_memory_fraction,
    host_memory_stats,
    memory_snapshot,
    record_memory_history,
    set_per_process_memory_fraction,
)
from ._dlpack import from_dlpack
from ._loader import backend_info
from ._syncdebug import get_sync_debug_mode, set_sync_debug_mode, sync_debug_mode
from .context import Context, current_context
from .device import (
    CallbackContextError,
    Device,
    DeviceProperties,
    InvalidDeviceError,
    ObjectClosedError,
    SyncTimeoutError,
    can_device_access_peer,
    current_device,
    device_count,
    device_of,
    get_cann_version,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_soc_version,
    is_available,
    is_bf16_supported,
    is_support_inf_nan,
    mem_get_info,
    set_device,
    set_op_timeout_ms,
    synchronize,
    utilization,
)
from .errors import (
    AclDeviceLostError,
    AclError,
    AclInternalError,
    AclOutOfMemoryError,
    AclResourceError,
    AclServiceError,
    AclUsageError,
    ConfigError,
    FeatureNotSupportedError,
    ForkedProcessError,
    FunctionNotFoundError,
    LibraryNotFoundError,
    NotInitializedError,
    RuntimeFinalizedError,
    SyncDebugError,
    SyncDebugWarning,
)
from .event import Event, EventTimingError
from .memory import (
    DeviceBuffer,
    HostBuffer,
    copy,
    copy_2d,
    empty_cache,
    host_memory_allocated,
    max_memory_allocated,
    max_memory_reserved,
    memcpy_async,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    memset,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from .runtime import finalize, init, is_initialized
from .stream import Stream, current_stream, default_stream, set_stream, stream_from_pool

__version__ = "0.1.0"

#: torch_npu's name for the out-of-memory error (also a :class:`MemoryError`).
OutOfMemoryError = AclOutOfMemoryError


class _CallableModule(types.ModuleType):
    """A submodule that also behaves as its namesake context manager when called."""

    _call_target: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, type(self)._call_target)(*args, **kwargs)


class _DeviceModule(_CallableModule):
    _call_target = "device"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``pyacl_rt.device(dev)``: the context manager :class:`pyacl_rt.device.device`."""
        return super().__call__(*args, **kwargs)


class _StreamModule(_CallableModule):
    _call_target = "stream"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``pyacl_rt.stream(s)``: the context manager :class:`pyacl_rt.stream.stream`."""
        return super().__call__(*args, **kwargs)


# The module objects stay the same (sys.modules, other modules' references); only
# their type gains __call__. A module's __class__ may be set to a ModuleType subclass.
device.__class__ = _DeviceModule
stream.__class__ = _StreamModule

__all__ = [
    "AclDeviceLostError",
    "AclError",
    "AclInternalError",
    "AclOutOfMemoryError",
    "AclResourceError",
    "AclServiceError",
    "AclUsageError",
    "CallbackContextError",
    "ConfigError",
    "Context",
    "Device",
    "DeviceBuffer",
    "DeviceProperties",
    "Event",
    "EventTimingError",
    "FeatureNotSupportedError",
    "ForkedProcessError",
    "FunctionNotFoundError",
    "HostBuffer",
    "InvalidDeviceError",
    "LibraryNotFoundError",
    "NotInitializedError",
    "ObjectClosedError",
    "OutOfMemoryError",
    "RuntimeFinalizedError",
    "Stream",
    "SyncDebugError",
    "SyncDebugWarning",
    "SyncTimeoutError",
    "__version__",
    "backend_info",
    "caching_allocator",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "callbacks",
    "can_device_access_peer",
    "context",
    "copy",
    "copy_2d",
    "current_context",
    "current_device",
    "current_stream",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "dump_snapshot",
    "empty_cache",
    "errors",
    "event",
    "finalize",
    "from_dlpack",
    "get_cann_version",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_per_process_memory_fraction",
    "get_soc_version",
    "get_sync_debug_mode",
    "host_memory_allocated",
    "host_memory_stats",
    "init",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "is_support_inf_nan",
    "lowlevel",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memcpy_async",
    "memory",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_summary",
    "memset",
    "record_memory_history",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "runtime",
    "set_device",
    "set_op_timeout_ms",
    "set_per_process_memory_fraction",
    "set_stream",
    "set_sync_debug_mode",
    "stream",
    "stream_from_pool",
    "sync_debug_mode",
    "synchronize",
    "utilization",
]
