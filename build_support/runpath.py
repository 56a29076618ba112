"""Keep absolute run paths out of the extension modules' link command."""

from __future__ import annotations

import re

_RPATH_OPTION = re.compile(r"-Wl,(?:-rpath[,=]|-R,?)(.*)")


def without_absolute_rpath(command: list[str]) -> list[str]:
    """``command`` (a link command) without ``-Wl,-rpath,<dir>`` / ``-Wl,-rpath=<dir>`` /
    ``-Wl,-R<dir>`` options whose directory is not ``$ORIGIN``-relative.

    A Python built with ``--enable-shared`` (pyenv, for example) puts
    ``-Wl,-rpath,<its libdir>`` into LDSHARED; an extension module needs no run path, and
    an absolute one must not end up in a wheel."""
    kept: list[str] = []
    for arg in command:
        m = _RPATH_OPTION.fullmatch(arg)
        if m is None or m.group(1).startswith("$ORIGIN"):
            kept.append(arg)
    return kept
