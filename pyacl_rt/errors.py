"""Exception types of pyacl_rt and the mapping from AscendCL error codes to them.

Every failure pyacl_rt raises derives from :class:`AclError`. Errors coming from an
``aclError`` return value carry:

* ``code`` - the integer ``aclError`` value,
* ``name`` - the constant's name (``ACL_ERROR_RT_MEMORY_ALLOCATION``), from the
  table generated from the CANN headers (:func:`error_name`),
* ``function`` - the C function that failed (``"aclrtMalloc"``),
* ``recent_message`` - the runtime's own text (``aclGetRecentErrMsg``), which the
  raw layer reads at once on the failing thread (it is per thread and is cleared
  when read),
* ``explanation`` - one line: the likely cause and what to do.

Hierarchy by ACL code family (first digit of the code)::

    AclError
    +-- AclUsageError            1xxxxx  caller / parameter errors
    |   +-- NotInitializedError  100001 and pyacl_rt's own "not initialised" state
    |   |   +-- RuntimeFinalizedError   use of the runtime or an object after finalize()
    |   +-- InvalidDeviceError   (also ValueError) device index out of range / malformed
    |   +-- ObjectClosedError    a Stream / Event / Context / buffer used after close()
    |   +-- CallbackContextError (also RuntimeError) blocking call inside a host callback
    |   +-- SyncDebugError       (also RuntimeError) blocking call in sync-debug mode "error"
    |   +-- EventTimingError     (also ValueError) elapsed_time of events without timing
    |   +-- RaceError            (also RuntimeError) the mock's race sanitizer, action "raise"
    |   +-- StreamCaptureError   (also RuntimeError) graph capture rules, STREAM_CAPTURE_CODES
    |       +-- StreamCaptureUnsupportedError  107030 pageable copies / IPC events
    |       +-- StreamCaptureInvalidatedError  507903 the capture was discarded
    +-- AclResourceError         2xxxxx  resource errors
    |   +-- AclOutOfMemoryError  (also MemoryError) 207001, 207018, 200000, 245000
    |   +-- FeatureNotSupportedError   207000, 200001, 200006, 207019
    |       +-- FunctionNotFoundError  symbol missing in the loaded library (code None)
    +-- AclServiceError          3xxxxx  storage / sub-health
    +-- AclInternalError         5xxxxx  internal / device errors
    |   +-- AclDeviceLostError   sticky device faults (see DEVICE_LOST_CODES)
    |   +-- SyncTimeoutError     (also TimeoutError) 507046 / 507047, see SYNC_TIMEOUT_CODES
    +-- LibraryNotFoundError     (also OSError) the loader found no usable library
    +-- ConfigError              (also ValueError) bad PYACL_RT_* environment value
    +-- ForkedProcessError       (also RuntimeError) runtime used in a forked child

Not an :class:`AclError`: :class:`ExtensionNotBuiltError` (an ``ImportError``), raised by
``import pyacl_rt`` when the compiled extensions are missing (an unbuilt source tree).

Warnings (``UserWarning`` subclasses): :class:`BackendFallbackWarning` - the bundled
mock is used because no real library was found (``PYACL_RT_BACKEND=auto``);
:class:`SyncDebugWarning` - a call that makes the host wait for the device, in
sync-debug mode ``"warn"``; :class:`RaceWarning` - an ordering bug the mock's race
sanitizer found (``ASCEND_MOCK_SANITIZE=1``; :class:`RaceReport` describes it).

All exceptions pickle with every attribute (``__reduce__``), so they cross
``multiprocessing`` boundaries intact.

Imports only the standard library and the generated tables (layer 1 of
docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from ._raw import _abi_runtime

__all__ = [
    "DEVICE_LOST_CODES",
    "FEATURE_NOT_SUPPORTED_CODES",
    "OUT_OF_MEMORY_CODES",
    "STREAM_CAPTURE_CODES",
    "SYNC_TIMEOUT_CODES",
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
    "DumpConfigError",
    "EventTimingError",
    "ExtensionNotBuiltError",
    "FeatureNotSupportedError",
    "ForkedProcessError",
    "FunctionNotFoundError",
    "InvalidDeviceError",
    "IpcError",
    "IpcPermissionError",
    "LibraryNotFoundError",
    "NotInitializedError",
    "ObjectClosedError",
    "RaceAccess",
    "RaceError",
    "RaceReport",
    "RaceWarning",
    "RuntimeFinalizedError",
    "StreamCaptureError",
    "StreamCaptureInvalidatedError",
    "StreamCaptureUnsupportedError",
    "SyncDebugError",
    "SyncDebugWarning",
    "SyncTimeoutError",
    "TraceFormatError",
    "error_class_for_code",
    "error_from_code",
    "error_name",
    "explain",
]

# ----------------------------------------------------------------- code sets
#: Allocation failures: raised as :class:`AclOutOfMemoryError` (a ``MemoryError``).
OUT_OF_MEMORY_CODES: frozenset[int] = frozenset(
    {
        200000,  # ACL_ERROR_BAD_ALLOC
        207001,  # ACL_ERROR_RT_MEMORY_ALLOCATION ("only used by out of memory")
        207018,  # ACL_ERROR_RT_DEVICE_OOM
        245000,  # ACL_ERROR_GE_MEMORY_ALLOCATION
    }
)

#: "This runtime/hardware does not do that": :class:`FeatureNotSupportedError`.
FEATURE_NOT_SUPPORTED_CODES: frozenset[int] = frozenset(
    {
        207000,  # ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        200001,  # ACL_ERROR_API_NOT_SUPPORT
        200006,  # ACL_ERROR_FEATURE_UNSUPPORTED
        207019,  # ACL_ERROR_RT_FEATURE_NOT_SUPPORT_UPDATE_OP
    }
)

#: Sticky device faults: after one of these the device (or its context) is unusable
#: until it is reset, often until the card is recovered. Chosen from the runtime's
#: header comments and the codes torch_npu routes to its UCE / link-error handler
#: (acl_abi.md section 4.3): memory/ECC faults, link faults, lost heartbeat, HDC
#: disconnect, device set-up failure, and AI-core / vector-core / AI-CPU / FFTS+ / CCU
#: exceptions and traps (which poison the context until aclrtResetDevice).
#: Timeouts of a single sync (507046, 507047) are *not* in this set: they are
#: :class:`SyncTimeoutError` (an :class:`AclInternalError`) because the device may
#: well recover.
DEVICE_LOST_CODES: frozenset[int] = frozenset(
    {
        507010,  # ACL_ERROR_RT_LOST_HEARTBEAT
        507015,  # ACL_ERROR_RT_AICORE_EXCEPTION
        507016,  # ACL_ERROR_RT_AICORE_TRAP_EXCEPTION
        507018,  # ACL_ERROR_RT_AICPU_EXCEPTION
        507033,  # ACL_ERROR_RT_DEV_SETUP_ERROR
        507035,  # ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
        507036,  # ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION
        507042,  # ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW
        507043,  # ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW
        507044,  # ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW
        507045,  # ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW
        507049,  # ACL_ERROR_RT_FFTS_PLUS_EXCEPTION
        507050,  # ACL_ERROR_RT_FFTS_PLUS_TRAP_EXCEPTION
        507053,  # ACL_ERROR_RT_DEVICE_MEM_ERROR
        507054,  # ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR
        507055,  # ACL_ERROR_RT_SUSPECT_DEVICE_MEM_ERROR
        507056,  # ACL_ERROR_RT_LINK_ERROR
        507057,  # ACL_ERROR_RT_SUSPECT_REMOTE_ERROR
        507899,  # ACL_ERROR_RT_DRV_INTERNAL_ERROR
        507901,  # ACL_ERROR_RT_SOCKET_CLOSE (hdc disconnect)
        507904,  # ACL_ERROR_RT_COMM_OP_RETRY_FAIL
        507914,  # ACL_ERROR_RT_L3_PORT_ERROR
        507916,  # ACL_ERROR_RT_CCU_EXCEPTION
    }
)

#: A synchronize with a timeout expired (stream 507046, event 507047):
#: :class:`SyncTimeoutError` (also a ``TimeoutError``).
SYNC_TIMEOUT_CODES: frozenset[int] = frozenset(
    {
        507046,  # ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
        507047,  # ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
    }
)

#: Graph-capture rule violations (107024-107045, and 507903 "capture invalidated"):
#: raised as :class:`StreamCaptureError` and its subclasses.
STREAM_CAPTURE_CODES: frozenset[int] = frozenset(
    {107024, 107025, 107026, 107027, 107028, 107029, 107030, 107031, 107032}
    | {107033, 107034, 107036, 107038, 107041, 107045, 507903}
)

# --------------------------------------------------------------- explanations
_EXPLANATIONS: dict[int, str] = {
    100000: "An argument was rejected by the ACL layer (NULL pointer, zero size, value out of "
    "range); check the arguments named in the runtime message.",
    100001: "ACL is not initialised: call pyacl_rt.init() (or aclInit) first.",
    100002: "ACL was already initialised in this process (e.g. by torch_npu); harmless, "
    "pyacl_rt then leaves aclFinalize to whoever initialised it.",
    100003: "A file the runtime needs is missing or invalid (for version queries: is "
    "ASCEND_HOME_PATH set and does share/info/<pkg>/version.info exist?).",
    100006: "The JSON configuration could not be parsed; check the file given to aclInit "
    "(PYACL_RT_ACL_CONFIG).",
    100037: "ACL was already finalized; do not call aclFinalize twice.",
    100039: "A link-time stub libascendcl.so was loaded instead of the real runtime; fix "
    "LD_LIBRARY_PATH or set PYACL_RT_LIBRARY to the real library.",
    100045: "Dump is not running: call aclmdlInitDump before aclmdlSetDump/aclmdlFinalizeDump.",
    107000: "The runtime rejected an argument (invalid handle, size larger than the "
    "destination, bad flag); check sizes and handles.",
    107001: "Invalid device id: it must be below the device count (see "
    "ASCEND_RT_VISIBLE_DEVICES, which renumbers devices from 0).",
    107002: "This thread has no current context: call set_device()/aclrtSetDevice or set a "
    "context on this thread before using the runtime.",
    107003: "The stream belongs to another context/device than the calling thread's current "
    "one; switch to the stream's device first.",
    107006: "Event timestamp missing: create both events with timing enabled and record them "
    "before asking for the elapsed time.",
    107011: "The stream cannot be subscribed (already bound to another report thread or device).",
    107012: "The calling thread is not subscribed to any stream (aclrtSubscribeReport) - "
    "normal when polling aclrtProcessReport with nothing to do.",
    107015: "No callback thread is subscribed to this stream: subscribe a report thread "
    "(aclrtSubscribeReport) before aclrtLaunchCallback.",
    107017: "Invalid handle: the object was already destroyed or never created.",
    107019: "Waiting timed out.",
    107020: "A device task timed out; the operator or copy took longer than the "
    "configured operator timeout.",
    107022: "Device tasks are being aborted (FORCE STOP, aclrtDeviceTaskAbort); recover the "
    "device before submitting more work.",
    107023: "The stream is being aborted; its pending work was discarded.",
    107024: "Graph capture: the stream waited on an event that has no record in this "
    "capture; record the event on a capturing stream first (or wait outside the capture).",
    107025: "Graph capture: a side stream that joined the capture did not rejoin the "
    "capturing stream; make the capturing stream wait_stream() every side stream before "
    "capture_end().",
    107026: "The graph is still being captured: end the capture first.",
    107027: "The stream is already capturing (or bound to a model): one capture per stream.",
    107028: "Graph capture: an event recorded in the capture cannot be queried or "
    "synchronized while capturing; synchronize after capture_end() / replay().",
    107029: "The stream is not capturing (end or task-group call outside a capture).",
    107030: "Not allowed in graph capture: copies of pageable host memory (use pinned "
    "HostBuffer memory) or IPC events on a capturing stream.",
    107031: "Not allowed in graph capture: work on the default stream; capture on a side "
    "stream (pyacl_rt.graph does this for you).",
    107032: "Graph capture: an event links two different captures; keep each capture's "
    "streams separate.",
    107033: "Task-group state error: the group is already open or being updated.",
    107034: "Task-group error: a group's tasks must be on one capturing stream.",
    107036: "Graph capture: end the capture on the stream that began it, not a joined one.",
    107037: "The graph has a replay running or queued: synchronize its stream first.",
    107038: "Graph capture: capture_end() must run on the thread that called "
    "capture_begin() in 'global' and 'thread_local' modes (use 'relaxed' otherwise).",
    107040: "Graph update failed: the update does not match the captured tasks, or a "
    "replay is queued; synchronize and retry.",
    107041: "Not allowed in graph capture: synchronizing or querying a capturing stream, "
    "its device or context, or a synchronous copy/memset in 'global'/'thread_local' mode; "
    "move it out of the capture or use capture_error_mode='relaxed' for other threads.",
    107045: "Graph capture: a sub-graph of this capture is still capturing.",
    200000: "Host or device memory allocation failed: free unused buffers or reduce the "
    "request size.",
    200001: "This API is not supported by this runtime/hardware.",
    200006: "This feature is not supported by this runtime/hardware.",
    207000: "Feature not supported by this runtime, SoC or driver (or driver and firmware "
    "versions do not match); use a different API or upgrade CANN.",
    207001: "Device out of memory: free buffers (or empty caches), reduce the batch or "
    "allocation size, or use another device.",
    207002: "Freeing memory failed: the pointer was not allocated by this runtime or was "
    "already freed.",
    207004: "No Ascend device is visible: check the driver, container device mounts and "
    "ASCEND_RT_VISIBLE_DEVICES.",
    207005: "The runtime could not allocate an internal resource; release unused streams, "
    "events or contexts.",
    207006: "Permission denied by the driver: check device file permissions (/dev/davinci*) "
    "and the user's group.",
    207007: "Out of event resources: destroy events you no longer need (limits are per device).",
    207008: "Out of stream resources: destroy streams you no longer need or reuse a pool.",
    207012: "A runtime limit was exceeded (too many objects or too large a value).",
    207015: "The runtime resource was already initialised.",
    207018: "Device out of memory (reported by the device); free buffers or reduce the allocation.",
    300000: "A storage limit was exceeded.",
    500000: "Unknown internal ACL error; see the runtime message and the plog logs.",
    500001: "Internal ACL failure; see the runtime message and the plog logs.",
    500003: "Internal runtime failure; see the runtime message and the plog logs.",
    500004: "Internal driver failure; check the driver installation and dmesg.",
    507000: "Runtime internal error (often: an event used for timing was never recorded); "
    "see the runtime message.",
    507001: "Task scheduler (TS) internal error on the device.",
    507004: "The stream still has work pending (not an error for a query: it means 'not ready').",
    507006: "The event has not completed yet (not an error for a query: it means 'not ready').",
    507010: "The device stopped answering (lost heartbeat): the device is down; reset it or "
    "restart the process, and check npu-smi.",
    507011: "Model execution failed on the device; see the runtime message.",
    507012: "No host callback report arrived within the timeout - normal when polling "
    "aclrtProcessReport.",
    507014: "An AI Core task timed out; the operator took longer than the operator timeout.",
    507015: "An AI Core exception occurred (bad kernel input, out-of-bounds access): the "
    "context is poisoned; reset the device and check the last operator.",
    507018: "An AI CPU exception occurred: the context is poisoned; reset the device.",
    507033: "Device set-up failed: the device is unusable; check npu-smi and the driver.",
    507035: "A vector core exception occurred: the context is poisoned; reset the device.",
    507046: "Stream synchronisation timed out; the work is still running or the device is "
    "hung (raise the timeout or check the device).",
    507047: "Event synchronisation timed out; the recorded work is still running or the "
    "device is hung.",
    507053: "Device memory fault (UCE): the device must be recovered or reset before it "
    "can be used again.",
    507054: "Uncorrectable multi-bit HBM ECC error: the device must be recovered or reset "
    "before it can be used again.",
    507055: "Suspected device memory fault: the device must be recovered or reset.",
    507056: "Link error between devices (HCCS/RoCE): the device or link must be recovered.",
    507057: "Suspected remote (peer) error: the peer device or link must be recovered.",
    507899: "Driver internal error: the device is likely down; check dmesg and npu-smi, "
    "then reset the device or restart the process.",
    507900: "AI CPU internal error on the device.",
    507901: "The host-device channel (HDC) disconnected: the device is down; reset it or "
    "restart the process.",
    507903: "Graph capture was invalidated; restart the capture.",
    507904: "An HCCL communication operation failed after retries: the link or peer is down.",
    507902: "AI CPU kernel-info load was rejected by the device; see the runtime message.",
    507905: "Snapshot lock timed out: another snapshot/restore is in progress; retry later.",
    507906: "Snapshot lock failed: the device state could not be frozen for a snapshot.",
    507907: "Snapshot unlock failed; the device may need a reset.",
    507908: "Snapshot backup failed; the device state was not saved.",
    507909: "Snapshot restore failed; the device state was not restored (reset the device).",
    507910: "This host memory range is already registered.",
    507911: "This host memory range was never registered.",
    507912: "A registered snapshot callback failed; see the runtime message.",
    507913: "Registering the snapshot callback failed.",
    507914: "L3 port error: the network port is down.",
    507915: "CCU task timed out.",
    507916: "CCU exception: the device must be recovered.",
}

_FAMILY_EXPLANATIONS: dict[int, str] = {
    1: "The call was rejected because of its arguments or the calling state; check the "
    "runtime message for the bad argument.",
    2: "The runtime ran out of, or could not use, a resource; release unused objects or "
    "check the device.",
    3: "Storage / sub-health error reported by the runtime; see the runtime message.",
    5: "Internal runtime or device error; see the runtime message and the plog logs, and "
    "check the device with npu-smi.",
}


def error_name(code: int | None) -> str | None:
    """The ACL constant name for ``code`` (``ACL_ERROR_...``), or ``None`` if unknown."""
    if code is None:
        return None
    return _abi_runtime.ERROR_NAMES.get(code)


def explain(code: int | None) -> str:
    """One line: the likely cause of ``code`` and what to do about it."""
    if code is None:
        return ""
    text = _EXPLANATIONS.get(code)
    if text is not None:
        return text
    if code in OUT_OF_MEMORY_CODES:
        return _EXPLANATIONS[207001]
    if code in DEVICE_LOST_CODES:
        return (
            "Sticky device fault: the device (or its context) is unusable until it is reset; "
            "reset the device or restart the process."
        )
    if code in FEATURE_NOT_SUPPORTED_CODES:
        return _EXPLANATIONS[207000]
    family = _family(code)
    if family in _FAMILY_EXPLANATIONS:
        return _FAMILY_EXPLANATIONS[family]
    return "Unrecognised error code; see the runtime message."


def _family(code: int) -> int:
    if code <= 0:
        return 0
    return code // 100000 if code < 1000000 else 0


# ------------------------------------------------------------------ classes
def _restore(cls: type[AclError], state: dict[str, Any]) -> AclError:
    """Unpickle helper: rebuild without calling ``__init__`` (subclass signatures vary)."""
    try:
        exc = cls.__new__(cls)
    except TypeError:
        # MemoryError subclasses: MemoryError.__new__ refuses to build a subclass
        # through the generic path; BaseException.__new__ is what it delegates to.
        exc = BaseException.__new__(cls)
    exc.__dict__.update(state)
    exc.args = (state.get("message", ""),)
    return exc


class AclError(Exception):
    """Base class of every pyacl_rt error.

    ``str(exc)`` is one readable line (function, code name, code, explanation),
    followed by a second line with the runtime's own message when it gave one.
    """

    code: int | None
    name: str | None
    function: str | None
    recent_message: str | None
    explanation: str
    message: str

    def __init__(
        self,
        message: str | None = None,
        *,
        code: int | None = None,
        function: str | None = None,
        recent_message: str | None = None,
        explanation: str | None = None,
        name: str | None = None,
    ) -> None:
        self.code = code
        self.name = name if name is not None else error_name(code)
        self.function = function
        self.recent_message = recent_message or None
        self.explanation = explanation if explanation is not None else explain(code)
        self.message = message if message is not None else self._default_message()
        super().__init__(self.message)

    def _default_message(self) -> str:
        parts: list[str] = []
        if self.function:
            parts.append(f"{self.function}() failed")
        else:
            parts.append("ACL call failed")
        if self.code is not None:
            label = self.name or "unknown error code"
            parts.append(f": {label} ({self.code})")
        text = "".join(parts)
        if self.explanation:
            text += ". " + self.explanation
        return text

    def __str__(self) -> str:
        if self.recent_message:
            return f"{self.message}\n  runtime message: {self.recent_message.strip()}"
        return self.message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code!r}, name={self.name!r}, "
            f"function={self.function!r}, message={self.message!r})"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), dict(self.__dict__)))


class AclUsageError(AclError):
    """1xxxxx: the call was rejected because of its arguments or the calling state."""


class NotInitializedError(AclUsageError):
    """ACL is not initialised (100001), or pyacl_rt's runtime is not started.

    Raised with ``code=None`` by the runtime layer when ``PYACL_RT_LAZY_INIT=0``
    and the runtime is used before :func:`pyacl_rt.init`.
    """


class RuntimeFinalizedError(NotInitializedError):
    """The runtime (or an object created before) was used after ``finalize()``."""


class AclResourceError(AclError):
    """2xxxxx: out of, or unable to use, a resource."""


class AclOutOfMemoryError(AclResourceError, MemoryError):
    """An allocation failed (207001 and similar). Also a :class:`MemoryError`."""


class FeatureNotSupportedError(AclResourceError):
    """The runtime, SoC or driver does not support this call (207000 and similar)."""


class FunctionNotFoundError(FeatureNotSupportedError):
    """The loaded library does not export this function (older CANN, or the mock).

    ``code`` is ``None``; ``function`` and ``library`` name what was missing where.
    """

    library: str | None

    def __init__(
        self,
        function: str,
        library: str | None = None,
        message: str | None = None,
    ) -> None:
        self.library = library
        if message is None:
            where = f"the loaded library {library}" if library else "the loaded library"
            message = (
                f"{function}() is not available: {where} does not export it "
                "(older CANN version, or a function the mock does not provide)"
            )
        super().__init__(
            message,
            function=function,
            explanation="Check pyacl_rt.lowlevel for which symbols resolved; upgrade CANN "
            "or avoid this function.",
        )


class InvalidDeviceError(AclUsageError, ValueError):
    """A device index is out of range or of the wrong form (also a ``ValueError``)."""


class ObjectClosedError(AclUsageError):
    """A Stream / Event / Context / buffer was used after ``close()``."""


class CallbackContextError(AclUsageError, RuntimeError):
    """A blocking runtime call was made from inside a host callback.

    Host callbacks run on pyacl_rt's report thread while the stream waits for them;
    a synchronize (of a stream, event or device), or ``pyacl_rt.finalize()``, from
    there would wait for itself.
    """


class SyncDebugError(AclUsageError, RuntimeError):
    """A call that makes the host wait for the device, made in sync-debug mode
    ``"error"`` (:func:`pyacl_rt.set_sync_debug_mode`); it was refused before waiting.

    ``function`` names the pyacl_rt call (``"Stream.synchronize()"``). Also a
    ``RuntimeError``, as torch raises for its sync-debug mode.
    """


class EventTimingError(AclUsageError, ValueError):
    """``Event.elapsed_time`` on events created without ``enable_timing=True`` or never
    recorded (also a ``ValueError``)."""


class IpcError(AclError):
    """Sharing a buffer or an event between processes failed: a handle opened in the
    process that exported it, an exporter that closed it or exited, a handle of the
    wrong kind, or a runtime IPC failure (``code`` 507022 and similar)."""


class IpcPermissionError(IpcError, PermissionError):
    """The exporter did not allow this process to import (``code`` 207006): the pid
    is not on the export's whitelist (see ``DeviceBuffer.ipc_handle(pids=...)``)."""


