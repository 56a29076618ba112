"""Data dump: build, validate and apply a dump config; read the dumped tensors back.

Usage::

    from pyacl_rt import dump

    cfg = dump.DumpConfig("dumps", layers=["vector_add"], mode="all", steps="0|2-3")
    with dump.enabled(cfg) as session:       # aclmdlInitDump + aclmdlSetDump
        ...                                  # launch kernels
    for rec in dump.read(session.folders[0]):
        print(rec.op, rec.io, rec.index, rec.array().shape)

The JSON is CANN's (``{"dump": {...}}``, acl_next_semantics.md section 7.5): ``dump_path``,
``dump_mode`` (``"output"`` / ``"input"`` / ``"all"``), ``dump_list`` (``[{"model_name":
..., "layer": [op names]}]``), ``dump_op_switch``, ``dump_step`` (iterations:
``"0|3-5"``), ``dump_data`` (``"tensor"`` / ``"stats"``), ``dump_level``, ``dump_debug``,
``dump_scene``. :func:`validate` checks such a document before it reaches the runtime and
raises :class:`DumpConfigError` naming the bad key and value. The output directory is
``ASCEND_DUMP_PATH`` > ``ASCEND_WORK_PATH`` > ``dump_path`` (:func:`output_root`). The
seed's ``DUMP_CONFIG_PATH`` (a config file the runtime applies at ``aclInit``) needs no
Python: :func:`load` validates such a file.

The mock writes ``<root>/mock_dump_<pid>_<n>/index.json`` (one object per tensor: task,
op, device, stream, step, io, index, dtype, shape, bytes, file or stats) and ``.npy``
files (mock README "Dump"); :func:`read` returns them as :class:`DumpRecord` objects.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from . import lowlevel as ll
from .errors import DumpConfigError

__all__ = [
    "DumpConfig",
    "DumpConfigError",
    "DumpRecord",
    "DumpSession",
    "enabled",
    "load",
    "output_root",
    "read",
    "validate",
]

_CHOICES: dict[str, tuple[str, ...]] = {
    "dump_mode": ("output", "input", "all"),
    "dump_op_switch": ("on", "off"),
    "dump_debug": ("on", "off"),
    "dump_data": ("tensor", "stats"),
    "dump_level": ("op", "kernel", "all"),
    "dump_scene": (
        "aic_err_brief_dump",
        "aic_err_norm_dump",
        "aic_err_detail_dump",
        "lite_exception",
        "watcher",
    ),
}
_KEYS = ("dump_path", "dump_list", "dump_step", *_CHOICES)
_STEP_RE = re.compile(r"^\d+(-\d+)?(\|\d+(-\d+)?)*$")
_MAX_OP_NAMES = 8 * 1024  # bytes of all layer names together
_MAX_FILE = 10 * 1024 * 1024  # bytes of a config file


def _steps_text(steps: str | Sequence[int | tuple[int, int]]) -> str:
    if isinstance(steps, str):
        return steps
    parts = []
    for item in steps:
        if isinstance(item, tuple) and len(item) == 2:
            parts.append(f"{item[0]}-{item[1]}")
        else:
            parts.append(str(item))
    return "|".join(parts)


@dataclass
class DumpConfig:
    """A dump configuration (see the module docstring).

    ``path``: the output directory (``dump_path``); ``layers``: kernel/op names to dump
    (empty: every kernel, ``dump_op_switch`` on); ``mode``: ``"output"``, ``"input"`` or
    ``"all"``; ``steps``: the iterations (``"0|3-5"``, or ``[0, (3, 5)]``; ``None``:
    every step); ``data``: ``"tensor"`` (``.npy`` files) or ``"stats"``;
    ``model_name``: the model the layers belong to (not matched by the mock).
    """

    path: str | os.PathLike[str]
    layers: Sequence[str] = field(default_factory=tuple)
    mode: str = "output"
    steps: str | Sequence[int | tuple[int, int]] | None = None
    data: str = "tensor"
    model_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The validated JSON document ``{"dump": {...}}``."""
        if not isinstance(self.path, (str, os.PathLike)):
            raise DumpConfigError("dump_path", self.path, "must be a path")
        if isinstance(self.layers, str):
            raise DumpConfigError("dump_list", self.layers, "layers must be a list of names")
        entry: dict[str, Any] = {}
        if self.model_name is not None:
            entry["model_name"] = self.model_name
        body: dict[str, Any] = {
            "dump_path": os.fspath(self.path),
            "dump_mode": self.mode,
            "dump_data": self.data,
        }
        if self.layers:
            entry["layer"] = list(self.layers)
            body["dump_list"] = [entry]
        else:
            body["dump_list"] = [entry]
            body["dump_op_switch"] = "on"
        if self.steps is not None:
            body["dump_step"] = _steps_text(self.steps)
        doc = {"dump": body}
        validate(doc)
        return doc

    def to_json(self) -> str:
        """The document as JSON text."""
        return json.dumps(self.to_dict(), indent=2)


