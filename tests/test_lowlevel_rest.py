"""The rest of the runtime API through ``pyacl_rt.lowlevel`` on the mock (issue 18): process
snapshots (a thread blocked at the resource gate does not hold the GIL), shared buffers,
cache maintenance, the device error queries. The C side is tested in
mock_libascendcl/tests/c/test_{snapshot,mbuf,cmo,rest}.c; this shows the raw calls work
from Python, for the Pythonic layer built on them later."""

from __future__ import annotations

import os
import threading
from typing import Any

from pyacl_rt._raw._abi_runtime import CONSTANTS, ERROR_CODES


def _code(name: str) -> int:
    return ERROR_CODES[name] if name in ERROR_CODES else CONSTANTS[name]


def test_snapshot_lock_blocks_a_malloc_thread_until_unlock(mock_loaded: Any) -> None:
    ll = mock_loaded
    s = ll.scratch()
    assert ll.aclrtSetDevice(0) == 0
    pid = os.getpid()
    result: dict[str, int] = {}
    try:
        assert ll.aclrtSnapShotProcessLock(pid, 0) == 0

        def malloc() -> None:
            t = ll.scratch()  # per thread
            assert ll.aclrtSetDevice(0) == 0
            result["rc"] = ll.aclrtMalloc(t.uptr, 128, 0)
            result["ptr"] = int(t.uptr[0])
            assert ll.aclrtResetDevice(0) == 0

        worker = threading.Thread(target=malloc)
        worker.start()
        worker.join(0.05)
        assert worker.is_alive() and "rc" not in result  # held at the gate, GIL released
        assert ll.aclrtGetDeviceCount(s.u32) == 0  # queries pass
        assert ll.aclrtSnapShotProcessBackup(pid, ll.ffi.NULL) == 0
        assert ll.aclrtSnapShotProcessLock(pid, 0) == _code("ACL_ERROR_SNAPSHOT_LOCK_FAILED")
        assert ll.aclrtSnapShotProcessUnlock(pid, 0) == 0
        worker.join(60)
        assert not worker.is_alive() and result["rc"] == 0
        assert ll.aclrtFree(result["ptr"]) == 0
    finally:
        ll.aclrtSnapShotProcessUnlock(pid, 0)
        assert ll.aclrtResetDevice(0) == 0


def test_shared_buffer_round_trip(mock_loaded: Any) -> None:
    ll = mock_loaded
    s = ll.scratch()
    assert ll.aclrtSetDevice(0) == 0
    buf = 0
    try:
        assert ll.aclrtAllocBuf(s.uptr, 64) == 0
        buf = int(s.uptr[0])
        assert ll.aclrtCopyBufRef(buf, s.uptr) == 0
        ref = int(s.uptr[0])
        assert ll.aclrtAppendBufChain(buf, ref) == 0
        assert ll.aclrtGetBufChainNum(buf, s.u32) == 0 and s.u32[0] == 2
        assert ll.aclrtGetBufData(ref, s.uptr, s.size) == 0 and s.size[0] == 64
        assert s.uptr[0] != 0  # the data area (device memory)
        tag = ll.ffi.new("char[8]", b"pyacl")
        addr = int(ll.ffi.cast("uintptr_t", tag))
        assert ll.aclrtSetBufUserData(buf, addr, 8, 88) == 0
        assert ll.aclrtSetBufUserData(buf, addr, 8, 89) == _code("ACL_ERROR_INVALID_PARAM")
        assert ll.aclrtFreeBuf(ref) == _code("ACL_ERROR_RT_PARAM_INVALID")  # a chain member
        assert ll.aclrtFreeBuf(buf) == 0  # frees the chain
        buf = 0
    finally:
        if buf:
            ll.aclrtFreeBuf(buf)
        assert ll.aclrtResetDevice(0) == 0


def test_cmo_and_error_queries(mock_loaded: Any) -> None:
    ll = mock_loaded
    s = ll.scratch()
    assert ll.aclrtSetDevice(0) == 0
    try:
        assert ll.aclrtMalloc(s.uptr, 256, 0) == 0
        dev = int(s.uptr[0])
        prefetch = CONSTANTS["ACL_RT_CMO_TYPE_PREFETCH"]
        assert ll.aclrtCmoAsync(dev, 256, prefetch, 0) == 0
        assert ll.aclrtSynchronizeDevice() == 0
        assert ll.aclrtFree(dev) == 0
        info = ll.ffi.new("aclrtErrorInfo *")
        assert ll.aclrtGetErrorVerbose(0, info) == 0
        assert info.errorType == CONSTANTS["ACL_RT_NO_ERROR"]
        assert ll.aclrtGetMemUceInfo(0, ll.ffi.NULL, 0, s.size) == 0 and s.size[0] == 0
    finally:
        assert ll.aclrtResetDevice(0) == 0
