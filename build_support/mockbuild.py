"""Build the bundled mock runtime with its own ``mock_libascendcl/CMakeLists.txt``.

Used by setup.py's build_ext step, so the CMakeLists is the one build description of the
mock: configure (``MOCK_BUILD_TESTS=OFF``, ``MOCK_WERROR=OFF``: a user's compiler may be
newer than CI's), build, and ``cmake --install`` into the package's ``_mock`` directory,
which then has the CANN layout (``set_env.sh``, ``lib64/libascendcl.so`` and the other
libraries, ``include/acl/*.h``, ``include/securec.h``, version files,
``share/cmake/mock_libascendcl/``, ...; mock README "The install prefix"). A wheel cannot
hold symbolic links, so a build for a wheel installs the prefix without CANN's
``<arch>-linux/{include,lib64}`` links (``symlinks=False``); in-place (editable) builds
have them.

Every build starts from an empty CMake cache (object files are reused), so ``CC``,
``CFLAGS`` and ``LDFLAGS`` from the environment always reach the mock build the way CMake
reads them on a first configure. CMake comes from the ``cmake`` PyPI package (a build
requirement) when it is importable, else from ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DMOCK_BUILD_TESTS=OFF",
    "-DMOCK_WERROR=OFF",
    "-DMOCK_SANITIZE=",
)


def cmake_command() -> str:
    """Path of the ``cmake`` executable to use."""
    try:
        import cmake  # the PyPI package

        exe = Path(cmake.CMAKE_BIN_DIR) / "cmake"
        if exe.is_file():
            return str(exe)
    except ImportError:
        pass
    found = shutil.which("cmake")
    if found is None:
        raise RuntimeError(
            "building the bundled mock runtime needs CMake >= 3.16: `pip install cmake` "
            "(it is a build requirement in pyproject.toml) or install it from your distribution"
        )
    return found


def _run(cmd: list[str], verbose: bool) -> None:
    if verbose:
        print("$ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-20000:] + proc.stderr[-20000:])
        raise RuntimeError(f"mock build failed: {' '.join(cmd)}")
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)


def build_mock(
    mock_root: Path, prefix: Path, build_dir: Path, verbose: bool = True, symlinks: bool = True
) -> None:
    """Configure, build and install mock_libascendcl (``mock_root``) into ``prefix``.

    ``prefix`` is replaced as a whole: stale files of an earlier build never survive, and a
    process that has the old libraries mapped keeps its (unlinked) copies. ``symlinks``:
    install the ``<arch>-linux/{include,lib64}`` links (a wheel would turn them into
    copies of the directories, so that one process could load two copies of the runtime).
    """
    cmake = cmake_command()
    mock_root, prefix, build_dir = mock_root.resolve(), prefix.resolve(), build_dir.resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    (build_dir / "CMakeCache.txt").unlink(missing_ok=True)  # re-read CC / CFLAGS / LDFLAGS
    jobs = str(max(1, os.cpu_count() or 1))
    links = f"-DMOCK_INSTALL_SYMLINKS={'ON' if symlinks else 'OFF'}"
    _run([cmake, "-S", str(mock_root), "-B", str(build_dir), *CMAKE_OPTIONS, links], verbose)
    _run([cmake, "--build", str(build_dir), "--parallel", jobs], verbose)
    if prefix.exists():
        shutil.rmtree(prefix)
    _run([cmake, "--install", str(build_dir), "--prefix", str(prefix)], verbose)
