"""``pyacl-rt bench``: the JSON document (schema), the tables with and without rich, the
timing-mode labels, usage and runtime errors. Figures are only checked against the
mock's deterministic timing model (virtual mode), never against wall time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import _clean_env

from pyacl_rt import _cli_bench

#: Runs the CLI with rich made unimportable (the plain-text fallback).
_NO_RICH = (
    "import sys; sys.modules['rich'] = None; "
    "from pyacl_rt.cli import main; raise SystemExit(main(sys.argv[1:]))"
)
SMALL = ["--sizes", "4K,1M", "--iterations", "3", "--calls", "50"]


def run_cli(*args: str, rich: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pyacl_rt"] if rich else [sys.executable, "-c", _NO_RICH]
    return subprocess.run(
        [*cmd, *args],
        env=_clean_env(**{"PYACL_RT_BACKEND": "mock", **env}),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _check_schema(doc: dict[str, object]) -> None:
    assert set(doc) == {
        "schema",
        "pyacl_rt_version",
        "backend",
        "library",
        "device",
        "soc_name",
        "timing",
        "iterations",
        "warmup",
        "calls",
        "bandwidth",
        "latency",
        "notes",
    }
    assert doc["schema"] == _cli_bench.BENCH_SCHEMA_VERSION
    assert set(doc["timing"]) == {"source", "mock_mode", "mock_model"}  # type: ignore[arg-type]
    for row in doc["bandwidth"]:  # type: ignore[attr-defined]
        assert set(row) == {"direction", "bytes", "iterations", "elapsed_ms", "gbps"}
        assert row["direction"] in ("H2D", "D2H", "D2D") and row["elapsed_ms"] > 0
    for row in doc["latency"]:  # type: ignore[attr-defined]
        assert set(row) == {"operation", "via", "calls", "host_us", "modeled_us"}


def test_bench_json_virtual_mode_follows_the_model() -> None:
    proc = run_cli(
        "bench", "--json", "--sizes", "64M,4K", "--iterations", "4", "--calls", "100",
        ASCEND_MOCK_TIMING="virtual",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no progress bar when stderr is not a terminal
    doc = json.loads(proc.stdout)
    _check_schema(doc)
    assert doc["backend"] == "mock" and doc["device"] == 0 and doc["soc_name"] == "Ascend910B1"
    timing = doc["timing"]
    assert timing["source"] == "mock timing model" and timing["mock_mode"] == "virtual"
    model = timing["mock_model"]
    assert model["h2d_gbps"] == 24 and model["launch_ns"] == 4000
    cells = {(r["direction"], r["bytes"]): r for r in doc["bandwidth"]}
    assert sorted(cells) == sorted((d, s) for d in ("H2D", "D2H", "D2D") for s in (4096, 64 << 20))
    # 64 MiB copies are bandwidth-bound: the modeled PCIe and HBM rates (a D2D copy moves
    # its bytes twice through HBM), less the fixed per-task latency
    assert 23.5 < cells["H2D", 64 << 20]["gbps"] <= 24
    assert 23.5 < cells["D2H", 64 << 20]["gbps"] <= 24
    assert 700 < cells["D2D", 64 << 20]["gbps"] <= 800
    # 4 KiB copies are bound by the host's modeled submission cost (launch_ns)
    assert cells["H2D", 4096]["gbps"] < 2
    # deterministic: the modeled times are exact
    again = json.loads(
        run_cli(
            "bench", "--json", "--sizes", "64M,4K", "--iterations", "4", "--calls", "100",
            ASCEND_MOCK_TIMING="virtual",
        ).stdout
    )  # fmt: skip
    assert [r["elapsed_ms"] for r in again["bandwidth"]] == [
        r["elapsed_ms"] for r in doc["bandwidth"]
    ]
    lat = {r["operation"]: r for r in doc["latency"]}
    assert set(lat) == {"record", "launch"}
    assert lat["launch"]["modeled_us"] == 4.0 and lat["record"]["modeled_us"] == 4.0
    assert "aclmockLaunchOp" in lat["launch"]["via"]
    assert lat["launch"]["calls"] == 100 and lat["launch"]["host_us"] > 0
    assert doc["notes"] == []


def test_bench_json_real_time_mode_says_so() -> None:
    proc = run_cli("bench", "--json", *SMALL, "--device", "1", ASCEND_MOCK_DEVICE_COUNT="2")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    _check_schema(doc)
    assert doc["device"] == 1
    assert doc["timing"] == {"source": "mock host clock", "mock_mode": "real", "mock_model": None}
    assert all(r["modeled_us"] is None for r in doc["latency"])
    assert any("real-time mode" in n for n in doc["notes"])
    assert len(doc["bandwidth"]) == 6
    assert proc.stderr.startswith("pyacl-rt: note: mock in real-time mode: ")
    text = run_cli("bench", *SMALL)
    assert text.returncode == 0 and "note" not in text.stdout
    assert text.stderr == proc.stderr.splitlines()[0] + "\n"


@pytest.mark.parametrize("rich", [True, False], ids=["rich", "plain"])
def test_bench_text_tables(rich: bool) -> None:
    proc = run_cli("bench", *SMALL, rich=rich, ASCEND_MOCK_TIMING="virtual")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = proc.stdout
    assert "pyacl-rt bench: device 0 (Ascend910B1), mock backend" in out
    assert "timing:  mock timing model (ASCEND_MOCK_TIMING=virtual)" in out
    assert "Copy bandwidth, GB/s (3 copies per cell)" in out
    lines = out.splitlines()
    head = next(ln for ln in lines if ln.split()[:1] == ["size"])
    assert head.split() == ["size", "H2D", "D2H", "D2D"]
    for size in ("4 KiB", "1 MiB"):
        row = next(ln for ln in lines if ln.strip().startswith(size))
        assert len(row.split()) == 5 and all(float(x) > 0 for x in row.split()[2:])
    lat_head = next(ln for ln in lines if ln.startswith("operation"))
    assert "host µs/call" in lat_head and "modeled µs/call" in lat_head
    assert any(ln.startswith("launch ") and ln.rstrip().endswith("4.00") for ln in lines)
    assert all(ln == ln.rstrip() for ln in lines)  # no trailing blanks, no colors
    assert "\x1b[" not in out
    if not rich:
        assert any(set(ln.replace(" ", "")) == {"-"} for ln in lines)  # the plain rule


def test_bench_no_copies_paced_mode() -> None:
    proc = run_cli("bench", "--json", "--no-copies", "--calls", "10", ASCEND_MOCK_TIMING="paced")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["timing"]["source"] == "mock timing model"
    assert doc["timing"]["mock_mode"] == "paced"
    assert doc["bandwidth"] == [] and [r["operation"] for r in doc["latency"]] == [
        "record",
        "launch",
    ]


@pytest.mark.parametrize(
    "args,message",
    [
        (["--sizes", "12Q"], "bad size '12Q'"),
        (["--sizes", "0"], "between 1 byte and 1 TiB"),
        (["--sizes", ","], "--sizes needs at least one size"),
        (["--iterations", "0"], "--iterations must be between 1 and"),
        (["--calls", "-3"], "--calls must be between 1 and"),
        (["--warmup", "-1"], "--warmup must be between 0"),
        (["--device", "-1"], "--device must be >= 0"),
        (["--device", "5"], "--device 5: devices 0..1 are visible"),
        (["--kernel", "nocolon"], "expected FILE:NAME"),
        (["--iterations", "x"], "invalid int value"),
    ],
)
def test_bench_usage_errors_exit_2(args: list[str], message: str) -> None:
    proc = run_cli("bench", "--no-copies", "--calls", "5", *args, ASCEND_MOCK_DEVICE_COUNT="2")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("usage: pyacl-rt bench"), proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_bench_no_device_exit_1() -> None:
    proc = run_cli("bench", "--json", ASCEND_MOCK_DEVICE_COUNT="0")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.startswith("pyacl-rt: error: InvalidDeviceError: no device to benchmark")
    assert "207004" in proc.stderr and "Traceback" not in proc.stderr


def test_bench_runtime_failure_exit_1_one_line() -> None:
    proc = run_cli("bench", *SMALL, ASCEND_MOCK_FAULTS="aclrtMemcpyAsync:2:507899")
    assert proc.returncode == 1
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pyacl-rt: error: "), proc.stderr
    assert "507899" in err[0]


def test_parse_size() -> None:
    assert _cli_bench.parse_size("4096") == 4096
    assert _cli_bench.parse_size("4k") == 4096
    assert _cli_bench.parse_size("2MiB") == 2 << 20
    assert _cli_bench.parse_size(" 1 GB ") == 1 << 30
    with pytest.raises(ValueError, match="bad size"):
        _cli_bench.parse_size("1.5M")
    assert _cli_bench.fmt_bytes(3 << 20) == "3 MiB" and _cli_bench.fmt_bytes(1000) == "1000 B"


@pytest.mark.parametrize("rich", [True, False], ids=["rich", "plain"])
def test_progress_bar_only_on_a_terminal(rich: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from pyacl_rt import _cli_support

    monkeypatch.setattr(_cli_support, "have_rich", lambda: rich)

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    err = Tty()
    with _cli_support.progress(2, "bench", stream=err) as advance:
        advance("H2D 4 KiB")
        advance("D2H 4 KiB")
    if not rich:
        assert "bench: 2/2 D2H 4 KiB" in err.getvalue()
    assert err.getvalue() != ""
    quiet = Tty()
    with _cli_support.progress(2, "bench", enabled=False, stream=quiet) as advance:
        advance("a")
    assert quiet.getvalue() == ""
    pipe = io.StringIO()
    with _cli_support.progress(2, "bench", stream=pipe) as advance:
        advance("a")
    assert pipe.getvalue() == ""


def test_bench_kernel_option_launches_the_given_kernel(tmp_path: Path) -> None:
    """``--kernel FILE:NAME``: pyacl_rt.launch of that kernel (here: a Python twin on the
    mock, registered by the program that runs the command in-process)."""
    src = tmp_path / "k.c"
    src.write_text("void empty_kernel(void) {}\n")
    subprocess.run(["cc", "-c", str(src), "-o", str(tmp_path / "k.o")], check=True)
    code = f"""
import io, json
from pyacl_rt import cli, mock
calls = []
mock.register_kernel("empty_kernel", lambda block, blocks: calls.append(block), ())
buf = io.StringIO()
rc = cli.main(["bench", "--json", "--no-copies", "--calls", "7",
               "--kernel", {str(tmp_path / "k.o")!r} + ":empty_kernel"], out=buf)
doc = json.loads(buf.getvalue())
launch = [r for r in doc["latency"] if r["operation"] == "launch"][0]
print(rc, launch["via"], len(calls))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_TIMING="virtual"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # 3 rounds of 7 launches, each run once by the twin (1 block)
    assert proc.stdout.strip() == "0 pyacl_rt.launch of empty_kernel (1 block) 21"


def test_bench_kernel_errors_exit_1(tmp_path: Path) -> None:
    proc = run_cli("bench", "--no-copies", "--kernel", f"{tmp_path}/none.o:k")
    assert proc.returncode == 1
    assert proc.stderr.startswith("pyacl-rt: error: ") and "no such file" in proc.stderr
