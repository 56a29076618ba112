"""Profile files: the Chrome trace event format checked, summaries read or computed.

Private helpers of :mod:`pyacl_rt.profiler` and the ``pyacl-rt trace`` commands. Nothing
here loads the runtime: the files are plain JSON (mock README "Profiling").
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .errors import TraceFormatError

__all__ = ["TraceFormatError", "load_summary", "load_trace", "summarize", "validate_trace"]

_PHASES_DURATION = {"X"}
_PHASES_INSTANT = {"i", "I"}
_PHASES_META = {"M"}
_PHASES_PAIRED = {"B", "E"}
_META_NAMES = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def _num(e: dict[str, Any], key: str, where: str, *, minimum: float | None = None) -> float:
    v = e.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TraceFormatError(f"{where}: {key!r} must be a number, got {v!r}")
    if minimum is not None and v < minimum:
        raise TraceFormatError(f"{where}: {key!r} must be >= {minimum}, got {v!r}")
    return float(v)


def validate_trace(doc: Any) -> int:
    """Checks a trace document (JSON object form) against the Chrome trace event format
    for the fields used: ``traceEvents`` a list; each event with a string ``name`` and
    ``ph``; ``pid`` / ``tid`` ints; ``ts`` (µs) a number >= 0 except on metadata;
    ``X`` events a ``dur`` >= 0; instants a scope ``s`` in g/p/t when given; ``M``
    events one of process_name / thread_name / *_sort_index with their ``args``;
    ``cat`` a string and ``args`` an object when present; ``B``/``E`` balanced per
    track; ``displayTimeUnit`` ms or ns. Returns the number of events;
    :class:`TraceFormatError` on the first violation."""
    if not isinstance(doc, dict):
        raise TraceFormatError("a trace must be a JSON object with traceEvents")
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        raise TraceFormatError("'traceEvents' must be a list")
    unit = doc.get("displayTimeUnit", "ms")
    if unit not in ("ms", "ns"):
        raise TraceFormatError(f"'displayTimeUnit' must be ms or ns, got {unit!r}")
    open_spans: dict[tuple[int, int], int] = {}
    for i, e in enumerate(events):
        where = f"traceEvents[{i}]"
        if not isinstance(e, dict):
            raise TraceFormatError(f"{where}: an event must be an object")
        ph = e.get("ph")
        if not isinstance(ph, str) or not ph:
            raise TraceFormatError(f"{where}: 'ph' must be a phase string, got {ph!r}")
        if not isinstance(e.get("name"), str):
            raise TraceFormatError(f"{where}: 'name' must be a string, got {e.get('name')!r}")
        for key in ("pid", "tid"):
            v = e.get(key)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TraceFormatError(f"{where}: {key!r} must be an int, got {v!r}")
        if "cat" in e and not isinstance(e["cat"], str):
            raise TraceFormatError(f"{where}: 'cat' must be a string, got {e['cat']!r}")
        if "args" in e and not isinstance(e["args"], dict):
            raise TraceFormatError(f"{where}: 'args' must be an object, got {e['args']!r}")
        if ph in _PHASES_META:
            if e["name"] not in _META_NAMES:
                raise TraceFormatError(f"{where}: unknown metadata event {e['name']!r}")
            args = e.get("args")
            want = "sort_index" if e["name"].endswith("sort_index") else "name"
            if not isinstance(args, dict) or want not in args:
                raise TraceFormatError(f"{where}: {e['name']} needs args.{want}")
            continue
        _num(e, "ts", where, minimum=0)
        if ph in _PHASES_DURATION:
            _num(e, "dur", where, minimum=0)
        elif ph in _PHASES_INSTANT:
            if "s" in e and e["s"] not in ("g", "p", "t"):
                raise TraceFormatError(
                    f"{where}: instant scope 's' must be g, p or t, got {e['s']!r}"
                )
        elif ph in _PHASES_PAIRED:
            track = (int(e["pid"]), int(e["tid"]))
            depth = open_spans.get(track, 0) + (1 if ph == "B" else -1)
            if depth < 0:
                raise TraceFormatError(f"{where}: 'E' without a matching 'B' on {track}")
            open_spans[track] = depth
        else:
            raise TraceFormatError(f"{where}: phase {ph!r} is not used by pyacl_rt traces")
    unbalanced = [k for k, v in open_spans.items() if v]
    if unbalanced:
        raise TraceFormatError(f"'B' events never ended on tracks {unbalanced}")
    return len(events)


def load_trace(path: str | os.PathLike[str]) -> tuple[Path, dict[str, Any]]:
    """The trace file for ``path`` (a ``trace.json``, a ``summary.json`` next to one, or
    a profile folder) and its validated document. ``OSError`` / :class:`TraceFormatError`."""
    p = Path(path)
    if p.is_dir():
        p = p / "trace.json"
    elif p.name == "summary.json":
        p = p.with_name("trace.json")
    text = p.read_text()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{p}: not JSON (line {exc.lineno}: {exc.msg})") from None
    validate_trace(doc)
    return p, doc


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def summarize(doc: dict[str, Any]) -> dict[str, Any]:
    """A summary computed from the trace's task events (``X`` events of device tracks,
    pid >= 1): per kind count / total / mean µs / bytes / GB/s, per stream tasks and busy
    µs (union of its task spans, event waits excluded)."""
    kinds: dict[str, dict[str, Any]] = {}
    streams: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("pid", 0) < 1:
            continue
        args = e.get("args", {})
        kind = str(e.get("cat", args.get("kind", "other")))
        k = kinds.setdefault(kind, {"kind": kind, "count": 0, "total_us": 0.0, "bytes": 0})
        k["count"] += 1
        k["total_us"] += float(e["dur"])
        k["bytes"] += int(args.get("bytes", 0))
        if kind != "event_wait":
            streams.setdefault((int(e["pid"]) - 1, int(e["tid"])), []).append(
                (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
            )
    for k in kinds.values():
        k["mean_us"] = k["total_us"] / k["count"]
        k["bandwidth_gbps"] = k["bytes"] / (k["total_us"] * 1e3) if k["total_us"] else 0.0
    rows = [
        {"device": d, "stream": s, "tasks": len(v), "busy_us": _union(v)}
        for (d, s), v in sorted(streams.items())
    ]
    return {
        "timing": doc.get("otherData", {}).get("timing"),
        "kinds": list(kinds.values()),
        "streams": rows,
    }


def load_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The summary of a profile: its ``summary.json`` when present (the mock's, with
    overlap), else :func:`summarize` of the trace."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    summary = folder / "summary.json"
    if p.name == "summary.json" or (p.is_dir() and summary.is_file()):
        try:
            doc: dict[str, Any] = json.loads(summary.read_text())
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"{summary}: not JSON (line {exc.lineno}: {exc.msg})") from None
        if not isinstance(doc.get("kinds"), list) or not isinstance(doc.get("streams"), list):
            raise TraceFormatError(f"{summary}: no 'kinds' and 'streams' lists")
        return doc
    _, trace = load_trace(p)
    if summary.is_file():
        return load_summary(summary)
    return summarize(trace)