class AclServiceError(AclError):
    """3xxxxx: storage / sub-health errors."""


class AclInternalError(AclError):
    """5xxxxx: internal runtime, driver or device errors."""


class AclDeviceLostError(AclInternalError):
    """A sticky device fault (see :data:`DEVICE_LOST_CODES`): reset or recover the device."""


class SyncTimeoutError(AclInternalError, TimeoutError):
    """A synchronize with a timeout expired (507046 / 507047). Also a ``TimeoutError``.

    Every path that reports these codes raises it: ``synchronize(timeout=...)`` of
    streams and events, :func:`pyacl_rt.lowlevel.check` and the checked
    :data:`pyacl_rt.lowlevel.fast` calls.
    """


class StreamCaptureError(AclUsageError, RuntimeError):
    """A call broke the rules of graph capture (codes in :data:`STREAM_CAPTURE_CODES`,
    e.g. 107041 synchronizing a capturing stream, 107028 querying an event recorded in
    the capture, 107031 the default stream). Most of them invalidate the capture:
    :meth:`pyacl_rt.NPUGraph.capture_end` then raises
    :class:`StreamCaptureInvalidatedError`."""


class StreamCaptureUnsupportedError(StreamCaptureError):
    """An operation that graph capture cannot record (107030: copies of pageable
    host memory - use pinned :class:`~pyacl_rt.HostBuffer` memory - or IPC events)."""


