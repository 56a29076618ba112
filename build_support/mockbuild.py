"""Compile the bundled mock runtime (mock_libascendcl) without CMake.

Used by setup.py's build_ext step so that ``pip install .`` / ``pip install -e .``
produce ``pyacl_rt/_mock/lib/{libascendcl,libmsprofiler,libascend_dump}.so`` and
``pyacl_rt/_mock/include/acl/*.h`` with no manual make step.  The flags mirror
mock_libascendcl/CMakeLists.txt: ``-std=c11 -D_GNU_SOURCE -fvisibility=hidden -O2
-pthread`` (warnings are on but not fatal here: a user's compiler may be newer
than CI's; the CMake/ctest build keeps -Werror).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CFLAGS = [
    "-std=c11",
    "-D_GNU_SOURCE",
    "-fvisibility=hidden",
    "-O2",
    "-pthread",
    "-fPIC",
    "-Wall",
    "-Wextra",
]
LDLIBS = ["-pthread", "-ldl", "-lm"]

# (library file, source directory relative to mock_libascendcl/, needs libascendcl)
LIBRARIES = (
    ("libascendcl.so", "src", False),
    ("libmsprofiler.so", "src/msprofiler", True),
    ("libascend_dump.so", "src/ascend_dump", True),
)


def compiler_command() -> list[str]:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise RuntimeError(f"mock build failed: {shlex.join(cmd)}")
    if proc.stderr.strip():
        sys.stderr.write(proc.stderr)


def build_mock(mock_root: Path, out_pkg_dir: Path, build_temp: Path, verbose: bool = True) -> None:
    """Build the three mock libraries into ``out_pkg_dir/_mock/lib`` and copy the
    public headers to ``out_pkg_dir/_mock/include``."""
    mock_root = mock_root.resolve()
    lib_dir = out_pkg_dir / "_mock" / "lib"
    inc_out = out_pkg_dir / "_mock" / "include"
    lib_dir.mkdir(parents=True, exist_ok=True)
    cc = compiler_command()
    include = ["-I" + str(mock_root / "include"), "-I" + str(mock_root / "src")]
    jobs = max(1, os.cpu_count() or 1)

    for libname, subdir, needs_acl in LIBRARIES:
        src_dir = mock_root / subdir
        sources = sorted(src_dir.glob("*.c"))
        if not sources:
            if libname == "libascendcl.so":
                raise RuntimeError(f"no mock sources found in {src_dir}")
            continue
        obj_dir = build_temp / "mock" / subdir.replace("/", "_")
        obj_dir.mkdir(parents=True, exist_ok=True)
        objects = [obj_dir / (s.stem + ".o") for s in sources]

        def compile_one(pair: tuple[Path, Path]) -> None:
            src, obj = pair
            _run([*cc, *CFLAGS, *include, "-c", str(src), "-o", str(obj)])

        if verbose:
            print(f"building mock {libname} from {len(sources)} sources", flush=True)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(compile_one, zip(sources, objects, strict=True)))
        out = lib_dir / libname
        tmp = out.with_suffix(".so.tmp")
        cmd = [*cc, "-shared", "-o", str(tmp), *map(str, objects), f"-Wl,-soname,{libname}"]
        if needs_acl:
            cmd += ["-L" + str(lib_dir), "-lascendcl", "-Wl,-rpath,$ORIGIN"]
        cmd += LDLIBS
        _run(cmd)
        os.replace(tmp, out)  # atomic: a running process never sees a half-written file

    if inc_out.exists():
        shutil.rmtree(inc_out)
    shutil.copytree(mock_root / "include", inc_out)
