"""reduce_async on s2 accumulates a source that s1 is still uploading. Fix: s2 waits
for s1 before the reduction."""

import numpy as np
from _corpus import BUG, finish, npu

EXPECT = ("race", "aclrtReduceAsync", "read", "aclrtMemcpyAsync", "write")

s1, s2 = npu.Stream(), npu.Stream()
host = npu.HostBuffer(4096)
np.asarray(host).view(np.float32)[:] = 1.0
acc = npu.DeviceBuffer(4096)
acc.memset(0)
src = npu.DeviceBuffer(4096)
src.copy_from_host_async(host, stream=s1)  # <- previous
if not BUG:
    s2.wait_stream(s1)
npu.reduce_async(acc, src, "sum", "float32", stream=s2)  # <- current
finish()
