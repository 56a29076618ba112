"""The consumer waits for the event before the producer recorded it: a wait for an
event that was never recorded completes at once. Fix: record first, then wait."""

from _corpus import BUG, finish, npu

EXPECT = ("race", "aclrtMemsetAsync", "write", "aclrtMemsetAsync", "write")

s1, s2 = npu.Stream(), npu.Stream()
buf = npu.DeviceBuffer(2048)
e = npu.Event()
if BUG:
    s2.wait_event(e)  # waits for nothing: e is not recorded yet
npu.memset(buf, 1, stream=s1, non_blocking=True)  # <- previous
e.record(s1)
if not BUG:
    s2.wait_event(e)
npu.memset(buf, 2, stream=s2, non_blocking=True)  # <- current
finish()
