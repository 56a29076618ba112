"""Graph capture and replay on the mock through the raw layer (pyacl_rt.lowlevel): the
calls a Python graph layer (torch_npu's NPUGraph) will make, with their results and
error codes (acl_next_semantics.md §2)."""

from __future__ import annotations

from typing import Any

import pytest

from pyacl_rt._raw._abi_runtime import CONSTANTS

GLOBAL = CONSTANTS["ACL_MODEL_RI_CAPTURE_MODE_GLOBAL"]
RELAXED = CONSTANTS["ACL_MODEL_RI_CAPTURE_MODE_RELAXED"]
ACTIVE = CONSTANTS["ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE"]
NONE = CONSTANTS["ACL_MODEL_RI_CAPTURE_STATUS_NONE"]
H2D = CONSTANTS["ACL_MEMCPY_HOST_TO_DEVICE"]
D2H = CONSTANTS["ACL_MEMCPY_DEVICE_TO_HOST"]
D2D = CONSTANTS["ACL_MEMCPY_DEVICE_TO_DEVICE"]


@pytest.fixture
def dev(mock_loaded: Any) -> Any:
    ll = mock_loaded
    assert ll.aclrtSetDevice(0) == 0
    yield ll
    assert ll.aclrtResetDevice(0) == 0


def _new(ll: Any, fn: str, *args: Any) -> int:
    out = ll.ffi.new("uintptr_t *")
    ll.check(getattr(ll, fn)(ll.ffi.cast("void *", out), *args), fn)
    return int(out[0])


def _status(ll: Any, stream: int) -> tuple[int, int]:
    st = ll.ffi.new("int32_t *")
    ri = ll.ffi.new("uintptr_t *")
    ll.check(ll.aclmdlRICaptureGetInfo(stream, st, ri), "aclmdlRICaptureGetInfo")
    return int(st[0]), int(ri[0])


def test_capture_two_streams_and_replay(dev: Any) -> None:
    """Fork/join capture of copies and a memset, replayed with new host input each time."""
    ll = dev
    s1, s2, ex = (_new(ll, "aclrtCreateStream") for _ in range(3))
    fork = _new(ll, "aclrtCreateEventWithFlag", CONSTANTS["ACL_EVENT_SYNC"])
    join = _new(ll, "aclrtCreateEventWithFlag", CONSTANTS["ACL_EVENT_SYNC"])
    a = _new(ll, "aclrtMalloc", 256, 0)
    b = _new(ll, "aclrtMalloc", 256, 0)
    host = _new(ll, "aclrtMallocHost", 512)
    buf = ll.ffi.cast("unsigned char *", host)
    ll.check(ll.aclmdlRICaptureBegin(s1, GLOBAL), "aclmdlRICaptureBegin")
    assert _status(ll, s1)[0] == ACTIVE
    ll.check(ll.aclrtMemcpyAsync(a, 256, host, 256, H2D, s1), "aclrtMemcpyAsync")
    ll.check(ll.aclrtRecordEvent(fork, s1), "aclrtRecordEvent")
    ll.check(ll.aclrtStreamWaitEvent(s2, fork), "aclrtStreamWaitEvent")
    ll.check(ll.aclrtMemcpyAsync(b, 256, a, 256, D2D, s2), "aclrtMemcpyAsync")
    ll.check(ll.aclrtRecordEvent(join, s2), "aclrtRecordEvent")
    ll.check(ll.aclrtStreamWaitEvent(s1, join), "aclrtStreamWaitEvent")
    ll.check(ll.aclrtMemsetAsync(a, 256, 0x7F, 16, s1), "aclrtMemsetAsync")
    ll.check(ll.aclrtMemcpyAsync(host + 256, 256, b, 256, D2H, s1), "aclrtMemcpyAsync")
    ri = ll.ffi.new("uintptr_t *")
    ll.check(ll.aclmdlRICaptureEnd(s1, ri), "aclmdlRICaptureEnd")
    model = int(ri[0])
    assert _status(ll, s1) == (NONE, 0) and _status(ll, s2) == (NONE, 0)
    for i in range(50):
        ll.ffi.memmove(buf, bytes([i]) * 256, 256)
        ll.check(ll.aclmdlRIExecuteAsync(model, ex), "aclmdlRIExecuteAsync")
        ll.check(ll.aclrtSynchronizeStream(ex), "aclrtSynchronizeStream")
        assert bytes(ll.ffi.buffer(buf + 256, 256)) == bytes([i]) * 256
    ll.check(ll.aclmdlRIDestroy(model), "aclmdlRIDestroy")
    for fn, h in (("aclrtFree", a), ("aclrtFree", b), ("aclrtFreeHost", host)):
        ll.check(getattr(ll, fn)(h), fn)
    for e in (fork, join):
        ll.check(ll.aclrtDestroyEvent(e), "aclrtDestroyEvent")
    for s in (s1, s2, ex):
        ll.check(ll.aclrtDestroyStream(s), "aclrtDestroyStream")


def test_forbidden_call_is_a_typed_error(dev: Any) -> None:
    """A synchronize of a capturing stream raises with code 107041 and the capture ends
    invalidated (507903)."""
    from pyacl_rt import errors

    ll = dev
    s = _new(ll, "aclrtCreateStream")
    ll.check(ll.aclmdlRICaptureBegin(s, RELAXED), "aclmdlRICaptureBegin")
    rc = ll.aclrtSynchronizeStream(s)
    assert rc == 107041
    with pytest.raises(errors.AclError) as ei:
        ll.check(rc, "aclrtSynchronizeStream")
    assert ei.value.code == 107041
    ri = ll.ffi.new("uintptr_t *")
    assert ll.aclmdlRICaptureEnd(s, ri) == 507903
    assert int(ri[0]) == 0
    ll.check(ll.aclrtDestroyStream(s), "aclrtDestroyStream")