class StreamCaptureInvalidatedError(StreamCaptureError, AclInternalError):
    """The capture was invalidated by a forbidden call (507903); it was discarded.
    Also an :class:`AclInternalError` (the code's family)."""


class LibraryNotFoundError(AclError, OSError):
    """No usable libascendcl.so was found (or it failed to load). Also an :class:`OSError`.

    ``searched`` lists every place that was tried, in order.
    """

    searched: tuple[str, ...]
    backend: str | None

    def __init__(
        self,
        message: str,
        *,
        searched: Iterable[str] = (),
        backend: str | None = None,
    ) -> None:
        self.searched = tuple(searched)
        self.backend = backend
        super().__init__(
            message,
            explanation="Install CANN and source its set_env.sh, set PYACL_RT_LIBRARY, or "
            "use PYACL_RT_BACKEND=mock.",
        )

    def __str__(self) -> str:
        if not self.searched:
            return self.message
        return self.message + "\n  searched:\n" + "\n".join(f"    {s}" for s in self.searched)


class ConfigError(AclError, ValueError):
    """A ``PYACL_RT_*`` environment variable (or a config argument) has a bad value."""

    variable: str | None
    value: str | None
    accepted: str | None

    def __init__(
        self,
        message: str,
        *,
        variable: str | None = None,
        value: str | None = None,
        accepted: str | None = None,
    ) -> None:
        self.variable = variable
        self.value = value
        self.accepted = accepted
        super().__init__(message, explanation="")

    @classmethod
    def for_variable(cls, variable: str, value: str, accepted: str) -> ConfigError:
        """The standard message: variable, bad value, accepted values."""
        return cls(
            f"invalid value {value!r} for environment variable {variable}: expected {accepted}",
            variable=variable,
            value=value,
            accepted=accepted,
        )


