"""The download runs on s1, the program synchronizes s2 and then reads the result on
the host. Fix: synchronize the stream that does the copy."""

from _corpus import BUG, finish, npu

EXPECT = ("host_race", "host read", "read", "aclrtMemcpyAsync", "write")

s1, s2 = npu.Stream(), npu.Stream()
dev = npu.DeviceBuffer(256)
host = npu.HostBuffer(256)
dev.copy_to_host_async(host, stream=s1)  # <- previous
(s2 if BUG else s1).synchronize()
view = host.memoryview()  # <- current
view.release()
finish()
