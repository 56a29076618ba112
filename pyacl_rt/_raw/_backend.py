"""What the loaded library is: :func:`backend_info` (backend, path, CANN version, symbols).

Above :mod:`pyacl_rt.lowlevel` (it loads the library and asks it) and
:mod:`pyacl_rt._raw._loader` (how the library was chosen, version parsing). Imported
lazily by ``pyacl_rt.backend_info()``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from packaging.version import Version

from .. import lowlevel
from ._loader import Attempt, parse_cann_version

__all__ = ["BackendInfo", "backend_info"]


# --------------------------------------------------------------- backend_info
@dataclass(frozen=True)
class BackendInfo:
    """What :func:`backend_info` reports about the loaded library."""

    backend: Literal["real", "mock"]
    path: str
    found_via: str
    cann_version: str | None
    """The raw version string (``None`` if it could not be determined)."""
    version: Version | None
    """``cann_version`` parsed by :func:`parse_cann_version`."""
    version_source: str
    symbols: Mapping[str, bool] = field(repr=False)
    """Every binding function -> resolved in the loaded library(ies)."""
    libraries: Mapping[str, str | None] = field(repr=False)
    """Library file name -> path that was loaded (``None`` if absent)."""
    attempts: tuple[Attempt, ...] = field(default=(), repr=False)

    def supports(self, name: str) -> bool:
        """True if the loaded library exports the function ``name``."""
        return bool(self.symbols.get(name, False))

    def cann_at_least(self, version: str) -> bool:
        """True if the CANN version is known and ``>= version`` (any CANN scheme)."""
        if self.version is None:
            return False
        return self.version >= parse_cann_version(version)

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(sorted(n for n, ok in self.symbols.items() if not ok))


def _version_from_files(lib_path: str) -> tuple[str | None, str]:
    """Look for ``share/info/runtime/version.info`` walking up from the library (like
    ``aclGetCannAttribute``), then ``*install.info`` files."""
    d = Path(os.path.realpath(lib_path)).parent
    for _ in range(8):
        for rel in ("share/info/runtime/version.info", "runtime/version.info", "version.info"):
            f = d / rel
            if f.is_file():
                try:
                    for line in f.read_text(errors="replace").splitlines():
                        if line.strip().lower().startswith("version="):
                            return line.split("=", 1)[1].strip(), str(f)
                except OSError:
                    pass
        if d.parent == d:
            break
        d = d.parent
    return None, ""


_info_lock = threading.Lock()
_info: BackendInfo | None = None


def backend_info() -> BackendInfo:
    """Load the library if needed and report backend, path, CANN version and symbols."""
    global _info
    with _info_lock:
        if _info is not None:
            return _info
        lowlevel.load()
        sel = lowlevel.selection()
        version, source = lowlevel.cann_version_from_library()
        if version is None:
            version, source = _version_from_files(sel.path)
        parsed: Version | None = None
        if version:
            try:
                parsed = parse_cann_version(version)
            except ValueError:
                parsed = None
        backend: Literal["real", "mock"] = "mock" if lowlevel.is_mock_library() else sel.backend
        _info = BackendInfo(
            backend=backend,
            path=sel.path,
            found_via=sel.found_via,
            cann_version=version,
            version=parsed,
            version_source=source or "unknown",
            symbols={n: ok for n, (ok, _lib) in lowlevel.symbols().items()},
            libraries=lowlevel.loaded_libraries(),
            attempts=sel.attempts,
        )
        return _info
