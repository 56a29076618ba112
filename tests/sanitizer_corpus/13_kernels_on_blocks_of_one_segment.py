"""Two kernels on two streams: one writes a buffer, the other reads it. The caching
allocator carved both buffers from one segment (one runtime allocation); the fix gives
the reader the other buffer - disjoint blocks of that segment, which is no race."""

from _corpus import BUG, finish, kernels, npu

EXPECT = ("race", "corpus_read", "read", "corpus_write", "write")

write, read = kernels()
s1, s2 = npu.Stream(), npu.Stream()
a, b = npu.DeviceBuffer(4096), npu.DeviceBuffer(4096)  # two blocks of one segment
npu.launch(s1, npu.LaunchConfig(), write, a)  # <- previous
npu.launch(s2, npu.LaunchConfig(), read, a if BUG else b)  # <- current
finish()
