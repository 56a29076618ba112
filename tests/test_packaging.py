"""Packaging: py.typed, the bundled mock's pkg-config-style flags (a C program and a CMake
project built against them), and a wheel built from the sdist that works on its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

import pyacl_rt

PKG = Path(pyacl_rt.__file__).resolve().parent
REPO = PKG.parent

C_PROGRAM = r"""
#include <stdio.h>
#include "acl/acl.h"

int main(void) {
    uint32_t n = 0;
    void *p = NULL;
    if (aclInit(NULL) != ACL_SUCCESS) return 1;
    if (aclrtGetDeviceCount(&n) != ACL_SUCCESS) return 2;
    if (aclrtSetDevice(0) != ACL_SUCCESS) return 3;
    if (aclrtMalloc(&p, 100, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return 4;
    if (aclrtFree(p) != ACL_SUCCESS) return 5;
    if (aclrtResetDevice(0) != ACL_SUCCESS) return 6;
    printf("devices=%u soc=%s\n", n, aclrtGetSocName());
    return aclFinalize() == ACL_SUCCESS ? 0 : 7;
}
"""


def _mock_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyacl_rt.mock", *args], capture_output=True, text=True
    )


def _run_env(clean_env: Any, **extra: str) -> dict[str, str]:
    env: dict[str, str] = clean_env(**extra)
    return env


def test_py_typed_shipped() -> None:
    assert (PKG / "py.typed").is_file()


def test_mock_cli_paths() -> None:
    inc = _mock_cli("--include-dir")
    assert inc.returncode == 0, inc.stderr
    assert (Path(inc.stdout.strip()) / "acl" / "acl.h").is_file()
    assert (Path(inc.stdout.strip()) / "acl" / "acl_mock.h").is_file()
    libdir = Path(_mock_cli("--lib-dir").stdout.strip())
    for lib in ("libascendcl.so", "libmsprofiler.so", "libascend_dump.so"):
        assert (libdir / lib).is_file()
    prefix = Path(_mock_cli("--cmake-prefix").stdout.strip())
    assert (
        prefix / "lib" / "cmake" / "mock_libascendcl" / "mock_libascendclConfig.cmake"
    ).is_file()
    flags = _mock_cli("--cflags", "--libs").stdout.split()
    assert flags[0] == f"-I{inc.stdout.strip()}" and "-lascendcl" in flags
    none = _mock_cli()
    assert none.returncode == 2 and "--cflags" in none.stderr


def test_mock_flags_build_a_c_program_that_runs(tmp_path: Path, clean_env: Any) -> None:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    src = tmp_path / "prog.c"
    src.write_text(C_PROGRAM)
    flags = _mock_cli("--cflags", "--libs")
    assert flags.returncode == 0, flags.stderr
    exe = tmp_path / "prog"
    subprocess.run(
        [
            cc,
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            str(src),
            "-o",
            str(exe),
            *flags.stdout.split(),
        ],
        check=True,
    )
    # no LD_LIBRARY_PATH: the rpath from --libs finds the bundled mock
    out = subprocess.run([str(exe)], capture_output=True, text=True, env=clean_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "devices=8 soc=Ascend910B1"
    out = subprocess.run(
        [str(exe)], capture_output=True, text=True, env=clean_env(ASCEND_MOCK_DEVICE_COUNT="3")
    )
    assert out.stdout.startswith("devices=3 ")


def test_cmake_find_package_against_bundled_mock(tmp_path: Path, clean_env: Any) -> None:
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not available")
    (tmp_path / "prog.c").write_text(C_PROGRAM)
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\n"
        "project(uses_mock C)\n"
        "find_package(mock_libascendcl 1.0 REQUIRED)\n"
        "add_executable(prog prog.c)\n"
        "target_link_libraries(prog PRIVATE mock_libascendcl::ascendcl)\n"
    )
    prefix = _mock_cli("--cmake-prefix").stdout.strip()
    build = tmp_path / "build"
    env = clean_env()
    subprocess.run(
        [cmake, "-S", str(tmp_path), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}"],
        check=True,
        capture_output=True,
        env=env,
    )
    subprocess.run([cmake, "--build", str(build)], check=True, capture_output=True, env=env)
    out = subprocess.run([str(build / "prog")], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.startswith("devices=8"), out.stderr


@pytest.mark.slow
def test_sdist_then_wheel_work_standalone(tmp_path: Path, clean_env: Any) -> None:
    """`python -m build` path: sdist from the checkout, wheel from the unpacked sdist
    (proves the sdist is complete), wheel installed alone and used from another dir.
    Takes ~30 s (compiles the mock and the cffi module); deselect with -m 'not slow'."""
    pytest.importorskip("build")
    if not (REPO / "pyproject.toml").is_file():
        pytest.skip("not running from a checkout")
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--sdist",
            "--no-isolation",
            "--skip-dependency-check",
            "--outdir",
            str(dist),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as tf:
        names = tf.getnames()
        assert not [n for n in names if n.endswith(".so") or "/_mock/" in n], (
            "build outputs in sdist"
        )
        tf.extractall(tmp_path / "src", filter="data")
    (srcdir,) = (tmp_path / "src").iterdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "-w",
            str(dist),
            str(srcdir),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        wn = set(zf.namelist())
    for required in (
        "pyacl_rt/py.typed",
        "pyacl_rt/_mock/lib/libascendcl.so",
        "pyacl_rt/_mock/lib/libmsprofiler.so",
        "pyacl_rt/_mock/lib/libascend_dump.so",
        "pyacl_rt/_mock/include/acl/acl.h",
        "pyacl_rt/_mock/include/acl/acl_mock.h",
        "pyacl_rt/_mock/lib/cmake/mock_libascendcl/mock_libascendclConfig.cmake",
    ):
        assert required in wn, required
    for ext in ("_raw/_lowlevel_cffi", "_raw/_fastcall", "_dlpack_c"):
        assert any(n.startswith(f"pyacl_rt/{ext}.") and n.endswith(".so") for n in wn), ext
    assert "pyacl_rt/_dlpack_c.pyi" in wn

    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = clean_env(PYACL_RT_BACKEND="mock")
    env["PYTHONPATH"] = str(site)  # only the installed wheel, not the checkout
    code = (
        "import pyacl_rt, json; from pyacl_rt import lowlevel as ll\n"
        "from pyacl_rt._raw import _backend\n"
        "s = ll.scratch(); rc = ll.aclrtGetDeviceCount(s.u32)\n"
        "i = _backend.backend_info()\n"
        "print(json.dumps([pyacl_rt.__file__, rc, s.u32[0], i.backend, i.path]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    import json

    file_, rc, n, backend, path = json.loads(out.stdout)
    assert file_.startswith(str(site)) and path.startswith(str(site))
    assert rc == 0 and n == 8 and backend == "mock"
