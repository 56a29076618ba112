"""numpy view of a HostBuffer while the download into it is still pending: the host
reads bytes the device has not written yet. Fix: synchronize the stream first."""

import numpy as np
from _corpus import BUG, finish, npu

EXPECT = ("host_race", "host read", "read", "aclrtMemcpyAsync", "write")

s = npu.Stream()
dev = npu.DeviceBuffer(1024)
dev.memset(3, stream=s)
host = npu.HostBuffer(1024)
dev.copy_to_host_async(host, stream=s)  # <- previous
if not BUG:
    s.synchronize()
total = int(np.asarray(host).sum())  # <- current
del total
finish()
