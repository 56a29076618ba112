"""The event meant to order the consumer after the producer is recorded on the wrong
stream (s3, idle), so waiting for it orders nothing. Fix: record it on the producer."""

from _corpus import BUG, finish, npu

EXPECT = ("race", "aclrtMemcpyAsync", "read", "aclrtMemsetAsync", "write")

s1, s2, s3 = npu.Stream(), npu.Stream(), npu.Stream()
a = npu.DeviceBuffer(8192)
b = npu.DeviceBuffer(8192)
npu.memset(a, 1, stream=s1, non_blocking=True)  # <- previous
e = npu.Event()
e.record(s3 if BUG else s1)
s2.wait_event(e)
npu.copy(b, a, stream=s2, non_blocking=True)  # <- current
finish()
