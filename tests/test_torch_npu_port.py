"""A torch_npu.npu-style program ported by changing only its import.

``SCRIPT`` below is written the way ``torch_npu.npu`` code is written (devices, device
guards, streams and ``with stream(...)``, timing events, ``wait_stream``, worker threads,
memory queries, peer access). Its only pyacl_rt-specific line is the import
(``import pyacl_rt as npu`` instead of ``import torch, torch_npu; npu = torch.npu``).
The tests check that

* every ``npu.<name>`` it uses is a ``torch_npu.npu`` name (so the script *is* a
  torch_npu script apart from the import), and every method it calls on streams and
  events is a torch_npu ``Stream`` / ``Event`` method;
* it runs correctly on the mock with 2 and 4 devices and leaves nothing behind.

Tensors have no counterpart here: the "work" between the events is device-side work
torch_npu code would also do (an event wait, a host function on the stream).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

IMPORT_LINE = "import pyacl_rt as npu"
TORCH_IMPORT_LINE = "import torch, torch_npu; npu = torch.npu"

SCRIPT = '''
import threading

import pyacl_rt as npu


def show_devices():
    assert npu.is_available()
    count = npu.device_count()
    for i in range(count):
        props = npu.get_device_properties(i)
        free, total = npu.mem_get_info(i)
        print(f"npu:{i} {npu.get_device_name(i)} {props.total_memory >> 20} MiB, "
              f"{free >> 20} MiB free, util {npu.utilization(i)}%")
        assert props.total_memory == total and 0 < free <= total
    peers = [[npu.can_device_access_peer(i, j) for j in range(count)] for i in range(count)]
    print("peer access:", peers)
    assert all(peers[i][i] is False for i in range(count))
    print("soc", npu.get_soc_version(), "cann", npu.get_cann_version(),
          "bf16", npu.is_bf16_supported(), "inf/nan", npu.is_support_inf_nan())
    return count


def timed_side_stream(dev):
    """Record a start/end event pair around work on a side stream of `dev`."""
    with npu.device(dev):
        assert npu.current_device() == dev
        main = npu.current_stream()
        assert main == npu.default_stream()
        side = npu.Stream()
        start = npu.Event(enable_timing=True)
        end = npu.Event(enable_timing=True)
        ready = npu.Event()
        ready.record(main)                  # side waits for what main did so far
        with npu.stream(side):
            assert npu.current_stream() == side and npu.current_device() == dev
            side.wait_event(ready)
            start.record()                  # on the current stream = side
            side.record_event()
            end.record()
        assert npu.current_stream() == main
        main.wait_stream(side)              # main continues after side's work
        end.synchronize()
        assert end.query()
        side.synchronize()
        assert side.query()
        elapsed = start.elapsed_time(end)
        assert elapsed >= 0.0
        return elapsed


def worker(dev, results):
    npu.set_device(dev)                     # torch_npu threads select their device
    s = npu.Stream()
    npu.set_stream(s)
    assert npu.current_stream() == s
    e = npu.Event()
    e.record()
    e.wait(npu.default_stream())
    npu.synchronize()
    results[dev] = e.query()


def main():
    count = show_devices()
    npu.set_device(0)
    assert npu.current_device() == 0
    for dev in range(count):
        print(f"npu:{dev} side stream took {timed_side_stream(dev):.3f} ms")
    assert npu.current_device() == 0       # the guard restored the selection

    results = {}
    threads = [threading.Thread(target=worker, args=(d, results)) for d in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {d: True for d in range(count)}, results

    npu.synchronize()
    npu.reset_peak_memory_stats()
    stats = npu.memory_stats()
    assert stats["allocated_bytes.all.current"] == npu.memory_allocated()
    assert npu.memory_reserved() >= npu.memory_allocated()
    assert npu.max_memory_allocated() >= npu.memory_allocated()
    assert npu.max_memory_reserved() >= npu.memory_reserved()
    npu.empty_cache()
    npu.set_op_timeout_ms(5000)
    print("done")


if __name__ == "__main__":
    main()
'''

#: The ``torch_npu.npu`` module-level names (torch_npu's ``torch_npu/npu/__init__.py``
#: ``__all__``, restricted to devices, streams, events and memory queries).
_NAMES = """
    is_available device_count set_device current_device device device_of synchronize
    get_device_name get_device_properties get_device_capability mem_get_info utilization
    current_stream default_stream set_stream stream Stream Event can_device_access_peer
    get_soc_version get_cann_version set_op_timeout_ms is_support_inf_nan
    is_bf16_supported memory_allocated max_memory_allocated memory_reserved
    max_memory_reserved memory_stats reset_peak_memory_stats empty_cache init
    is_initialized
"""
TORCH_NPU_NPU_NAMES = frozenset(_NAMES.split())
#: torch_npu ``Stream`` / ``Event`` methods (torch.cuda's API, torch_npu/npu/streams.py).
_METHODS = "query synchronize wait_event wait_stream record_event record wait elapsed_time"
TORCH_NPU_METHODS = frozenset(_METHODS.split())


def test_script_is_a_torch_npu_script_except_the_import() -> None:
    assert SCRIPT.count(IMPORT_LINE) == 1
    torch_version = SCRIPT.replace(IMPORT_LINE, TORCH_IMPORT_LINE)
    assert "pyacl_rt" not in torch_version
    used = set(re.findall(r"\bnpu\.(\w+)", SCRIPT))
    assert used, "the script uses no npu names"
    assert used <= TORCH_NPU_NPU_NAMES, used - TORCH_NPU_NPU_NAMES
    # every method called on a stream / event object
    objects = r"\b(?:main|side|s|start|end|ready|e)"
    methods = set(re.findall(objects + r"\.(\w+)\(", SCRIPT))
    assert methods <= TORCH_NPU_METHODS, methods - TORCH_NPU_METHODS
    import pyacl_rt

    for name in used:
        assert name in pyacl_rt.__all__, name


_HARNESS = """
import runpy, sys
from pyacl_rt import _runtime as runtime
from pyacl_rt.mock import REPORT_LAST_FINALIZE, mock_control
runpy.run_path(sys.argv[1], run_name="__main__")
mc = mock_control()
runtime.finalize()
report = mc.leak_report(REPORT_LAST_FINALIZE)
assert "no leaks" in report, report
print("released")
"""


@pytest.mark.parametrize("count", [2, 4])
def test_ported_script_runs_on_the_mock(count: int, tmp_path: Path) -> None:
    script = tmp_path / "train_step.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ASCEND_", "PYACL_RT_")) and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")
    }
    env.update(
        PYACL_RT_BACKEND="mock",
        ASCEND_MOCK_DEVICE_COUNT=str(count),
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
    )
    proc = subprocess.run(
        [sys.executable, "-c", _HARNESS, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("side stream took") == count
    assert len([ln for ln in out.splitlines() if ln.startswith("npu:") and "MiB free" in ln]) == (
        count
    )
    assert "done" in out and out.rstrip().endswith("released")
    assert "Traceback" not in proc.stderr
