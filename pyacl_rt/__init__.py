"""pyacl_rt: a fast cffi binding over AscendCL with Pythonic objects and a bundled mock.

The top-level names follow ``torch_npu.npu`` where the concept exists, so code written
against ``torch_npu.npu`` devices, streams, events and memory queries ports by changing
the import (``import pyacl_rt as npu``; docs/porting/torch_npu.md lists the differences)::

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

Layers (lowest first; docs/architecture.md has the tree and a call's path): the
generated tables and :mod:`pyacl_rt.errors`; the raw layer :mod:`pyacl_rt.lowlevel`
(raw 1:1 calls, also ``lowlevel.fast``); the runtime lifecycle (:func:`init` /
:func:`finalize`); then the objects: devices and contexts, streams, events and host
callbacks, memory. Everything an application uses is exported here (and reports
``pyacl_rt`` as its module); modules whose name starts with an underscore are private
implementation details that may move. Public modules: :mod:`pyacl_rt.lowlevel`,
:mod:`pyacl_rt.errors` (also re-exported here), :mod:`pyacl_rt.mock` (the bundled mock
runtime and its build flags: ``python -m pyacl_rt.mock --cflags``; test controls:
:func:`pyacl_rt.mock.mock_control`) and :mod:`pyacl_rt.cli`.

``import pyacl_rt`` loads no library and starts no runtime: the library is loaded and
``aclInit`` called on first real use (or by :func:`init`).

``pyacl_rt.device`` is a class and ``pyacl_rt.stream`` a function, as in torch_npu:
``with pyacl_rt.device(1):`` and ``with pyacl_rt.stream(s):`` (type-checked as such).
"""

from __future__ import annotations

from contextlib import suppress as _suppress
from types import FunctionType as _FunctionType
from typing import TYPE_CHECKING

from . import errors

try:
    from . import lowlevel
