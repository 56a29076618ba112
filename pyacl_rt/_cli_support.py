"""What the CLI commands share: the package version, tables and progress bars -
`rich <https://rich.readthedocs.io>`_ when it is installed (the ``pyacl_rt[cli]`` extra),
else plain aligned text.

Both renderings carry the same cells, so scripts may parse either; ``--json`` is the
stable interface. Progress goes to stderr and only when stderr is a terminal. Layer 8
(public face and tools); rich is imported on first use only.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

__all__ = ["have_rich", "package_version", "progress", "render_table"]


def package_version() -> str:
    """The installed pyacl_rt version (the checkout's ``__version__`` when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyacl_rt")
    except PackageNotFoundError:  # running from an uninstalled checkout
        from . import __version__

        return __version__


def have_rich() -> bool:
    """True when rich can be imported (the ``cli`` extra is installed)."""
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


def render_table(
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    out: TextIO,
    *,
    right: Sequence[bool] | None = None,
) -> None:
    """Write a table of string cells to ``out`` (rich when available, else plain text).

    ``right[i]``: right-align column ``i`` (numbers). Never colored when ``out`` is not a
    terminal."""
    align = list(right) if right is not None else [False] * len(columns)
    if have_rich():
        from rich import box
        from rich.console import Console
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
        for name, r in zip(columns, align, strict=True):
            table.add_column(name, justify="right" if r else "left", no_wrap=True)
        for row in rows:
            table.add_row(*row)
        is_tty = bool(getattr(out, "isatty", lambda: False)())
        if is_tty:
            console = Console(file=out)
            console.print(title, style="bold", highlight=False)
            console.print(table)
            console.print()
            return
        # not a terminal: no colors, no trailing blanks, any width
        console = Console(file=io.StringIO(), width=1000, color_system=None)
        with console.capture() as capture:
            console.print(table)
        body = "\n".join(line.rstrip() for line in capture.get().splitlines() if line.strip())
        out.write(f"{title}\n{body}\n\n")
        return
    out.write(_plain_table(title, columns, rows, align))


def _plain_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]
) -> str:
    widths = [len(c) for c in columns]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=True)
        ]
        return "  ".join(parts).rstrip()

    text = [title, line(columns), "  ".join("-" * w for w in widths)]
    text.extend(line(row) for row in rows)
    return "\n".join(text) + "\n\n"


@contextlib.contextmanager
def progress(
    total: int, description: str, *, enabled: bool = True, stream: TextIO | None = None
) -> Iterator[Callable[[str], None]]:
    """A progress bar on stderr for ``total`` steps; yields ``advance(label)``.

    Shown only when ``enabled`` and the stream (default stderr) is a terminal; rich's
    bar when rich is installed, else a one-line counter rewritten in place."""
    err = stream if stream is not None else sys.stderr
    shown = enabled and bool(getattr(err, "isatty", lambda: False)())
    if not shown:
        yield lambda label: None
        return
    if have_rich():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        bar: Any = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[label]}"),
            console=Console(file=err),
            transient=True,
        )
        with bar:
            task = bar.add_task(description, total=total, label="")

            def advance_rich(label: str) -> None:
                bar.update(task, advance=1, label=label)

            yield advance_rich
        return
    done = 0

    def advance_plain(label: str) -> None:
        nonlocal done
        done += 1
        err.write(f"\r{description}: {done}/{total} {label}\x1b[K")
        err.flush()

    try:
        yield advance_plain
    finally:
        err.write("\r\x1b[K")
        err.flush()