def validate(doc: Mapping[str, Any]) -> None:
    """Checks a dump document (``{"dump": {...}}``, CANN's rules) and raises
    :class:`DumpConfigError` naming the first bad key; unknown keys are refused too (a
    typo would otherwise silently disable the dump)."""
    if not isinstance(doc, Mapping):
        raise DumpConfigError(None, doc, "must be a JSON object")
    body = doc.get("dump")
    if not isinstance(body, Mapping):
        raise DumpConfigError("dump", body, 'must be an object: {"dump": {...}}')
    for key in body:
        if key not in _KEYS:
            raise DumpConfigError(key, body[key], f"unknown key (known: {', '.join(_KEYS)})")
    for key, allowed in _CHOICES.items():
        if key in body and body[key] not in allowed:
            raise DumpConfigError(key, body[key], f"must be one of {', '.join(allowed)}")
    path = body.get("dump_path")
    if path is not None and (not isinstance(path, str) or not path or "\0" in path):
        raise DumpConfigError("dump_path", path, "must be a non-empty path string")
    if "dump_step" in body:
        step = body["dump_step"]
        if not isinstance(step, str) or not _STEP_RE.match(step):
            raise DumpConfigError("dump_step", step, 'must be iterations like "0|3-5"')
        for part in step.split("|"):
            lo, _, hi = part.partition("-")
            if hi and int(hi) < int(lo):
                raise DumpConfigError("dump_step", step, f"range {part} ends before it starts")
    total = 0
    dump_list = body.get("dump_list", [])
    if not isinstance(dump_list, list):
        raise DumpConfigError("dump_list", dump_list, "must be a list of objects")
    for i, entry in enumerate(dump_list):
        if not isinstance(entry, Mapping):
            raise DumpConfigError(f"dump_list[{i}]", entry, "must be an object")
        name = entry.get("model_name")
        if name is not None and not isinstance(name, str):
            raise DumpConfigError(f"dump_list[{i}].model_name", name, "must be a string")
        layers = entry.get("layer", [])
        if not isinstance(layers, list) or not all(
            isinstance(x, str) and x and "\0" not in x for x in layers
        ):
            raise DumpConfigError(
                f"dump_list[{i}].layer", layers, "must be a list of non-empty op names"
            )
        total += sum(len(x.encode()) for x in layers)
    if total > _MAX_OP_NAMES:
        raise DumpConfigError("dump_list", f"{total} bytes", "op names exceed 8 KiB in all")
    enabling = bool(dump_list) or body.get("dump_op_switch") == "on"
    if enabling and path is None:
        raise DumpConfigError("dump_path", None, "is required when a dump is enabled")


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Reads and validates a dump config file (e.g. ``DUMP_CONFIG_PATH``'s); returns
    the document. ``OSError`` when unreadable, :class:`DumpConfigError` when invalid."""
    p = Path(path)
    if p.stat().st_size > _MAX_FILE:
        raise DumpConfigError(None, str(p), "the file exceeds 10 MiB")
    try:
        doc = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise DumpConfigError(
            None, str(p), f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    validate(doc)
    return dict(doc)


def output_root(dump_path: str | os.PathLike[str]) -> Path:
    """Where the runtime writes: ``ASCEND_DUMP_PATH`` > ``ASCEND_WORK_PATH`` >
    ``dump_path`` (acl_next_semantics.md section 7.5)."""
    for var in ("ASCEND_DUMP_PATH", "ASCEND_WORK_PATH"):
        value = os.environ.get(var)
        if value:
            return Path(value)
    return Path(dump_path)


_lock = threading.Lock()
_active: DumpSession | None = None


class DumpSession:
    """An applied dump config (made by :func:`enabled`): ``root`` is the output
    directory, ``folders`` the dump folders written during the session (filled when it
    ends)."""

    def __init__(self, config: DumpConfig | Mapping[str, Any]) -> None:
        doc = config.to_dict() if isinstance(config, DumpConfig) else dict(config)
        validate(doc)
        self.document = doc
        self.root = output_root(doc["dump"].get("dump_path", "."))
        self.folders: list[Path] = []
        self._file: str | None = None
        self._seen: set[str] = set()

    def __enter__(self) -> DumpSession:
        global _active
        from . import init

        with _lock:
            if _active is not None:
                raise RuntimeError("a pyacl_rt.dump.enabled block is already running")
            _active = self
        try:
            init()
            self.root.mkdir(parents=True, exist_ok=True)
            self._seen = set(os.listdir(self.root))
            fd, self._file = tempfile.mkstemp(prefix="pyacl_rt_dump_", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump(self.document, f)
            ll.check(ll.aclmdlInitDump(), "aclmdlInitDump")
            try:
                ll.check(ll.aclmdlSetDump(self._file.encode()), "aclmdlSetDump")
            except BaseException:
                ll.aclmdlFinalizeDump()
                raise
        except BaseException:
            self._cleanup()
            raise
        return self

    def _cleanup(self) -> None:
        global _active
        if self._file is not None:
            os.unlink(self._file)
            self._file = None
        with _lock:
            _active = None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            ll.check(ll.aclmdlFinalizeDump(), "aclmdlFinalizeDump")
        finally:
            self._cleanup()
            if self.root.is_dir():
                new = sorted(set(os.listdir(self.root)) - self._seen)
                self.folders = [self.root / n for n in new if (self.root / n).is_dir()]


def enabled(config: DumpConfig | Mapping[str, Any]) -> DumpSession:
    """Applies ``config`` (a :class:`DumpConfig` or a validated document) for a ``with``
    block: ``aclmdlInitDump`` + ``aclmdlSetDump`` at entry, ``aclmdlFinalizeDump`` at
    exit. Kernels launched inside are dumped (the mock writes when they run)."""
    return DumpSession(config)


@dataclass(frozen=True)
class DumpRecord:
    """One dumped tensor of the index: ``op`` (kernel name), ``io`` (``"input"`` /
    ``"output"``), ``index`` (its position), ``dtype`` / ``shape`` / ``nbytes`` (bytes),
    ``task``, ``device``, ``stream``, ``step``; ``path`` the ``.npy`` file (``None``
    with stats or an ``error``), ``stats`` the statistics of ``dump_data="stats"``."""

    op: str
    io: str
    index: int
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    task: int
    device: int
    stream: int
    step: int
    path: Path | None
    stats: dict[str, Any] | None = None
    error: str | None = None

    def array(self) -> Any:
        """The tensor as a numpy array (``bfloat16`` as its ``uint16`` bit patterns)."""
        if self.path is None:
            raise ValueError(
                f"{self.op} {self.io} {self.index} has no data file ({self.error or 'stats only'})"
            )
        import numpy as np

        return np.load(self.path, allow_pickle=False)


def _folders(path: Path) -> list[Path]:
    if (path / "index.json").is_file():
        return [path]
    found = sorted(p for p in path.glob("mock_dump_*") if (p / "index.json").is_file())
    if not found:
        raise FileNotFoundError(f"no dump index.json in {path} or its mock_dump_* folders")
    return found


def read(path: str | os.PathLike[str]) -> list[DumpRecord]:
    """The records of a dump folder (``mock_dump_<pid>_<n>``), or of every dump folder
    under an output root, in index order."""
    out: list[DumpRecord] = []
    for folder in _folders(Path(path)):
        try:
            entries = json.loads((folder / "index.json").read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{folder / 'index.json'}: not valid JSON ({exc.msg})") from None
        if not isinstance(entries, list):
            raise ValueError(f"{folder / 'index.json'}: not a JSON array")
        for e in entries:
            rel = e.get("file")
            stats = e.get("stats")
            out.append(
                DumpRecord(
                    op=str(e["op"]),
                    io=str(e["io"]),
                    index=int(e["index"]),
                    dtype=str(e["dtype"]),
                    shape=tuple(int(x) for x in e.get("shape", ())),
                    nbytes=int(e.get("bytes", 0)),
                    task=int(e.get("task", 0)),
                    device=int(e.get("device", 0)),
                    stream=int(e.get("stream", 0)),
                    step=int(e.get("step", 0)),
                    path=folder / rel if rel else None,
                    stats=dict(stats) if isinstance(stats, dict) else None,
                    error=e.get("error"),
                )
            )
    return out