class ForkedProcessError(AclError, RuntimeError):
    """The runtime was used in a child created by ``fork()`` after the parent initialised it.

    The Ascend runtime's threads and device state do not survive fork; use the
    ``multiprocessing`` start method ``'spawn'`` (or ``'forkserver'``).
    """

    def __init__(self, message: str | None = None, *, function: str | None = None) -> None:
        if message is None:
            message = (
                "the Ascend runtime cannot be used in a forked subprocess: the parent had "
                "already initialised it. Use multiprocessing.get_context('spawn') (or "
                "'forkserver') to start worker processes."
            )
        super().__init__(message, function=function, explanation="")


class DumpConfigError(ValueError):
    """A dump config (``pyacl_rt.dump``) is invalid: ``key`` names the offending key
    (``None``: the document as a whole) and ``value`` its value. Raised before anything
    reaches the runtime: a ``ValueError``, not an :class:`AclError`."""

    def __init__(self, key: str | None, value: object, problem: str) -> None:
        self.key = key
        self.value = value
        where = f"dump config: {key!r}" if key else "dump config"
        super().__init__(f"{where}: {problem} (got {value!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_dump_config_error, (self.key, self.value, str(self)))


def _rebuild_dump_config_error(key: str | None, value: object, text: str) -> DumpConfigError:
    exc = DumpConfigError.__new__(DumpConfigError)
    ValueError.__init__(exc, text)
    exc.key = key
    exc.value = value
    return exc


class TraceFormatError(ValueError):
    """A profile file breaks the Chrome trace event format, or is not the JSON the
    ``pyacl-rt trace`` commands read; the message names the event index and field."""


class ExtensionNotBuiltError(ImportError):
    """pyacl_rt's compiled extensions are missing: ``import pyacl_rt`` found a source
    tree that was never built (or an incomplete installation). The message says which
    copy was imported, whether an installed copy is shadowed by it, and how to fix it.
    Not an :class:`AclError` (nothing reached the runtime); an ``ImportError``."""


# ------------------------------------------------------------------ warnings
class BackendFallbackWarning(UserWarning):
    """``PYACL_RT_BACKEND=auto`` found no usable real libascendcl.so and uses the bundled
    mock. Issued once per process, attributed to the user's line that first needed the
    library; ``PYACL_RT_BACKEND=mock`` (or ``PYACL_RT_WARN_FALLBACK=0``) silences it."""


class SyncDebugWarning(UserWarning):
    """Issued in sync-debug mode ``"warn"`` (:func:`pyacl_rt.set_sync_debug_mode`) by a
    call that makes the host wait for the device; attributed to the calling line."""


# ------------------------------------------------------------ race sanitizer
class RaceAccess(NamedTuple):
    """One side of a :class:`RaceReport`: a task (or host operation) and how it touched
    the bytes."""

    #: The mock's task (or host operation) number.
    task_id: int
    #: Device index, -1 when unknown.
    device: int
    #: The mock's stream number, -1 for the host.
    stream_id: int
    #: The ``aclrtStream`` handle (``Stream.handle``), 0 for the host.
    stream: int
    #: ``"read"``, ``"write"`` or ``"read-write"``.
    access: str
    #: ``"aclrtMemcpyAsync"``, a kernel name, ``"aclrtFree"``, ``"host read"`` ...
    name: str
    #: The user's line that enqueued it (``"prog.py:12"``), or ``""``.
    tag: str


class RaceReport(NamedTuple):
    """A report of the mock's race sanitizer (``ASCEND_MOCK_SANITIZE=1``)."""

    #: ``"race"`` (two tasks on different streams, not ordered), ``"host_race"`` (the
    #: host touched memory a pending task uses) or ``"use_after_free"``.
    kind: str
    #: Device index, -1 when unknown.
    device: int
    #: First byte of the conflict (an address).
    address: int
    #: Bytes in conflict.
    size: int
    #: The later access, in program order (the call that was being made).
    current: RaceAccess
    #: The earlier access it is not ordered after.
    previous: RaceAccess
    #: The mock's one-line description (both tasks, their streams and user lines).
    message: str


class RaceError(AclUsageError, RuntimeError):
    """Ordering bugs the mock's race sanitizer reported, raised under the action
    ``"raise"`` (:func:`pyacl_rt.mock.set_race_action`) by the call that made the later
    access. ``reports`` lists them (:class:`RaceReport`). Before it is raised, the
    stream of that call is synchronized, so nothing it enqueued is left pending."""

    reports: tuple[RaceReport, ...]

    def __init__(
        self, message: str | None = None, *, reports: Iterable[RaceReport] = (), **kw: Any
    ) -> None:
        self.reports = tuple(reports)
        if message is None:
            message = "race sanitizer: " + "; ".join(r.message for r in self.reports)
        super().__init__(message, **kw)


class RaceWarning(UserWarning):
    """An ordering bug the mock's race sanitizer reported (``ASCEND_MOCK_SANITIZE=1``,
    action ``"warn"``, the default), attributed to the user's line that made the later
    access; ``report`` is the :class:`RaceReport`. Each kind of race (same calls, lines
    and streams) is warned once per process."""

    report: RaceReport | None

    def __init__(self, message: str, report: RaceReport | None = None) -> None:
        super().__init__(message)
        self.report = report

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.report))


