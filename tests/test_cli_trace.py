"""``pyacl-rt trace summary`` / ``trace plot`` (pyacl_rt._cli_trace): tables with rich and
without, --json, the timeline image, exit codes and stderr for bad files."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pyacl_rt import _cli_trace, cli
from pyacl_rt._trace import load_summary, summarize, validate_trace

PROFILE_PROGRAM = """
import sys
import pyacl_rt as npu
from pyacl_rt import profiler

with npu.Stream() as s, profiler.profile(sys.argv[1]) as prof:
    buf = npu.DeviceBuffer(1 << 16, stream=s)
    for i in range(3):
        with prof.range(f"step {i}"):
            npu.memset(buf, i, stream=s, non_blocking=True)
            npu.copy(buf, bytes(1 << 16), stream=s)
        prof.step()
    buf.close()
print(prof.outputs[0])
"""


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile written by a child process (the tests' leak checks stay untouched)."""
    out = tmp_path_factory.mktemp("prof")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASCEND_")}
    env["PYACL_RT_BACKEND"] = "mock"
    proc = subprocess.run(
        [sys.executable, "-c", PROFILE_PROGRAM, str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip())


def _run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(argv, out=out)
    return code, out.getvalue()


def test_summary_plain_text(profile_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for target in (profile_dir, profile_dir / "trace.json", profile_dir / "summary.json"):
        code, text = _run(["trace", "summary", str(target)])
        assert code == 0
        lines = text.splitlines()
        assert lines[0].startswith("timing: real")
        assert "Tasks by kind" in lines and "Streams" in lines
        header = next(line for line in lines if line.strip().startswith("kind"))
        assert header.split() == list(_cli_trace._KIND_COLUMNS)
        memset = next(line for line in lines if line.strip().startswith("memset"))
        assert memset.split()[1] == "3"  # three memsets
    assert capsys.readouterr().err == ""


def test_summary_rich_and_fallback(
    profile_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("rich")
    assert cli.main(["trace", "summary", str(profile_dir)]) == 0
    rich_text = capsys.readouterr().out
    assert "Tasks by kind" in rich_text and "memset" in rich_text and "│" in rich_text
    monkeypatch.setitem(sys.modules, "rich.console", None)  # rich missing: plain text
    assert cli.main(["trace", "summary", str(profile_dir)]) == 0
    plain = capsys.readouterr().out
    assert "memset" in plain and "│" not in plain


def test_summary_json_and_computed(profile_dir: Path, tmp_path: Path) -> None:
    code, text = _run(["trace", "summary", "--json", str(profile_dir)])
    assert code == 0
    doc = json.loads(text)
    assert doc == load_summary(profile_dir)
    # without the mock's summary.json the summary is computed from the trace
    (tmp_path / "trace.json").write_text((profile_dir / "trace.json").read_text())
    computed = load_summary(tmp_path / "trace.json")
    assert computed == summarize(json.loads((profile_dir / "trace.json").read_text()))
    by_kind = {k["kind"]: k for k in computed["kinds"]}
    mock_kinds = {k["kind"]: k for k in doc["kinds"]}
    assert by_kind["memset"]["count"] == mock_kinds["memset"]["count"] == 3
    assert by_kind["memset"]["bytes"] == mock_kinds["memset"]["bytes"]


def test_plot(profile_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "timeline.png"
    code, text = _run(["trace", "plot", str(profile_dir), "-o", str(png)])
    assert code == 0, text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert text.startswith(f"{png}: ") and "tracks" in text


def test_plot_without_matplotlib(
    profile_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, text = _run(["trace", "plot", str(profile_dir), "-o", str(tmp_path / "x.png")])
    assert code == 1 and text == ""
    assert "pyacl_rt[plot]" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "No such file"),
        ("{", "not JSON"),
        ('{"traceEvents": [{"ph": "X"}]}', "'name'"),
    ],
)
def test_bad_files_exit_1(
    tmp_path: Path, content: str | None, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "trace.json"
    if content is not None:
        path.write_text(content)
    for argv in (
        ["trace", "summary", str(path)],
        ["trace", "plot", str(path), "-o", str(tmp_path / "p.png")],
    ):
        code, text = _run(argv)
        assert (code, text) == (1, "")
        err = capsys.readouterr().err
        assert err.startswith("pyacl-rt: error: ") and words in err and "Traceback" not in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["trace"],
        ["trace", "summary"],
        ["trace", "plot", "f"],
        ["trace", "summary", "f", "x"],
    ):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        assert info.value.code == 2
        assert "usage: pyacl-rt trace" in capsys.readouterr().err


def test_console_script(profile_dir: Path, clean_env: Any) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pyacl_rt", "trace", "summary", str(profile_dir / "trace.json")],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "memset" in proc.stdout and proc.stderr == ""


def test_every_profile_trace_is_valid(profile_dir: Path) -> None:
    assert validate_trace(json.loads((profile_dir / "trace.json").read_text())) > 0
