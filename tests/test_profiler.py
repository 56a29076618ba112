"""pyacl_rt.profiler on the mock: the aclprof* session, steps window, ranges and marks, the
environment switches, the Chrome trace validator and the golden trace of the timing model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_public_api import _shown_output_matches

import pyacl_rt as npu
from pyacl_rt import profiler
from pyacl_rt._trace import TraceFormatError, validate_trace

GOLDEN = Path(__file__).parent / "golden" / "trace_virtual.json"


def _events(trace: Path) -> list[dict[str, Any]]:
    doc = json.loads(trace.read_text())
    validate_trace(doc)  # every trace a test produces is checked
    return list(doc["traceEvents"])


def test_profile_window_ranges_and_marks(tmp_path: Path) -> None:
    with npu.Stream() as s, profiler.profile(tmp_path, start_step=1, stop_step=3) as prof:
        buf = npu.DeviceBuffer(4096, stream=s)
        host = np.zeros(1024, np.float32)
        assert not prof.collecting
        for i in range(4):
            with prof.range(f"iter {i}"):
                npu.copy(buf, host, stream=s, non_blocking=True)
            prof.mark(f"queued {i}", stream=s)
            prof.mark(f"host {i}")
            s.synchronize()
            assert prof.step() == i + 1
            assert prof.collecting == (i + 1 in (1, 2))
        buf.close()
    assert len(prof.outputs) == 1 and len(prof.trace_files) == 1
    events = _events(prof.trace_files[0])
    names = {e["name"] for e in events}
    assert {"iter 1", "iter 2", "queued 1", "host 2"} <= names
    assert not {"iter 0", "iter 3", "host 0", "queued 3"} & names  # outside the window
    copies = [e for e in events if e.get("cat") == "copy_h2d"]
    assert len(copies) == 2 and {e["args"]["step"] for e in copies} == {1, 2}
    assert all(e["args"]["bytes"] == 4096 for e in copies)
    summary = json.loads((prof.outputs[0] / "summary.json").read_text())
    assert {k["kind"] for k in summary["kinds"]} >= {"copy_h2d", "marker"}


def test_range_open_across_stop_step_ends_with_the_collection(tmp_path: Path) -> None:
    with profiler.profile(tmp_path, start_step=0, stop_step=1) as prof:
        with prof.range("across the stop"):
            assert prof.step() == 1  # the window ends inside the range
            assert not prof.collecting
        with prof.range("after"):  # outside the window: nothing
            pass
    assert len(prof.trace_files) == 1
    events = _events(prof.trace_files[0])
    ranges = [e for e in events if e["name"] == "across the stop"]
    assert len(ranges) == 1 and ranges[0]["ph"] == "X"
    assert not [e for e in events if e["name"] == "after"]


def test_profile_to_the_end_and_module_step(tmp_path: Path) -> None:
    with profiler.profile(tmp_path / "new" / "dir") as prof:
        assert prof.collecting
        buf = npu.DeviceBuffer(256)
        npu.memset(buf, 1)
        assert profiler.step() == 1
        buf.close()
    assert (tmp_path / "new" / "dir").is_dir()
    kinds = {e.get("cat") for e in _events(prof.trace_files[0])}
    assert "memset" in kinds
    assert not prof.collecting
    with pytest.raises(RuntimeError, match="closed"):
        prof.step()


def test_profile_rejects_bad_arguments_and_nesting(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="output"):
        profiler.profile(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="start_step"):
        profiler.profile(tmp_path, start_step=-1)
    with pytest.raises(ValueError, match="stop_step"):
        profiler.profile(tmp_path, start_step=2, stop_step=2)
    with pytest.raises(TypeError, match="stop_step"):
        profiler.profile(tmp_path, stop_step=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="devices"):
        profiler.profile(tmp_path, devices=[])
    with profiler.profile(tmp_path) as prof:
        with pytest.raises(RuntimeError, match="already running"), profiler.profile(tmp_path):
            pass
        with pytest.raises(ValueError, match="message"):
            prof.mark("")
        with pytest.raises(ValueError, match="message"):
            prof.mark("x" * 200)
        with pytest.raises(TypeError, match="name"), prof.range(7):  # type: ignore[arg-type]
            pass
        with pytest.raises(TypeError, match="stream"):
            prof.mark("m", stream=object())
    # a failed start leaves nothing running: the next session works
    with pytest.raises(ValueError, match="devices"), profiler.profile(tmp_path, devices=[63]):
        pass
    with profiler.profile(tmp_path):
        pass


def test_steps_from_several_threads(tmp_path: Path) -> None:
    import threading

    with profiler.profile(tmp_path) as prof:
        threads = [
            threading.Thread(target=lambda: [prof.step() for _ in range(10)]) for _ in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert prof.step_number == 30


def test_step_outside_a_block_counts_steps() -> None:
    assert profiler.step() is None  # a bare step boundary: no error


def test_env_switches(tmp_path: Path, run_python: Any, clean_env: Any) -> None:
    """ASCEND_PROFILER_*: the whole process profiled between the start and stop steps,
    steps from profiler.step(); a profile() block then reports the conflict."""
    out = tmp_path / "env"
    env = clean_env(
        PYACL_RT_BACKEND="mock",
        ASCEND_PROFILER_FLAGS="enable",
        ASCEND_PROFILER_OUTPUT=str(out),
        ASCEND_PROFILER_START_STEP="1",
        ASCEND_PROFILER_STOP_STEP="2",
    )
    proc = run_python(
        """
        import pyacl_rt as npu
        from pyacl_rt import errors, profiler
        buf = npu.DeviceBuffer(64)
        for i in range(3):
            npu.memset(buf, i)
            if i == 1:  # inside the window: the environment's collection runs
                try:
                    with profiler.profile(BLOCK_DIR):
                        pass
                except errors.AclError as exc:
                    print("conflict", exc.code)
            profiler.step()
        print(profiler.env_settings()["ASCEND_PROFILER_FLAGS"])
        """.replace("BLOCK_DIR", repr(str(tmp_path / "block"))),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["conflict", "100042", "enable"]
    (folder,) = out.glob("mock_prof_*")
    memsets = [e for e in _events(folder / "trace.json") if e.get("cat") == "memset"]
    assert [e["args"]["step"] for e in memsets] == [1]


# ----------------------------------------------------------------- validator


def test_validator_accepts_the_format_and_names_violations() -> None:
    good = {
        "traceEvents": [
            {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "NPU 0"}},
            {"name": "t", "cat": "memset", "ph": "X", "pid": 1, "tid": 2, "ts": 1.5, "dur": 0.5},
            {"name": "m", "ph": "i", "s": "t", "pid": 0, "tid": 1, "ts": 2, "args": {}},
            {"name": "r", "ph": "B", "pid": 0, "tid": 1, "ts": 2},
            {"name": "r", "ph": "E", "pid": 0, "tid": 1, "ts": 3},
        ],
        "displayTimeUnit": "ns",
    }
    assert validate_trace(good) == 5
    bad_cases = [
        ([], "JSON object"),
        ({"traceEvents": {}}, "must be a list"),
        ({"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 1}]}, "'name'"),
        (
            {"traceEvents": [{"name": "a", "ph": "X", "pid": "1", "tid": 1, "ts": 0, "dur": 1}]},
            "'pid'",
        ),
        ({"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 0}]}, "'dur'"),
        (
            {"traceEvents": [{"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": -1, "dur": 1}]},
            "'ts'",
        ),
        (
            {"traceEvents": [{"name": "a", "ph": "i", "s": "x", "pid": 1, "tid": 1, "ts": 0}]},
            "scope",
        ),
        ({"traceEvents": [{"name": "a", "ph": "M", "pid": 1, "tid": 1, "args": {}}]}, "metadata"),
        ({"traceEvents": [{"name": "thread_name", "ph": "M", "pid": 1, "tid": 1}]}, "args.name"),
        ({"traceEvents": [{"name": "a", "ph": "Q", "pid": 1, "tid": 1, "ts": 0}]}, "phase"),
        ({"traceEvents": [{"name": "a", "ph": "B", "pid": 1, "tid": 1, "ts": 0}]}, "never ended"),
        ({"traceEvents": [{"name": "a", "ph": "E", "pid": 1, "tid": 1, "ts": 0}]}, "without"),
        (
            {
                "traceEvents": [
                    {"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 1, "args": 3}
                ]
            },
            "args",
        ),
        ({"traceEvents": [], "displayTimeUnit": "s"}, "displayTimeUnit"),
    ]
    for doc, words in bad_cases:
        with pytest.raises(TraceFormatError, match=words):
            validate_trace(doc)


# ------------------------------------------------------------- golden trace

# A fixed program on the deterministic timing model (virtual): two streams, copies, a
# memset, a reduce (a kernel-class task) and an event between them, through the raw
# layer only, so that the schedule depends on nothing but these calls.
GOLDEN_PROGRAM = r"""
import json, sys
from pyacl_rt import lowlevel as ll, profiler
import pyacl_rt as npu

