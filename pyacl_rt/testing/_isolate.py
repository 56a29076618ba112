"""``@pytest.mark.npu_mock(...)``: a test that needs another mock configuration runs in
a child pytest process, and its reports come back to the parent as if it ran there.

The mock reads its configuration (``ASCEND_MOCK_DEVICE_COUNT``,
``ASCEND_MOCK_MEM_PER_DEVICE``, ``ASCEND_MOCK_SOC_NAME``) once, at the first runtime
call of the process, so a test asking for another configuration cannot run in a
process that already used the mock. The plugin groups the marked tests by
configuration; a test whose configuration is the one of this process runs here; the
others run in **one child pytest process per distinct configuration** (started when
the first test of the group comes up, with the configuration in its environment and
the group's node ids on its command line). The child writes every test report as a
JSON line (pytest's own ``pytest_report_to_serializable``, what pytest-xdist uses);
the parent replays them through its reporting hooks, so ``-x``, ``-v``, JUnit XML and
the summary see them as usual.

Cost: one Python interpreter, pytest start-up, collection of the group's node ids and
one mock initialisation per distinct configuration, not per test: what ``pytest
<those tests>`` costs on its own (a few seconds on a loaded 2-core machine). The child
has no timeout of its own; a hanging child test hangs the parent as it would in
process. ``-n`` (pytest-xdist) in ``addopts`` would apply to the child too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ChildRun", "MockConfig", "current_config", "parse_bytes"]

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_SOC = re.compile(r"^[\x21-\x7e]{1,63}$")
_DEFAULTS = {"devices": 8, "memory": 64 << 30, "soc": "Ascend910B1"}


def parse_bytes(value: int | str) -> int:
    """Bytes of ``value``: an int, or a string the mock accepts (``"1GiB"``,
    ``"512M"``, ``"4096"``; K/M/G/T are binary multiples). ValueError otherwise."""
    if isinstance(value, bool):
        raise TypeError("memory must be bytes (int) or a size string like '1GiB', not bool")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        m = _SIZE.match(value)
        if m is None:
            raise ValueError(f"memory={value!r} is not a size (expected e.g. 1GiB, 512M, 4096)")
        n = int(m.group(1)) << (10 * " kmgt".index(m.group(2).lower() or " "))
    else:
        raise TypeError(f"memory must be an int or a str, not {type(value).__name__}")
    if n <= 0:
        raise ValueError(f"memory must be > 0 bytes, got {value!r}")
    return n


@dataclass(frozen=True)
class MockConfig:
    """The mock configuration a test asks for (None = whatever this process has)."""

    devices: int | None = None
    memory: int | None = None  # bytes per device
    soc: str | None = None

    @classmethod
    def from_marker(cls, mark: pytest.Mark) -> MockConfig:
        """Validate ``npu_mock(devices=, memory=, soc=)``; TypeError/ValueError naming
        the bad argument."""
        if mark.args:
            raise TypeError("npu_mock takes keyword arguments only (devices=, memory=, soc=)")
        unknown = set(mark.kwargs) - {"devices", "memory", "soc"}
        if unknown:
            raise TypeError(
                f"npu_mock got unknown argument(s) {sorted(unknown)}; "
                "expected devices=, memory=, soc="
            )
        devices = mark.kwargs.get("devices")
        if devices is not None:
            if isinstance(devices, bool) or not isinstance(devices, int):
                raise TypeError(f"npu_mock devices must be an int, not {type(devices).__name__}")
            if not 0 <= devices <= 64:
                raise ValueError(f"npu_mock devices must be in 0..64, got {devices}")
        memory = mark.kwargs.get("memory")
        soc = mark.kwargs.get("soc")
        if soc is not None and (not isinstance(soc, str) or not _SOC.match(soc)):
            raise ValueError(
                f"npu_mock soc must be 1..63 printable characters without spaces, got {soc!r}"
            )
        return cls(devices, None if memory is None else parse_bytes(memory), soc)

    def env(self) -> dict[str, str]:
        """The ``ASCEND_MOCK_*`` variables that select this configuration."""
        out: dict[str, str] = {}
        if self.devices is not None:
            out["ASCEND_MOCK_DEVICE_COUNT"] = str(self.devices)
        if self.memory is not None:
            out["ASCEND_MOCK_MEM_PER_DEVICE"] = str(self.memory)
        if self.soc is not None:
            out["ASCEND_MOCK_SOC_NAME"] = self.soc
        return out

    def satisfied_by(self, current: dict[str, object]) -> bool:
        """True when a process with configuration ``current`` can run the test."""
        return all(
            want is None or current.get(key) == want
            for key, want in (("devices", self.devices), ("memory", self.memory), ("soc", self.soc))
        )

    def __str__(self) -> str:
        parts = [f"{k}={v!r}" for k, v in vars(self).items() if v is not None]
        return "npu_mock(" + ", ".join(parts) + ")"


def current_config() -> dict[str, object]:
    """This process's mock configuration: what the loaded mock reports, else what
    its environment will give it at the first runtime call."""
    from ._leaks import mock_in_process

    if mock_in_process() is not None:
        from ..mock import mock_control

        mc = mock_control()
        return {"devices": mc.device_count, "memory": mc.config(2), "soc": mc.soc_name}
    env = os.environ
    out: dict[str, object] = dict(_DEFAULTS)
    try:
        out["devices"] = int(env.get("ASCEND_MOCK_DEVICE_COUNT", "8"))
        out["memory"] = parse_bytes(env.get("ASCEND_MOCK_MEM_PER_DEVICE", "64GiB"))
    except (TypeError, ValueError):
        return {}  # a value the mock would replace by its fallback: never "the same"
    out["soc"] = env.get("ASCEND_MOCK_SOC_NAME") or _DEFAULTS["soc"]
    if env.get("ASCEND_RT_VISIBLE_DEVICES"):
        out["devices"] = None  # visible devices differ from the count: ask a child
    return out


class ChildRun:
    """One child pytest process running every test of one configuration."""

    def __init__(self, config: pytest.Config, mock: MockConfig, nodeids: list[str]) -> None:
        self.mock = mock
        self.nodeids = nodeids
        self.reports: dict[str, list[dict[str, Any]]] = {}
        self.errors: list[dict[str, Any]] = []
        self.failure: str | None = None
        self._run(config)

    def _args(self, config: pytest.Config, report: str) -> list[str]:
        args = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(config.rootpath),
            "--npu-child-report",
            report,
            "--npu-leak-frames",
            str(config.getoption("npu_leak_frames")),
            "-q",
        ]
        if config.inipath is not None:
            args += ["-c", str(config.inipath)]
        if config.getoption("npu_sanitize"):
            args.append("--npu-sanitize")
        if config.getoption("npu_no_leak_check"):
            args.append("--npu-no-leak-check")
        return args + self.nodeids

    def _run(self, config: pytest.Config) -> None:
        env = dict(os.environ)
        env.pop("ASCEND_RT_VISIBLE_DEVICES", None)
        env.pop("PYTEST_CURRENT_TEST", None)
        env.pop("PYTEST_ADDOPTS", None)
        env.update(self.mock.env())
        env["PYACL_RT_BACKEND"] = "mock"
        with tempfile.TemporaryDirectory(prefix="npu-mock-") as tmp:
            report = str(Path(tmp) / "reports.jsonl")
            proc = subprocess.run(
                self._args(config, report),
                env=env,
                cwd=str(config.rootpath),
                capture_output=True,
                text=True,
            )
            lines = Path(report).read_text().splitlines() if Path(report).exists() else []
        for line in lines:
            data = json.loads(line)
            if data.get("$report_type") == "CollectReport":
                self.errors.append(data)
            else:
                self.reports.setdefault(data["nodeid"], []).append(data)
        if proc.returncode not in (0, 1) or self.errors:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-40:]
            self.failure = (
                f"the child pytest process for {self.mock} exited with code "
                f"{proc.returncode}:\n" + "\n".join(tail)
            )