except errors.ExtensionNotBuiltError as _unbuilt:
    # An unbuilt source tree (typically a checkout that shadows the installed copy).
    # The command lines that can still help say so themselves instead of a traceback.
    import sys

    from ._raw._shadow import running_module

    _tool = running_module()
    if _tool == "pyacl_rt.mock":  # build flags: from the installed copy's bundled mock
        from . import mock

        raise SystemExit(mock.main(sys.argv[1:])) from None
    if _tool in ("pyacl_rt", "pyacl_rt.__main__", "pyacl_rt.cli"):
        sys.stderr.write(f"pyacl-rt: error: ExtensionNotBuiltError: {_unbuilt}\n")
        raise SystemExit(1) from None
    raise

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
from ._context import Context, current_context
from ._device import (
    Device,
    DeviceProperties,
    current_device,
    device,
    device_count,
    device_of,
    is_available,
    set_device,
    synchronize,
)
from ._devinfo import (
    can_device_access_peer,
    get_cann_version,
    get_device_capability,
    get_device_name,
    get_device_properties,
    get_soc_version,
    is_bf16_supported,
    is_support_inf_nan,
    mem_get_info,
    set_op_timeout_ms,
    utilization,
)
from ._dlpack import from_dlpack
from ._event import Event, EventTimingError
from ._graph import GraphPoolHandle, NPUGraph, graph, graph_pool_handle, make_graphed_callables
from ._ipc import IpcEventHandle, IpcMemHandle, ipc_collect, ipc_pid
from ._kernels import (
    Kernel,
    KernelAttributes,
    LaunchConfig,
    ObjectCode,
    ParamInfo,
    RandomGenerator,
    launch,
    random_async,
    reduce_async,
)
from ._memory import (
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
from ._runtime import finalize, init, is_initialized
from ._state import forget_thread_context
from ._stream import (
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    set_stream,
    stream,
    stream_from_pool,
)
from ._syncdebug import get_sync_debug_mode, set_sync_debug_mode, sync_debug_mode
from .errors import (
    AclDeviceLostError,
    AclError,
    AclInternalError,
    AclOutOfMemoryError,
    AclResourceError,
    AclServiceError,
    AclUsageError,
    BackendFallbackWarning,
    CallbackContextError,
    ConfigError,
    FeatureNotSupportedError,
    ForkedProcessError,
    FunctionNotFoundError,
    InvalidDeviceError,
    IpcError,
    IpcPermissionError,
    LibraryNotFoundError,
    NotInitializedError,
    ObjectClosedError,
    RaceError,
    RaceWarning,
    RuntimeFinalizedError,
    StreamCaptureError,
    StreamCaptureInvalidatedError,
    StreamCaptureUnsupportedError,
    SyncDebugError,
    SyncDebugWarning,
    SyncTimeoutError,
)

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ._raw._backend import BackendInfo


def backend_info() -> BackendInfo:
    """Load the library if needed and report the backend (``"real"`` / ``"mock"``), its
    path, how it was found, the CANN version and which functions it exports."""
    from ._raw._backend import backend_info as info

    return info()


#: torch_npu's name for the out-of-memory error (also a :class:`MemoryError`).
OutOfMemoryError = AclOutOfMemoryError

__all__ = [
    "AclDeviceLostError",
    "AclError",
    "AclInternalError",
    "AclOutOfMemoryError",
    "AclResourceError",
    "AclServiceError",
    "AclUsageError",
    "BackendFallbackWarning",
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
    "GraphPoolHandle",
    "HostBuffer",
    "InvalidDeviceError",
    "IpcError",
    "IpcEventHandle",
    "IpcMemHandle",
    "IpcPermissionError",
    "Kernel",
    "KernelAttributes",
    "LaunchConfig",
    "LibraryNotFoundError",
    "NPUGraph",
    "NotInitializedError",
    "ObjectClosedError",
    "ObjectCode",
    "OutOfMemoryError",
    "ParamInfo",
    "RaceError",
    "RaceWarning",
    "RandomGenerator",
    "RuntimeFinalizedError",
    "Stream",
    "StreamCaptureError",
    "StreamCaptureInvalidatedError",
    "StreamCaptureUnsupportedError",
    "StreamContext",
    "SyncDebugError",
    "SyncDebugWarning",
    "SyncTimeoutError",
    "__version__",
    "backend_info",
    "caching_allocator",
    "caching_allocator_alloc",
    "caching_allocator_delete",
    "can_device_access_peer",
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
    "finalize",
    "forget_thread_context",
    "from_dlpack",
    "get_cann_version",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "get_per_process_memory_fraction",
    "get_soc_version",
    "get_sync_debug_mode",
    "graph",
    "graph_pool_handle",
    "host_memory_allocated",
    "host_memory_stats",
    "init",
    "ipc_collect",
    "ipc_pid",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "is_support_inf_nan",
    "launch",
    "lowlevel",
    "make_graphed_callables",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memcpy_async",
    "memory_allocated",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_summary",
    "memset",
    "random_async",
    "record_memory_history",
    "reduce_async",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
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


def _present_as_public() -> None:
    """Classes and functions exported here report ``pyacl_rt`` as their module, not the
    private one that implements them: ``help()``, tracebacks and reprs show the name to
    import (``pyacl_rt.Stream``), and pickling by reference resolves through it. Error
    classes live in (and report) :mod:`pyacl_rt.errors`. Private Python base classes
    of exported ones (the buffers' ``_Buffer``) follow, so that ``help()`` does not
    point into the private modules either."""
    for name in __all__:
        obj = globals()[name]
        if not isinstance(obj, type | _FunctionType):
            continue
        for item in obj.__mro__ if isinstance(obj, type) else (obj,):
            if item.__module__.startswith("pyacl_rt._"):
                with _suppress(TypeError):  # a C type's module is part of its name
                    item.__module__ = __name__


_present_as_public()
