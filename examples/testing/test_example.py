"""Testing code that uses pyacl_rt without hardware: the pyacl_rt pytest plugin.

Installing pyacl_rt installs the plugin (``pyacl_rt.testing``, a ``pytest11`` entry
point); run this file with ``PYACL_RT_BACKEND=mock pytest examples/testing``:

* every test is followed by a leak check: a test that leaves a stream, event, buffer or
  context alive errors with a report naming them (``--npu-leak-frames 12`` adds where
  each was created);
* ``npu_faults`` injects runtime failures for one test; ``npu_runtime`` gives a test a
  freshly started runtime; ``npu_control`` is the mock's introspection;
* ``@pytest.mark.npu_mock(...)`` runs a test with another mock configuration (in a
  child pytest process, one per distinct configuration);
* ``pytest --npu-sanitize`` runs the suite under the mock's race sanitizer and
  ``pytest --npu-real`` on real cards (everything skipped where there are none).
"""

from __future__ import annotations

import pytest

import pyacl_rt as npu


def scale_on_device(data: bytes) -> bytes:
    """The code under test: a round trip host -> device -> host on its own stream."""
    with npu.Stream() as s:
        dev = npu.DeviceBuffer(len(data), stream=s)
        host = npu.HostBuffer(len(data))
        try:
            dev.copy_from_host_async(data, s)
            dev.copy_to_host_async(host, s)
            s.synchronize()
            return host.tobytes()
        finally:
            host.close()
            dev.close()


def test_round_trip() -> None:
    assert scale_on_device(b"\x01\x02\x03") == b"\x01\x02\x03"


def test_out_of_memory_is_reported(npu_faults) -> None:  # type: ignore[no-untyped-def]
    # The next device allocation fails as if the card were full.
    npu_faults.inject("aclrtMalloc", 207001, nth=0)
    npu.empty_cache()
    with pytest.raises(npu.AclOutOfMemoryError):
        scale_on_device(b"\x00" * (64 << 20))


def test_starts_from_a_fresh_runtime(npu_runtime, npu_control) -> None:  # type: ignore[no-untyped-def]
    assert npu_control.stat("default_contexts") == 0  # no device in use yet
    scale_on_device(b"abc")
    assert npu_control.stat("default_contexts") == 1  # device 0's primary context


@pytest.mark.npu_mock(devices=2, memory="1GiB", soc="Ascend310P3")
def test_on_a_small_inference_card() -> None:
    assert npu.device_count() == 2
    assert npu.get_soc_version() == "Ascend310P3"
    assert npu.mem_get_info(1)[1] == 1 << 30