# ----------------------------------------------------------------- dispatch
_FAMILY_CLASSES: dict[int, type[AclError]] = {
    1: AclUsageError,
    2: AclResourceError,
    3: AclServiceError,
    5: AclInternalError,
}


def error_class_for_code(code: int) -> type[AclError]:
    """The exception class :func:`error_from_code` uses for ``code``."""
    if code == 100001:
        return NotInitializedError
    if code in OUT_OF_MEMORY_CODES:
        return AclOutOfMemoryError
    if code in FEATURE_NOT_SUPPORTED_CODES:
        return FeatureNotSupportedError
    if code in DEVICE_LOST_CODES:
        return AclDeviceLostError
    if code in SYNC_TIMEOUT_CODES:
        return SyncTimeoutError
    if code in STREAM_CAPTURE_CODES:
        if code == 107030:
            return StreamCaptureUnsupportedError
        if code == 507903:
            return StreamCaptureInvalidatedError
        return StreamCaptureError
    return _FAMILY_CLASSES.get(_family(code), AclError)


def error_from_code(
    code: int,
    *,
    function: str | None = None,
    recent_message: str | None = None,
) -> AclError:
    """Build (not raise) the exception for a nonzero ``aclError`` ``code``.

    ``recent_message`` should be the result of ``aclGetRecentErrMsg()`` read on the
    failing thread right after the failing call.
    """
    code = int(code)
    cls = error_class_for_code(code)
    return cls(code=code, function=function, recent_message=recent_message)
