"""Two kernels on two streams work on two views of one buffer: the writer's window
runs 512 bytes into the reader's. Fix: windows that only touch each other."""

from _corpus import BUG, finish, kernels, npu

EXPECT = ("race", "corpus_read", "read", "corpus_write", "write")

write, read = kernels()
s1, s2 = npu.Stream(), npu.Stream()
buf = npu.DeviceBuffer(8192)
end = 4096 + 512 if BUG else 4096
npu.launch(s1, npu.LaunchConfig(), write, buf[0:end])  # <- previous
npu.launch(s2, npu.LaunchConfig(), read, buf[4096:8192])  # <- current
finish()
