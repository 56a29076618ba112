"""The two compiled modules, imported once, with a clear error when they are not built.

``ffi`` / ``lib`` come from the cffi module :mod:`pyacl_rt._raw._lowlevel_cffi` (the C
dispatch table; importing it loads no AscendCL library), ``fast`` is the hand-written
:mod:`pyacl_rt._raw._fastcall`. Both are compiled by ``pip install .`` /
``pip install -e .``; a source checkout that was never built has neither, and
importing pyacl_rt there raises :class:`~pyacl_rt.errors.ExtensionNotBuiltError` saying
which copy was imported, whether it hides an installed one (the checkout first on
``sys.path``) and the ways out (:mod:`pyacl_rt._raw._shadow`).
"""

from __future__ import annotations

from typing import Any

from ..errors import ExtensionNotBuiltError

__all__ = ["ExtensionNotBuiltError", "fast", "ffi", "lib"]


def _not_built(exc: ImportError) -> ExtensionNotBuiltError:
    from ._shadow import unbuilt_message  # only on failure: says which copy and why

    return ExtensionNotBuiltError(unbuilt_message(str(exc)), name=exc.name)


try:
    from . import _fastcall
    from ._lowlevel_cffi import ffi as _ffi
    from ._lowlevel_cffi import lib as _lib
except ImportError as _exc:
    raise _not_built(_exc) from _exc

ffi: Any = _ffi
lib: Any = _lib
fast = _fastcall