npu.init()
npu.set_device(0)
s = ll.scratch()
def new_stream():
    ll.check(ll.aclrtCreateStream(s.uptr), "aclrtCreateStream")
    return s.uptr[0]
def malloc(n):
    ll.check(ll.aclrtMalloc(s.uptr, n, 0), "aclrtMalloc")
    return s.uptr[0]
def malloc_host(n):
    ll.check(ll.aclrtMallocHost(s.uptr, n), "aclrtMallocHost")
    return s.uptr[0]
MIB = 1 << 20
with profiler.profile(sys.argv[1]) as prof:
    a, b = new_stream(), new_stream()
    ll.check(ll.aclrtCreateEvent(s.uptr), "aclrtCreateEvent")
    ev = s.uptr[0]
    host = malloc_host(2 * MIB)
    d0, d1 = malloc(2 * MIB), malloc(2 * MIB)
    for i in range(2):
        ll.check(ll.aclrtMemcpyAsync(d0, 2 * MIB, host, 2 * MIB, 1, a), "h2d")
        ll.check(ll.aclrtMemsetAsync(d1, 2 * MIB, 0, 2 * MIB, b), "memset")
        ll.check(ll.aclrtRecordEvent(ev, a), "record")
        ll.check(ll.aclrtStreamWaitEvent(b, ev), "wait")
        ll.check(ll.aclrtReduceAsync(d1, d0, 2 * MIB, 10, 0, b, 0), "reduce")
        ll.check(ll.aclrtMemcpyAsync(host, 2 * MIB, d1, 2 * MIB, 2, b), "d2h")
        ll.check(ll.aclrtSynchronizeStream(b), "sync")
        prof.step()
    for p in (d0, d1):
        ll.check(ll.aclrtFree(p), "free")
    ll.check(ll.aclrtFreeHost(host), "freehost")
    ll.check(ll.aclrtDestroyEvent(ev), "event")
    for st in (a, b):
        ll.check(ll.aclrtDestroyStream(st), "destroy")
