"""HostBuffer.tobytes() right after enqueueing the download into it. Fix: record an
event after the copy and synchronize on it."""

from _corpus import BUG, finish, npu

EXPECT = ("host_race", "host read", "read", "aclrtMemcpyAsync", "write")

s = npu.Stream()
dev = npu.DeviceBuffer(512)
host = npu.HostBuffer(512)
npu.copy(host, dev, stream=s, non_blocking=True)  # <- previous
if not BUG:
    s.record_event().synchronize()
data = host.tobytes()  # <- current
finish()
