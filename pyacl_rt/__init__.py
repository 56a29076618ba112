"""pyacl_rt: a fast cffi binding over AscendCL with Pythonic objects and a bundled mock.

Layers (lowest first): :mod:`pyacl_rt.lowlevel` (raw 1:1 calls), :mod:`pyacl_rt.runtime`
and the object modules above it. The bundled mock runtime and its build flags:
``python -m pyacl_rt.mock --cflags``.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
