"""An upload (H2D from pinned memory) on one stream and a memset of the same device
buffer on another: two unordered writes. Fix: an event recorded after the upload and
waited for by the second stream."""

from _corpus import BUG, finish, npu

EXPECT = ("race", "aclrtMemsetAsync", "write", "aclrtMemcpyAsync", "write")

s1, s2 = npu.Stream(), npu.Stream()
host = npu.HostBuffer(4096)
dev = npu.DeviceBuffer(4096)
dev.copy_from_host_async(host, stream=s1)  # <- previous
if not BUG:
    e = npu.Event()
    e.record(s1)
    s2.wait_event(e)
npu.memset(dev, 0, stream=s2, non_blocking=True)  # <- current
finish()
