"""``pyacl-rt trace summary FILE`` and ``pyacl-rt trace plot FILE -o timeline.png``.

FILE is a profile folder (``mock_prof_<pid>_<n>``), its ``trace.json`` or its
``summary.json``. ``summary`` prints the per-kind and per-stream tables (``rich`` when
installed - the ``pyacl_rt[cli]`` extra - else plain text; ``--json`` the summary
document); ``plot`` draws one row per stream (and host thread) with its tasks coloured by
kind (``matplotlib``, the ``pyacl_rt[plot]`` extra). Output rules as ``pyacl-rt info``:
the report on stdout, errors on stderr; exit 0 success, 1 a file that cannot be read or
is not a valid trace (or a missing extra), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO


def add_parser(sub: Any) -> None:
    """Registers ``trace`` and its sub-commands on the ``pyacl-rt`` sub-parsers."""
    trace = sub.add_parser(
        "trace",
        help="summarize or plot a profile (trace.json)",
        description="Read a profile written by pyacl_rt.profiler / ASCEND_PROFILER_* on the mock.",
    )
    trace_sub = trace.add_subparsers(dest="trace_command", metavar="TRACE_COMMAND")
    trace_sub.required = True
    summary = trace_sub.add_parser(
        "summary",
        help="print the summary as tables",
        description="Print per task kind count/total/mean/bandwidth and per stream busy time.",
    )
    summary.add_argument("file", metavar="FILE", help="profile folder, trace.json or summary.json")
    summary.add_argument("--json", action="store_true", help="print the summary document")
    summary.set_defaults(func=_cmd_summary, command_parser=summary)
    plot = trace_sub.add_parser(
        "plot",
        help="draw the per-stream timeline as an image",
        description="Draw one row per stream / host thread (needs matplotlib: pyacl_rt[plot]).",
    )
    plot.add_argument("file", metavar="FILE", help="profile folder or trace.json")
    plot.add_argument("-o", "--output", required=True, help="image file (.png, .svg, .pdf)")
    plot.set_defaults(func=_cmd_plot, command_parser=plot)


def _fail(message: str) -> int:
    print(f"pyacl-rt: error: {message}", file=sys.stderr)
    return 1


_KIND_COLUMNS = ("kind", "count", "total_us", "mean_us", "bytes", "bandwidth_gbps")
_STREAM_COLUMNS = ("device", "stream", "tasks", "busy_us", "overlap_us")


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _rows(items: list[dict[str, Any]], columns: tuple[str, ...]) -> list[list[str]]:
    return [[_cell(item.get(c)) for c in columns] for item in items]


def _plain_table(title: str, columns: tuple[str, ...], rows: list[list[str]], out: TextIO) -> None:
    widths = [
        max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)
    ]
    out.write(f"{title}\n")
    out.write("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)).rstrip() + "\n")
    for r in rows:
        out.write("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)).rstrip() + "\n")


def _rich_console(out: TextIO) -> Any:
    try:
        from rich.console import Console
    except ImportError:
        return None
    return Console(file=out, width=120, highlight=False, color_system=None)


def _print_tables(doc: dict[str, Any], out: TextIO) -> None:
    tables = [
        ("Tasks by kind", _KIND_COLUMNS, _rows(doc["kinds"], _KIND_COLUMNS)),
        ("Streams", _STREAM_COLUMNS, _rows(doc["streams"], _STREAM_COLUMNS)),
    ]
    console = _rich_console(out) if out is sys.stdout else None
    head = f"timing: {doc.get('timing') or '?'}"
    if "span_us" in doc:
        head += f", span {doc['span_us']:.3f} us"
    out.write(head + "\n")
    for title, columns, rows in tables:
        if console is not None:
            from rich.table import Table

            table = Table(title=title, title_justify="left")
            for c in columns:
                table.add_column(c, justify="left" if c == "kind" else "right")
            for r in rows:
                table.add_row(*r)
            console.print(table)
        else:
            _plain_table(title, columns, rows, out)


def _cmd_summary(args: argparse.Namespace, out: TextIO) -> int:
    from ._trace import TraceFormatError, load_summary

    try:
        doc = load_summary(args.file)
    except (OSError, TraceFormatError) as exc:
        return _fail(str(exc))
    if args.json:
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        _print_tables(doc, out)
    return 0


def _tracks(doc: dict[str, Any]) -> dict[tuple[int, int], str]:
    names: dict[tuple[int, int], str] = {}
    procs: dict[int, str] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e["name"] == "process_name":
            procs[e["pid"]] = str(e["args"]["name"])
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = f"{procs.get(e['pid'], e['pid'])}: {e['args']['name']}"
    return names


def _cmd_plot(args: argparse.Namespace, out: TextIO) -> int:
    from ._trace import TraceFormatError, load_trace

    try:
        path, doc = load_trace(args.file)
    except (OSError, TraceFormatError) as exc:
        return _fail(str(exc))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return _fail("trace plot needs matplotlib: pip install 'pyacl_rt[plot]'")
    names = _tracks(doc)
    spans: dict[tuple[int, int], dict[str, list[tuple[float, float]]]] = {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            key = (e["pid"], e["tid"])
            spans.setdefault(key, {}).setdefault(str(e.get("cat", "other")), []).append(
                (float(e["ts"]), max(float(e["dur"]), 1e-3))
            )
    rows = sorted(spans)
    kinds = sorted({k for per in spans.values() for k in per})
    colours = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(12, 1 + 0.5 * max(len(rows), 1)))
    for y, key in enumerate(rows):
        for kind, bars in spans[key].items():
            ax.broken_barh(bars, (y - 0.4, 0.8), color=colours(kinds.index(kind) % 20))
    ax.set_yticks(range(len(rows)), [names.get(k, f"{k[0]}/{k[1]}") for k in rows])
    ax.invert_yaxis()
    ax.set_xlabel("time (us)")
    ax.set_title(f"{path.parent.name} ({doc.get('otherData', {}).get('timing', '?')} timing)")
    from matplotlib.patches import Patch

    handles = [Patch(color=colours(i % 20)) for i in range(len(kinds))]
    if kinds:
        ax.legend(handles, kinds, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(args.output)
    except (OSError, ValueError) as exc:
        return _fail(f"cannot write {args.output}: {exc}")
    finally:
        plt.close(fig)
    count = sum(len(bars) for per in spans.values() for bars in per.values())
    out.write(f"{args.output}: {len(rows)} tracks, {count} tasks\n")
    return 0
