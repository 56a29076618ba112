"""One worker per card: ASCEND_RT_VISIBLE_DEVICES, Device.physical_id, and the examples
examples/per_card.py (plain multiprocessing, torchrun-style) and examples/ray_workers.py
(Ray actors; marker ``ray``, skipped without the ``ray`` extra).

Everything runs in fresh interpreters: the variable is read when the runtime starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import _clean_env

import pyacl_rt as npu

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _env(**extra: str) -> dict[str, str]:
    return _clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_DEVICE_COUNT="4", **extra)


def test_physical_id_without_visible_devices() -> None:
    assert [npu.Device(i).physical_id for i in range(npu.device_count())] == list(
        range(npu.device_count())
    )


@pytest.mark.parametrize(("visible", "physical"), [("2", [2]), ("1,3", [1, 3])])
def test_visible_devices_are_honoured(
    visible: str, physical: list[int], run_python: Callable[..., Any]
) -> None:
    r = run_python(
        """
        import pyacl_rt as npu
        print(npu.device_count(), [npu.Device(i).physical_id for i in range(npu.device_count())])
        b = npu.DeviceBuffer(1024, device=npu.device_count() - 1)
        b.fill(1)
        print(b.device_index)
        """,
        env=_env(ASCEND_RT_VISIBLE_DEVICES=visible),
    )
    assert r.returncode == 0, r.stderr
    seen, last = r.stdout.splitlines()
    assert seen == f"{len(physical)} {physical}"  # only those cards, renumbered from 0
    assert int(last) == len(physical) - 1


def _run_example(name: str, *args: str, timeout: int = 300, **env: str) -> dict[str, object]:
    r = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--json", *args],
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_per_card_example_spawns_one_worker_per_card() -> None:
    report = _run_example("per_card.py", "--cards", "4", "--batches", "8")
    assert sorted(report) == ["0", "1", "2", "3"]
    for rank, r in report.items():
        assert isinstance(r, dict)
        assert r["devices"] == 1 and r["physical_id"] == int(rank) and r["ok"], r
        assert r["visible"] == rank and r["batches"] == [int(rank), int(rank) + 4]


def test_per_card_example_as_a_launcher_worker() -> None:
    # torchrun-style: the launcher sets LOCAL_RANK (and may restrict the cards first)
    report = _run_example(
        "per_card.py", "--worker", LOCAL_RANK="1", ASCEND_RT_VISIBLE_DEVICES="2,3"
    )
    r = report["1"]
    assert isinstance(r, dict)
    assert r["devices"] == 1 and r["physical_id"] == 3 and r["visible"] == "3" and r["ok"]


@pytest.mark.ray
def test_ray_workers_one_actor_per_card() -> None:
    pytest.importorskip("ray")
    report = _run_example("ray_workers.py", "--cards", "4", "--batches", "12", timeout=600)
    assert isinstance(report, list) and len(report) == 4
    assert all(r["devices"] == 1 and r["ok"] for r in report), report
    assert sorted(r["physical_id"] for r in report) == [0, 1, 2, 3]
    assert all(r["visible"] == str(r["physical_id"]) for r in report), report
    assert len({r["pid"] for r in report}) == 4  # four actor processes
