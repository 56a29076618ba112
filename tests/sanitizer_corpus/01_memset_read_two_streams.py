"""A memset on one stream, a device-to-host copy of the same buffer on another: the
copy may read before the memset wrote. Fix: the reading stream waits for the writer."""

from _corpus import BUG, finish, npu

EXPECT = ("race", "aclrtMemcpyAsync", "read", "aclrtMemsetAsync", "write")

s1, s2 = npu.Stream(), npu.Stream()
buf = npu.DeviceBuffer(1 << 16)
out = npu.HostBuffer(1 << 16)
npu.memset(buf, 7, stream=s1, non_blocking=True)  # <- previous
if not BUG:
    s2.wait_stream(s1)
npu.copy(out, buf, stream=s2, non_blocking=True)  # <- current
finish()
