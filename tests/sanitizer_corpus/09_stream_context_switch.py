"""Two `with npu.stream(...)` blocks: the second one's copy runs on another stream
than the memset it reads, with nothing between them. Fix: wait_stream in between."""

from _corpus import BUG, finish, npu

EXPECT = ("race", "aclrtMemcpyAsync", "read", "aclrtMemsetAsync", "write")

s1, s2 = npu.Stream(), npu.Stream()
buf = npu.DeviceBuffer(1000)
other = npu.DeviceBuffer(1000)
with npu.stream(s1):
    buf.memset(5, non_blocking=True)  # <- previous
with npu.stream(s2):
    if not BUG:
        s2.wait_stream(s1)
    npu.copy(other, buf, non_blocking=True)  # <- current
finish()
