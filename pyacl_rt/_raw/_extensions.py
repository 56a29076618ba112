"""The two compiled modules, imported once, with a clear error when they are not built.

``ffi`` / ``lib`` come from the cffi module :mod:`pyacl_rt._raw._lowlevel_cffi` (the C
dispatch table; importing it loads no AscendCL library), ``fast`` is the hand-written
:mod:`pyacl_rt._raw._fastcall`. Both are compiled by ``pip install .`` /
``pip install -e .``; a source checkout that was never installed has neither, and
importing pyacl_rt there raises :class:`ExtensionNotBuiltError` saying so and how to
build them.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["ExtensionNotBuiltError", "fast", "ffi", "lib"]


class ExtensionNotBuiltError(ImportError):
    """pyacl_rt's compiled extensions are missing (an unbuilt source checkout)."""


def _not_built(exc: ImportError) -> ExtensionNotBuiltError:
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    root = os.path.dirname(pkg)
    if os.path.isfile(os.path.join(root, "setup.py")):
        where = (
            f"pyacl_rt is imported from the source tree {pkg}, whose compiled extensions "
            f"were never built. Build them in place with `pip install -e .` in {root} "
            "(or install the package with `pip install .`)"
        )
    else:
        where = (
            f"the installation in {pkg} is incomplete: reinstall pyacl_rt "
            "(`pip install --force-reinstall pyacl_rt`, or `pip install -e .` in a checkout)"
        )
    return ExtensionNotBuiltError(
        f"pyacl_rt's compiled extensions (pyacl_rt._raw._lowlevel_cffi and "
        f"pyacl_rt._raw._fastcall) are not built ({exc}): {where}.",
        name=exc.name,
    )


try:
    from . import _fastcall
    from ._lowlevel_cffi import ffi as _ffi
    from ._lowlevel_cffi import lib as _lib
except ImportError as _exc:
    raise _not_built(_exc) from _exc

ffi: Any = _ffi
lib: Any = _lib
fast = _fastcall
