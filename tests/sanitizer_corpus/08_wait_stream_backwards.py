"""wait_stream called the wrong way round: the producer waits for the consumer instead
of the consumer for the producer. Fix: consumer.wait_stream(producer)."""

from _corpus import BUG, finish, npu

EXPECT = ("race", "aclrtMemcpyAsync", "read", "aclrtMemsetAsync", "write")

producer, consumer = npu.Stream(), npu.Stream()
src = npu.DeviceBuffer(4096)
dst = npu.DeviceBuffer(4096)
npu.memset(src, 9, stream=producer, non_blocking=True)  # <- previous
if BUG:
    producer.wait_stream(consumer)
else:
    consumer.wait_stream(producer)
npu.copy(dst, src, stream=consumer, non_blocking=True)  # <- current
finish()