print(prof.trace_files[0])
"""


def normalize(doc: dict[str, Any]) -> dict[str, Any]:
    """What may differ between two runs of one program removed: the process id (in the
    host track's name and otherData), the order of the records (the workers append them
    as they finish: sorted by time and track), the task numbers and host thread ids
    (renumbered in that order)."""
    task_ids: dict[int, int] = {}
    tids: dict[int, int] = {}
    out = []
    meta = [e for e in doc["traceEvents"] if e["ph"] == "M"]
    timed = sorted(
        (e for e in doc["traceEvents"] if e["ph"] != "M"),
        key=lambda e: (e["ts"], e["pid"], e["tid"], e["name"], e.get("dur", 0)),
    )
    for e in meta + timed:
        e = json.loads(json.dumps(e))
        if e["pid"] == 0:
            e["tid"] = tids.setdefault(e["tid"], len(tids) + 1) if e["tid"] else 0
            if e["name"] == "process_name":
                e["args"]["name"] = "host"
            e.get("args", {}).pop("thread", None)
        args = e.get("args", {})
        if "task" in args:
            args["task"] = task_ids.setdefault(args["task"], len(task_ids) + 1)
        out.append(e)
    other = dict(doc.get("otherData", {}))
    other.pop("pid", None)
    return {"traceEvents": out, "otherData": other}


def test_golden_trace_of_the_timing_model(tmp_path: Path, clean_env: Any) -> None:
    env = clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_TIMING="virtual")
    proc = subprocess.run(
        [sys.executable, "-c", GOLDEN_PROGRAM, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(Path(proc.stdout.strip()).read_text())
    validate_trace(doc)
    got = normalize(doc)
    if os.environ.get("PYACL_RT_UPDATE_GOLDEN") == "1":  # regenerate after a model change
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    assert got["otherData"] == want["otherData"]
    for i, (g, w) in enumerate(zip(got["traceEvents"], want["traceEvents"], strict=False)):
        assert g == w, f"event {i} differs from {GOLDEN.name}"
    assert len(got["traceEvents"]) == len(want["traceEvents"])
    # the model overlapped the H2D copy of stream a with the memset of stream b
    tasks = [e for e in got["traceEvents"] if e["ph"] == "X" and e["pid"] == 1]
    h2d = next(e for e in tasks if e["cat"] == "copy_h2d")
    memset = next(e for e in tasks if e["cat"] == "memset")
    assert h2d["tid"] != memset["tid"] and memset["ts"] < h2d["ts"] + h2d["dur"]


# --------------------------------------------------------- the seed's pipeline


def test_pipeline_speedup_example(clean_env: Any, tmp_path: Path) -> None:
    """examples/pipeline_speedup.py on the virtual timing model: the pipelined version is
    >= 5x faster, and the output is the one docs/guides/diagnostics.md shows (the model
    is deterministic)."""
    example = Path(__file__).resolve().parent.parent / "examples" / "pipeline_speedup.py"
    proc = subprocess.run(
        [sys.executable, str(example)],
        env=clean_env(PYACL_RT_BACKEND="mock"),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    speedup = float(proc.stdout.split("speedup")[1].strip().rstrip("x"))
    assert speedup >= 5.0, proc.stdout
    guide = (
        Path(__file__).resolve().parent.parent / "docs" / "guides" / "diagnostics.md"
    ).read_text()
    shown = guide.split("$ python examples/pipeline_speedup.py\n", 1)[1].split("```", 1)[0]
    # the pipelined time is exact; the naive one moves with the caching allocator's
    # run-time reuse decisions (the guide says so)
    assert _shown_output_matches(shown.rstrip("\n"), proc.stdout), (shown, proc.stdout)
