"""Work on the default stream and a copy on a created stream are not ordered (the
default stream is not a barrier). Fix: the created stream waits for the default one."""

from _corpus import BUG, finish, npu

EXPECT = ("race", "aclrtMemcpyAsync", "read", "aclrtMemsetAsync", "write")

s = npu.Stream()
buf = npu.DeviceBuffer(64 << 10)
out = npu.DeviceBuffer(64 << 10)
npu.memset(buf, 4, stream=npu.default_stream(), non_blocking=True)  # <- previous
if not BUG:
    s.wait_stream(npu.default_stream())
npu.copy(out, buf, stream=s, non_blocking=True)  # <- current
finish()
