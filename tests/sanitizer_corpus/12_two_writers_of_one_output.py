"""Two streams write the same output buffer (a memset and an upload): which value
stays depends on scheduling. Fix: order them with an event."""

from _corpus import BUG, finish, npu

EXPECT = ("race", "aclrtMemcpyAsync", "write", "aclrtMemsetAsync", "write")

s1, s2 = npu.Stream(), npu.Stream()
out = npu.DeviceBuffer(512)
host = npu.HostBuffer(512)
npu.memset(out, 0, stream=s1, non_blocking=True)  # <- previous
if not BUG:
    s2.wait_event(s1.record_event())
out.copy_from_host_async(host, stream=s2)  # <- current
finish()
