"""Which copy of pyacl_rt is imported, and whether it hides an installed one.

The classic first-hour trap: ``pip install .`` in a checkout installs a built copy into
site-packages, but Python puts the current directory (``python -m ...``, ``python -c``)
or the script's directory (``python script.py``) first on ``sys.path``, so from inside
the checkout ``import pyacl_rt`` finds the checkout's *unbuilt* source tree instead.
:func:`unbuilt_message` explains exactly that (with the two ways out) for
:class:`~pyacl_rt.errors.ExtensionNotBuiltError`; :func:`other_installations` lets
``python -m pyacl_rt.mock --cflags`` use the installed copy's bundled mock from there.

Standard library only, and nothing compiled: it runs when the extensions are missing.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys
from pathlib import Path

__all__ = ["PACKAGE_DIR", "is_built", "other_installations", "running_module", "unbuilt_message"]

#: The directory of the pyacl_rt package that is being imported (this copy).
PACKAGE_DIR = Path(__file__).resolve().parent.parent

#: The compiled modules ``import pyacl_rt`` needs (in ``_raw/``).
_REQUIRED = ("_lowlevel_cffi", "_fastcall")


def is_built(package_dir: Path) -> bool:
    """True if ``package_dir`` (a ``pyacl_rt`` directory) has the compiled extensions
    ``import pyacl_rt`` needs, for this interpreter's extension suffixes."""
    raw = package_dir / "_raw"
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    return all(any((raw / f"{name}{sfx}").is_file() for sfx in suffixes) for name in _REQUIRED)


def _candidate_dirs() -> list[Path]:
    """``pyacl_rt`` package directories importable by this interpreter, in the order the
    import system would consider them: plain ``sys.path`` entries, then packages mapped
    by other meta-path finders (setuptools' editable installs)."""
    found: list[Path] = []
    for entry in sys.path:
        found.append(Path(entry or os.getcwd()) / "pyacl_rt")
    for finder in sys.meta_path:
        if finder is importlib.machinery.PathFinder or not hasattr(finder, "find_spec"):
            continue
        try:
            spec = finder.find_spec("pyacl_rt", None)
        except Exception:  # a third-party finder that does not like the question
            continue
        for location in (spec.submodule_search_locations or []) if spec is not None else []:
            found.append(Path(location))
    return found


def other_installations(package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """Built copies of pyacl_rt this interpreter could import, other than
    ``package_dir``: their package directories, first the one Python would pick."""
    try:
        own = package_dir.resolve()
    except OSError:
        own = package_dir
    seen = {own}
    result: list[Path] = []
    for cand in _candidate_dirs():
        try:
            cand = cand.resolve()
        except OSError:
            continue
        if cand in seen:
            continue
        seen.add(cand)
        if (cand / "__init__.py").is_file() and is_built(cand):
            result.append(cand)
    return result


def running_module() -> str | None:
    """The module of ``python -m MODULE`` while Python is still importing its parent
    packages (``sys.argv[0]`` is ``"-m"`` then), else None."""
    argv = sys.argv
    orig = getattr(sys, "orig_argv", None)
    if not orig or not argv or argv[0] != "-m" or len(orig) < len(argv):
        return None
    token = orig[len(orig) - len(argv)]  # orig ends with [MODULE, *argv[1:]]
    if token.startswith("-"):  # "-mMODULE" (or "-ImMODULE"): the name follows the m
        token = token.partition("m")[2]
    return token or None


def unbuilt_message(reason: str, package_dir: Path = PACKAGE_DIR) -> str:
    """The text of :class:`~pyacl_rt.errors.ExtensionNotBuiltError` for this copy.

    Three cases: an unbuilt source tree that hides an installed, built copy (the
    checkout is first on ``sys.path``); an unbuilt source tree and nothing else; an
    installed copy that lost its extensions."""
    root = package_dir.parent
    modules = "pyacl_rt._raw._lowlevel_cffi and pyacl_rt._raw._fastcall"
    detail = f" (import error: {reason})"
    if not (root / "setup.py").is_file():
        return (
            f"pyacl_rt's compiled extensions ({modules}) are not built: the installation "
            f"in {package_dir} is incomplete. Reinstall pyacl_rt (`pip install "
            f"--force-reinstall pyacl_rt`, or `pip install -e .` in a checkout).{detail}"
        )
    others = other_installations(package_dir)
    if others:
        return (
            f"Python imported the source tree {package_dir} instead of the pyacl_rt "
            f"installed in {others[0].parent}: {root} comes first on sys.path (Python "
            "puts the current directory, or the script's directory, there), so the "
            f"checkout shadows the installed package, and its compiled extensions "
            f"({modules}) are not built. Two ways out: run from another directory (`cd` "
            f"out of {root}) to use the installed copy, or build the checkout in place "
            f"with `pip install -e .` in {root} to use the checkout itself.{detail}"
        )
    return (
        f"pyacl_rt is imported from the source tree {package_dir}, whose compiled "
        f"extensions ({modules}) are not built. Build them in place with `pip install -e "
        f".` in {root}. (`pip install .` installs a separate, built copy, but Python does "
        f"not import it while {root} comes first on sys.path, e.g. when you run from "
        f"there.){detail}"
    )
