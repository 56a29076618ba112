"""cffi build script for ``pyacl_rt._raw._lowlevel_cffi`` (out-of-line API mode).

Run by setuptools (``cffi_modules`` in setup.py); not imported at run time. The C
source and the cdef - a dispatch table filled by ``dlopen``/``dlsym`` and one wrapper
per binding function - are generated from the ABI tables by
``build_support/lowlevel_sources.py`` (see its docstring for the design).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:  # run directly (``python _lowlevel_build.py``): find build_support
    sys.path.insert(0, ROOT)

from build_support.lowlevel_sources import build_sources  # noqa: E402


def _load_abi_data() -> ModuleType:
    # Load by path: importing the pyacl_rt package at build time must not be needed.
    path = os.path.join(HERE, "_abi_data.py")
    spec = importlib.util.spec_from_file_location("_pyacl_rt_abi_data_build", path)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise RuntimeError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # NamedTuple creation looks the module up
    spec.loader.exec_module(mod)
    return mod


ffibuilder = FFI()
_cdef, _source, _n = build_sources(_load_abi_data())
ffibuilder.cdef(_cdef)
ffibuilder.set_source(
    "pyacl_rt._raw._lowlevel_cffi",
    _source,
    libraries=["dl"],
    py_limited_api=False,  # full C API: faster argument conversion than the limited API
    extra_compile_args=["-O2", "-Wno-unused-function", "-Wno-unused-parameter"],
)

if __name__ == "__main__":
    ffibuilder.compile(
        tmpdir=os.path.join(HERE, os.pardir, os.pardir, "build", "cffi"), verbose=True
    )
