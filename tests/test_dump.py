"""pyacl_rt.dump: the config builder and validator (typed errors naming the key), applying a
config around kernel launches of a Python twin on the mock, and reading the dump back."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pyacl_rt as npu
from pyacl_rt import dump, mock
from pyacl_rt.mock import In, Out, Value


def test_config_document() -> None:
    cfg = dump.DumpConfig("out", layers=["vector_add"], mode="all", steps=[0, (2, 3)])
    assert cfg.to_dict() == {
        "dump": {
            "dump_path": "out",
            "dump_mode": "all",
            "dump_data": "tensor",
            "dump_list": [{"layer": ["vector_add"]}],
            "dump_step": "0|2-3",
        }
    }
    every = dump.DumpConfig("out", model_name="net").to_dict()["dump"]
    assert every["dump_op_switch"] == "on" and every["dump_list"] == [{"model_name": "net"}]
    assert json.loads(cfg.to_json()) == cfg.to_dict()


@pytest.mark.parametrize(
    ("doc", "key", "words"),
    [
        ([], None, "JSON object"),
        ({"dmp": {}}, "dump", "must be an object"),
        ({"dump": {"dump_path": "p", "dump_mod": "all"}}, "dump_mod", "unknown key"),
        ({"dump": {"dump_path": "p", "dump_mode": "both"}}, "dump_mode", "output, input, all"),
        ({"dump": {"dump_path": "p", "dump_op_switch": "yes"}}, "dump_op_switch", "on, off"),
        ({"dump": {"dump_path": "p", "dump_data": "npy"}}, "dump_data", "tensor, stats"),
        ({"dump": {"dump_path": "p", "dump_level": "x"}}, "dump_level", "op, kernel, all"),
        ({"dump": {"dump_path": "", "dump_list": [{}]}}, "dump_path", "non-empty"),
        ({"dump": {"dump_list": [{}]}}, "dump_path", "required"),
        ({"dump": {"dump_path": "p", "dump_step": "1,2"}}, "dump_step", "0|3-5"),
        ({"dump": {"dump_path": "p", "dump_step": "5-3"}}, "dump_step", "ends before"),
        ({"dump": {"dump_path": "p", "dump_list": {}}}, "dump_list", "list of objects"),
        ({"dump": {"dump_path": "p", "dump_list": [3]}}, "dump_list[0]", "object"),
        (
            {"dump": {"dump_path": "p", "dump_list": [{"layer": "op"}]}},
            "dump_list[0].layer",
            "list",
        ),
        (
            {"dump": {"dump_path": "p", "dump_list": [{"model_name": 1}]}},
            "dump_list[0].model_name",
            "string",
        ),
        (
            {"dump": {"dump_path": "p", "dump_list": [{"layer": ["x" * 9000]}]}},
            "dump_list",
            "8 KiB",
        ),
    ],
)
def test_validate_names_the_bad_key(doc: Any, key: str | None, words: str) -> None:
    with pytest.raises(dump.DumpConfigError, match=words) as info:
        dump.validate(doc)
    assert info.value.key == key
    assert isinstance(info.value, ValueError)


def test_builder_errors_are_typed() -> None:
    with pytest.raises(dump.DumpConfigError, match="dump_mode"):
        dump.DumpConfig("p", mode="inputs").to_dict()
    with pytest.raises(dump.DumpConfigError, match="dump_list"):
        dump.DumpConfig("p", layers="vector_add").to_dict()
    with pytest.raises(dump.DumpConfigError, match="dump_path"):
        dump.DumpConfig(3).to_dict()  # type: ignore[arg-type]
    with pytest.raises(dump.DumpConfigError, match="dump_mode"):
        dump.enabled({"dump": {"dump_path": "p", "dump_mode": "x"}})


def test_load_file(tmp_path: Path) -> None:
    f = tmp_path / "acl.json"
    f.write_text('{"dump": {"dump_path": "d", "dump_list": [{"layer": ["a"]}]}}')
    assert dump.load(f)["dump"]["dump_list"] == [{"layer": ["a"]}]
    f.write_text('{"dump": {"dump_path": "d",\n "dump_list": [}')
    with pytest.raises(dump.DumpConfigError, match="line 2"):
        dump.load(f)
    with pytest.raises(OSError):
        dump.load(tmp_path / "missing.json")


def test_output_root_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASCEND_DUMP_PATH", raising=False)
    monkeypatch.delenv("ASCEND_WORK_PATH", raising=False)
    assert dump.output_root("cfg") == Path("cfg")
    monkeypatch.setenv("ASCEND_WORK_PATH", "/work")
    assert dump.output_root("cfg") == Path("/work")
    monkeypatch.setenv("ASCEND_DUMP_PATH", "/dump")
    assert dump.output_root("cfg") == Path("/dump")


# ------------------------------------------------------------ a real dump


def _vector_add(
    block: int, blocks: int, x: np.ndarray, y: np.ndarray, z: np.ndarray, n: int
) -> None:
    z[: int(n)] = x[: int(n)] + y[: int(n)]


@pytest.fixture
def vector_add(tmp_path: Path) -> Iterator[Any]:
    src = tmp_path / "k.c"
    src.write_text("void vector_add(void) {}\nvoid other_op(void) {}\n")
    obj = tmp_path / "k.o"
    subprocess.run([os.environ.get("CC", "cc"), "-c", str(src), "-o", str(obj)], check=True)
    params = (In("float32", "n"), In("float32", "n"), Out("float32", "n"), Value("uint32", "n"))
    mock.register_kernel("vector_add", _vector_add, params)
    mock.register_kernel("other_op", _vector_add, params)
    try:
        with npu.ObjectCode.from_file(obj) as code:
            yield code
    finally:
        mock.unregister_kernel("vector_add")
        mock.unregister_kernel("other_op")


def test_dump_kernel_inputs_and_outputs(
    tmp_path: Path, vector_add: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASCEND_DUMP_PATH", raising=False)
    monkeypatch.delenv("ASCEND_WORK_PATH", raising=False)
    n = 256
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 2.0, dtype=np.float32)
    cfg = dump.DumpConfig(tmp_path / "dumps", layers=["vector_add"], mode="all")
    with npu.Stream() as s:
        dx, dy, dz = (npu.DeviceBuffer(n * 4, stream=s) for _ in range(3))
        npu.copy(dx, x, stream=s)
        npu.copy(dy, y, stream=s)
        with dump.enabled(cfg) as session:
            for name in ("vector_add", "other_op"):
                npu.launch(
                    s,
                    npu.LaunchConfig(blocks=1),
                    vector_add.get_kernel(name),
                    dx,
                    dy,
                    dz,
                    np.uint32(n),
                )
            s.synchronize()
        for b in (dx, dy, dz):
            b.close()
    (folder,) = session.folders
    records = dump.read(folder)
    assert records == dump.read(tmp_path / "dumps")  # the root finds the same folder
    assert {r.op for r in records} == {"vector_add"}  # other_op is not in the layers
    by_io = {(r.io, r.index): r for r in records}
    assert set(by_io) == {("input", 0), ("input", 1), ("output", 0)}
    # a twin declares pointers, not extents: raw bytes to the end of the allocation
    got_x = by_io["input", 0].array()
    assert got_x.dtype == np.uint8
    np.testing.assert_array_equal(got_x[: n * 4].view(np.float32), x)
    np.testing.assert_array_equal(by_io["output", 0].array()[: n * 4].view(np.float32), x + y)
    assert all(r.nbytes >= n * 4 and r.step >= 0 and r.device == 0 for r in records)


def test_dump_stats(tmp_path: Path, vector_add: Any) -> None:
    n = 64
    doc = {
        "dump": {
            "dump_path": str(tmp_path),
            "dump_list": [{}],
            "dump_op_switch": "on",
            "dump_data": "stats",
        }
    }
    with npu.Stream() as s:
        dx, dy, dz = (npu.DeviceBuffer(n * 4, stream=s) for _ in range(3))
        for b in (dx, dy, dz):
            npu.memset(b, 0, stream=s)
        with dump.enabled(doc) as session:
            npu.launch(
                s,
                npu.LaunchConfig(blocks=1),
                vector_add.get_kernel("other_op"),
                dx,
                dy,
                dz,
                np.uint32(n),
            )
            s.synchronize()
        for b in (dx, dy, dz):
            b.close()
    (rec,) = dump.read(session.folders[0])
    assert rec.op == "other_op" and rec.path is None and rec.stats is not None
    assert rec.stats["count"] == rec.nbytes and rec.stats.get("max", 0) == 0  # uint8 bytes
    with pytest.raises(ValueError, match="no data file"):
        rec.array()


def test_enabled_twice_and_bad_read(tmp_path: Path) -> None:
    cfg = dump.DumpConfig(tmp_path, layers=["x"])
    with dump.enabled(cfg), pytest.raises(RuntimeError, match="already running"), dump.enabled(cfg):
        pass
    with pytest.raises(FileNotFoundError, match=r"index\.json"):
        dump.read(tmp_path / "nothing")
    (tmp_path / "index.json").write_text("{")
    with pytest.raises(ValueError, match="not valid JSON"):
        dump.read(tmp_path)
