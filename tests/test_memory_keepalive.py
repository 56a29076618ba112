"""pyacl_rt._memory.keepalive: foreign objects handed to an asynchronous copy stay
alive (and locked) until the stream passed the copy."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import numpy as np
import pytest

from pyacl_rt import _memory as M
from pyacl_rt import _stream as S

# These tests pin down the native backend (one aclrtMalloc per buffer, ordered free);
# the caching allocator has its own tests (tests/test_allocator.py).
pytestmark = pytest.mark.usefixtures("native_allocator")


def test_numpy_array_deleted_after_async_copy_is_kept_alive(gate: Any) -> None:
    s = S.Stream(0)
    dev = M.DeviceBuffer(1 << 12, device=0)
    arr = np.arange(1 << 12, dtype=np.uint32).view(np.uint8)[: 1 << 12].copy()
    expect = arr.copy()
    wr = weakref.ref(arr)
    gate.block(s)
    # pageable memory: the runtime may complete the copy before returning (the mock
    # does) - release the gate from another thread so the call can finish
    threading.Timer(0.05, gate.release.set).start()
    M.copy(dev, arr, stream=s, non_blocking=True)
    del arr
    gc.collect()
    assert wr() is not None  # held by the stream's watch list
    s.synchronize()
    gc.collect()
    assert wr() is None
    assert bytes(dev.copy_to_host()) == expect.tobytes()
    # and D2H into a numpy array
    out = np.zeros(1 << 12, np.uint8)
    wr2 = weakref.ref(out)
    dev.copy_to_host_async(out, s)
    assert s._watch_pending() in (0, 1)
    s.synchronize()
    assert (out == expect).all()
    del out
    gc.collect()
    assert wr2() is None
    dev.close()
    s.close()


def test_bytearray_locked_while_async_copy_pending() -> None:
    s = S.Stream(0)
    dev = M.DeviceBuffer(16, device=0)
    ba = bytearray(b"q" * 16)
    M.copy(dev, ba, stream=s, non_blocking=True)
    if s._watch_pending():
        with pytest.raises(BufferError):
            ba.extend(b"more")  # exported to the copy: cannot be resized
    s.synchronize()
    ba.extend(b"more")
    assert bytes(dev.copy_to_host()) == b"q" * 16
    dev.close()
    s.close()
