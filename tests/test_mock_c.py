"""Builds mock_libascendcl with CMake and runs its C test programs.

Three configurations: ``plain``, ``asan`` (AddressSanitizer + UBSan) and ``tsan``
(ThreadSanitizer). Each is configured and built once per session (incrementally: the
build trees live in a per-checkout temporary directory, or under
``$PYACL_RT_MOCK_C_BUILD_DIR`` when set), then every test executable that CMake
registers (``tests/c/test_*.c``, ``tests/abi/*.c|*.cpp``, ``tests/programs/*.c|*.cpp``)
is one pytest test per configuration. The exported symbols of the plain build are
compared with ``mock_libascendcl/abi/exports_<lib>.txt``. The libraries alone are also
built as ``Debug`` and ``Release`` (no tests run there) to catch build-type specific
warnings.

The source layout rules of mock_libascendcl/src (one folder per subsystem, function
prefixes matching the declaring header, private headers used only in their folder, the
layer order and its one allowed upward call, every lock in src/core/lock_order.h with a
stress test per nesting pair, one unlock in functions with many exits; see the mock
README "Source layout") are checked without a build.

Selection: the sanitizer runs carry the ``asan`` / ``tsan`` marks and their ids contain
the configuration name, e.g. ``pytest tests/test_mock_c.py -k "plain"`` or
``-m "not asan and not tsan"``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MOCK = REPO / "mock_libascendcl"
JOBS = "2"
RUN_TIMEOUT = 180
BUILD_TIMEOUT = 900

CONFIGS: dict[str, dict[str, str]] = {
    "plain": {"MOCK_SANITIZE": "", "CMAKE_BUILD_TYPE": "RelWithDebInfo"},
    # -O1 keeps the sanitizer builds quick to compile and still fast enough to run
    "asan": {
        "MOCK_SANITIZE": "asan",
        "CMAKE_BUILD_TYPE": "Debug",
        "CMAKE_C_FLAGS": "-O1",
        "CMAKE_CXX_FLAGS": "-O1",
    },
    "tsan": {
        "MOCK_SANITIZE": "tsan",
        "CMAKE_BUILD_TYPE": "Debug",
        "CMAKE_C_FLAGS": "-O1",
        "CMAKE_CXX_FLAGS": "-O1",
    },
}

SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:halt_on_error=1",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    "TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1",
}


def _test_programs() -> list[str]:
    """The ctest names (group/name) CMakeLists.txt derives from the source files."""
    names: list[str] = []
    for group, patterns in (
        ("c", ("test_*.c",)),
        ("abi", ("*.c", "*.cpp")),
        ("programs", ("*.c", "*.cpp")),
    ):
        for pattern in patterns:
            for src in sorted((MOCK / "tests" / group).glob(pattern)):
                stem = src.stem + ("_cpp" if src.suffix == ".cpp" else "")
                names.append(f"{group}/{stem}")
    return sorted(set(names))


def _build_root() -> Path:
    override = os.environ.get("PYACL_RT_MOCK_C_BUILD_DIR")
    if override:
        return Path(override)
    tag = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"pyacl_rt_mock_c_{tag}"


def _clean_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ASCEND_", "PYACL_RT_", "ASAN_", "TSAN_", "UBSAN_"))
        and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")
    }
    env.update(SANITIZER_ENV)
    return env


class _Builds:
    """Builds each configuration at most once per session (thread-safe, lazy)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock = threading.Lock()
        self.results: dict[str, tuple[bool, Path, str]] = {}

    def get(self, config: str) -> Path:
        with self.lock:
            if config not in self.results:
                self.results[config] = self._build(config)
        ok, path, log = self.results[config]
        if not ok:
            pytest.fail(f"building the mock ({config}) failed:\n{log[-6000:]}", pytrace=False)
        return path

    def _build(self, config: str) -> tuple[bool, Path, str]:
        if shutil.which("cmake") is None:
            pytest.skip("cmake is not installed")
        build = self.root / config
        build.mkdir(parents=True, exist_ok=True)
        defs = [f"-D{k}={v}" for k, v in CONFIGS[config].items()]
        steps = [
            ["cmake", "-S", str(MOCK), "-B", str(build), "-DMOCK_BUILD_TESTS=ON", *defs],
            ["cmake", "--build", str(build), "-j", JOBS],
        ]
        log = ""
        for cmd in steps:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT, env=_clean_env()
            )
            log += f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
            if proc.returncode != 0:
                return False, build, log
        return True, build, log


@pytest.fixture(scope="session")
def mock_builds() -> _Builds:
    return _Builds(_build_root())


def _params() -> list[object]:
    params: list[object] = []
    for config in CONFIGS:
        marks = [getattr(pytest.mark, config)] if config != "plain" else []
        for name in _test_programs():
            params.append(pytest.param(config, name, id=f"{config}-{name}", marks=marks))
    return params


@pytest.mark.parametrize(("config", "program"), _params())
def test_c_program(mock_builds: _Builds, config: str, program: str) -> None:
    build = mock_builds.get(config)
    group, name = program.split("/", 1)
    exe = build / "tests" / group / name
    assert exe.exists(), f"{exe} was not built (is it registered in CMakeLists.txt?)"
    proc = subprocess.run(
        [str(exe)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=_clean_env(),
        cwd=build,
    )
    output = f"--- stdout\n{proc.stdout[-8000:]}\n--- stderr\n{proc.stderr[-8000:]}"
    assert proc.returncode == 0, f"{program} ({config}) exited with {proc.returncode}\n{output}"
    assert "ERROR: AddressSanitizer" not in proc.stderr, output
    assert "WARNING: ThreadSanitizer" not in proc.stderr, output
    assert "runtime error:" not in proc.stderr, output  # UBSan
    summary = re.search(r"(\d+) passed, (\d+) failed", proc.stdout)
    if summary is not None:  # programs using tests/c/mock_test.h
        assert summary.group(2) == "0", output
        assert int(summary.group(1)) > 0, output


# The race sanitizer finds nothing in correct programs: the example programs and every C
# test that does not pin its own environment (tests/c/mock_test.h mt_mock_env unsets the
# switches) run with ASCEND_MOCK_SANITIZE=1 (plain build). The seeded bugs of
# test_sanitizer_corpus are the exception, by design.
def _sanitizer_clean_programs() -> list[str]:
    out = []
    for name in _test_programs():
        group, stem = name.split("/", 1)
        if group == "abi" or stem in ("test_sanitizer_corpus", "test_lock_order"):
            continue
        src = (
            MOCK
            / "tests"
            / group
            / (stem.removesuffix("_cpp") + (".cpp" if stem.endswith("_cpp") else ".c"))
        )
        if "mt_mock_env(" not in src.read_text():
            out.append(name)
    return out


@pytest.mark.parametrize("program", _sanitizer_clean_programs())
def test_c_program_clean_under_race_sanitizer(mock_builds: _Builds, program: str) -> None:
    build = mock_builds.get("plain")
    group, name = program.split("/", 1)
    env = _clean_env()
    env["ASCEND_MOCK_SANITIZE"] = "1"
    proc = subprocess.run(
        [str(build / "tests" / group / name)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=env,
        cwd=build,
    )
    output = f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-8000:]}"
    assert proc.returncode == 0, output
    assert "race sanitizer" not in proc.stderr, output


@pytest.mark.parametrize("program", [p for p in _test_programs() if p.startswith("programs/")])
def test_example_program_under_all_diagnostics(
    mock_builds: _Builds, program: str, tmp_path: Path
) -> None:
    """The example programs behave the same under the virtual timing model with the
    profiler and the sanitizer on, and leave a profile."""
    build = mock_builds.get("plain")
    group, name = program.split("/", 1)
    env = _clean_env()
    env.update(
        ASCEND_MOCK_TIMING="virtual",
        ASCEND_MOCK_SANITIZE="1",
        ASCEND_PROFILER_FLAGS="enable",
        ASCEND_PROFILER_OUTPUT=str(tmp_path),
    )
    proc = subprocess.run(
        [str(build / "tests" / group / name)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=env,
        cwd=build,
    )
    output = f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-8000:]}"
    assert proc.returncode == 0, output
    assert "race sanitizer" not in proc.stderr, output
    traces = list(tmp_path.glob("mock_prof_*/trace.json"))
    assert traces, f"no profile written\n{output}"


# Build types users pick: each only configures and builds the three libraries (no tests),
# with -Werror, so that optimisation-dependent warnings (format-truncation at -O0,
# maybe-uninitialized at -O3) cannot come back unnoticed. A few seconds each.
BUILD_TYPES = ["Debug", "Release"]


@pytest.mark.parametrize("build_type", BUILD_TYPES)
def test_libraries_build(build_type: str) -> None:
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    build = _build_root() / f"libs-{build_type.lower()}"
    build.mkdir(parents=True, exist_ok=True)
    steps = [
        [
            "cmake",
            "-S",
            str(MOCK),
            "-B",
            str(build),
            "-DMOCK_BUILD_TESTS=OFF",
            "-DMOCK_SANITIZE=",
            f"-DCMAKE_BUILD_TYPE={build_type}",
        ],
        ["cmake", "--build", str(build), "-j", JOBS],
    ]
    for cmd in steps:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT, env=_clean_env()
        )
        assert proc.returncode == 0, (
            f"$ {' '.join(cmd)}\n{proc.stdout[-6000:]}{proc.stderr[-6000:]}"
        )
    for lib in LIBRARIES:
        assert (build / f"{lib}.so").exists(), f"{lib}.so was not built ({build_type})"


def _exported(lib: Path) -> set[str]:
    proc = subprocess.run(
        ["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True
    )
    names: set[str] = set()
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] not in ("A",):  # "A": version nodes
            names.add(parts[2].split("@", 1)[0])
    return names


# Every library the build and the install prefix have (README "The install prefix").
LIBRARIES = (
    "libascendcl",
    "libacl_rt",
    "libmsprofiler",
    "libprofapi",
    "libascend_dump",
    "libacl_tdt_channel",
    "libacl_tdt_queue",
    "libc_sec",
)
# Libraries whose functions are declared in a hand-written header (not in the ABI tables).
HEADER_EXPORTS = {
    "libacl_tdt_channel": ("include/acl/acl_tdt.h", "ACL_FUNC_VISIBILITY"),
    "libacl_tdt_queue": ("include/acl/acl_tdt_queue.h", "ACL_FUNC_VISIBILITY"),
    "libc_sec": ("include/securec.h", "SECUREC_API"),
}
# ELF filters (DT_FILTER): they export what their filtee exports.
FILTERS = {"libacl_rt": "libascendcl", "libprofapi": "libmsprofiler"}


def _declared(header: str, macro: str) -> set[str]:
    """Names of the functions a header declares with `macro`."""
    text = re.sub(r"/\*.*?\*/", " ", (MOCK / header).read_text(), flags=re.S)
    return set(re.findall(rf"^{macro}\s[^;(]*?\b(\w+)\(", text, re.M))


def _expected_exports(lib: str) -> set[str]:
    if lib in HEADER_EXPORTS:
        return _declared(*HEADER_EXPORTS[lib])
    expected_file = MOCK / "abi" / f"exports_{FILTERS.get(lib, lib)}.txt"
    return {
        line.strip()
        for line in expected_file.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }


def test_header_export_lists_are_complete() -> None:
    """The hand-written headers declare the documented functions: 23 in acl_tdt.h, 37 in
    acl_tdt_queue.h (acl_inventory.md), the securec set."""
    assert len(_expected_exports("libacl_tdt_channel")) == 23
    assert len(_expected_exports("libacl_tdt_queue")) == 37
    assert {"memcpy_s", "memset_s", "strcpy_s", "strncpy_s", "strcat_s", "sprintf_s"} <= (
        _expected_exports("libc_sec")
    )


@pytest.mark.parametrize("lib", LIBRARIES)
def test_exported_symbols(mock_builds: _Builds, lib: str) -> None:
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    build = mock_builds.get("plain")
    expected = _expected_exports(lib)
    exported = _exported(build / f"{lib}.so")
    extra = sorted(n for n in exported - expected if not n.startswith("aclmock"))
    missing = sorted(expected - exported)
    assert not missing, f"{lib}.so does not export: {missing}"
    assert not extra, f"{lib}.so exports names it should not: {extra}"
    if lib in ("libascendcl", "libacl_rt"):
        assert "aclmockGetStat" in exported
        assert "aclmockInjectFault" in exported
    if lib in FILTERS:  # the filter carries exactly its filtee's symbols
        assert exported == _exported(build / f"{FILTERS[lib]}.so")
        dynamic = subprocess.run(
            ["readelf", "-d", str(build / f"{lib}.so")], capture_output=True, text=True, check=True
        ).stdout
        assert f"Filter library: [{FILTERS[lib]}.so]" in dynamic, dynamic
        # no second runtime inside: every symbol is an alias of one function, which
        # only says that the loader ignored DT_FILTER and aborts
        nm = subprocess.run(
            ["nm", "-D", "--defined-only", str(build / f"{lib}.so")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        addresses = {ln.split()[0] for ln in nm.splitlines() if ln.split()[-1].startswith("acl")}
        assert len(addresses) == 1, f"{lib}.so defines {len(addresses)} distinct functions"
        source = (build / f"filter_{lib[3:]}.c").read_text()
        assert "this dynamic loader ignored DT_FILTER" in source and "abort();" in source


def test_libraries_need_no_static_tls(mock_builds: _Builds) -> None:
    """pyacl_rt dlopen()s libascendcl.so into a Python process whose static TLS surplus is
    small: a library with an initial-exec TLS variable (DF_STATIC_TLS) then fails to load
    ("cannot allocate memory in static TLS block"), as the first kernel-fault handler did."""
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    build = mock_builds.get("plain")
    for lib in ("libascendcl.so", "libmsprofiler.so", "libascend_dump.so"):
        out = subprocess.run(
            ["readelf", "-d", str(build / lib)], capture_output=True, text=True, check=True
        ).stdout
        assert "STATIC_TLS" not in out, f"{lib} needs static TLS:\n{out}"


def test_install_and_find_package(mock_builds: _Builds, tmp_path: Path) -> None:
    """`cmake --install` + find_package(mock_libascendcl) from a consumer project."""
    build = mock_builds.get("plain")
    prefix = tmp_path / "prefix"
    env = _clean_env()
    proc = subprocess.run(
        ["cmake", "--install", str(build), "--prefix", str(prefix)],
        capture_output=True,
        text=True,
        env=env,
        timeout=BUILD_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (prefix / "include" / "acl" / "acl.h").exists()
    assert (prefix / "include" / "acl" / "acl_mock.h").exists()
    libdirs = [d for d in (prefix / "lib", prefix / "lib64") if (d / "libascendcl.so").exists()]
    assert libdirs, "libascendcl.so was not installed"

    app = tmp_path / "app"
    app.mkdir()
    (app / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\n"
        "project(consumer C)\n"
        "find_package(mock_libascendcl REQUIRED)\n"
        "add_executable(consumer main.c)\n"
        "target_link_libraries(consumer PRIVATE mock_libascendcl::ascendcl)\n"
    )
    (app / "main.c").write_text(
        '#include <stdio.h>\n#include "acl/acl.h"\n#include "acl/acl_mock.h"\n'
        "int main(void) {\n"
        "  uint32_t n = 0; int32_t d = -1;\n"
        "  if (aclInit(NULL) != ACL_SUCCESS) return 1;\n"
        "  if (aclrtGetDeviceCount(&n) != ACL_SUCCESS || n != 8) return 2;\n"
        "  if (aclrtSetDevice(1) != ACL_SUCCESS || aclrtGetDevice(&d) != 0 || d != 1) return 3;\n"
        "  if (aclmockGetStat(1, ACLMOCK_STAT_CONTEXTS) != 1) return 4;\n"
        "  if (aclrtResetDevice(1) != ACL_SUCCESS || aclFinalize() != ACL_SUCCESS) return 5;\n"
        '  puts("consumer ok");\n  return 0;\n}\n'
    )
    steps = [
        ["cmake", "-S", str(app), "-B", str(app / "build"), f"-DCMAKE_PREFIX_PATH={prefix}"],
        ["cmake", "--build", str(app / "build")],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=BUILD_TIMEOUT)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run(
        [str(app / "build" / "consumer")], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "consumer ok" in proc.stdout


_TWIN_APP = r"""
#include <stdio.h>
#include "acl/acl.h"
#define N 100000u
int main(int argc, char **argv) {
  (void)argc;
  static float x[N], y[N], z[N];
  for (unsigned i = 0; i < N; i++) { x[i] = (float)i; y[i] = 1.0f; }
  aclrtStream s; aclrtBinHandle b; aclrtFuncHandle f; void *dx, *dy, *dz;
  if (aclInit(NULL) || aclrtSetDevice(0) || aclrtCreateStream(&s)) return 1;
  if (aclrtBinaryLoadFromFile(argv[1], NULL, &b) || aclrtBinaryGetFunction(b, "vector_add", &f)) {
    fprintf(stderr, "%s\n", aclGetRecentErrMsg()); return 2;
  }
  if (aclrtMalloc(&dx, sizeof x, 0) || aclrtMalloc(&dy, sizeof y, 0)) return 3;
  if (aclrtMalloc(&dz, sizeof z, 0)) return 3;
  aclrtMemcpy(dx, sizeof x, x, sizeof x, ACL_MEMCPY_HOST_TO_DEVICE);
  aclrtMemcpy(dy, sizeof y, y, sizeof y, ACL_MEMCPY_HOST_TO_DEVICE);
  struct { void *x, *y, *z; unsigned long long n; } args = {dx, dy, dz, N};
  if (aclrtLaunchKernelWithHostArgs(f, 8, s, NULL, &args, sizeof args, NULL, 0) ||
      aclrtSynchronizeStream(s)) { fprintf(stderr, "%s\n", aclGetRecentErrMsg()); return 4; }
  aclrtMemcpy(z, sizeof z, dz, sizeof z, ACL_MEMCPY_DEVICE_TO_HOST);
  for (unsigned i = 0; i < N; i++) if (z[i] != x[i] + 1.0f) return 5;
  aclrtFree(dx); aclrtFree(dy); aclrtFree(dz);
  if (aclrtBinaryUnLoad(b) || aclrtDestroyStream(s)) return 6;
  if (aclrtResetDevice(0) || aclFinalize()) return 6;
  puts("twin ok");
  return 0;
}
"""


def test_readme_twin_example(mock_builds: _Builds, tmp_path: Path) -> None:
    """The host twin of the mock README ("Kernels and host twins") builds into a shared
    object with the command given there, against an installed prefix, and a program
    built against the same prefix loads it and runs vector_add."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    build = mock_builds.get("plain")
    prefix = tmp_path / "prefix"
    env = _clean_env()
    proc = subprocess.run(
        ["cmake", "--install", str(build), "--prefix", str(prefix)],
        capture_output=True,
        text=True,
        env=env,
        timeout=BUILD_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (prefix / "include" / "acl" / "acl_mock_kernel.h").exists()
    section = (MOCK / "README.md").read_text().split("## Kernels and host twins", 1)[1]
    twin = re.search(r"```c\n(.*?)```", section, re.S)
    assert twin is not None, "no C twin example in the README section"
    (tmp_path / "twins.c").write_text(twin.group(1))
    lib = prefix / "lib64"
    steps = [
        # the README's command (prefix /opt/mock_acl there)
        [cc, "-shared", "-fPIC", f"-I{prefix}/include", "twins.c", "-o", "twins.so"],
        [
            cc,
            "-std=c11",
            f"-I{prefix}/include",
            "app.c",
            f"-L{lib}",
            "-lascendcl",
            f"-Wl,-rpath,{lib}",
            "-o",
            "app",
        ],
    ]
    (tmp_path / "app.c").write_text(_TWIN_APP)
    for cmd in steps:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run(
        [str(tmp_path / "app"), str(tmp_path / "twins.so")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "twin ok" in proc.stdout


# ------------------------------------------------------------------ source layout
# mock_libascendcl/src/<subsystem>/ holds the sources of one subsystem of
# libascendcl.so, one public internal header <subsystem>.h (what the other
# subsystems may call) and one private header <subsystem>_private.h (used inside the
# folder only). Every function either header declares starts with "<subsystem>_".

SRC = MOCK / "src"
SUBSYSTEMS = ("core", "stream", "mem", "misc", "notify", "ipc", "kernel", "graph", "diag")
# the other libraries with sources of their own (no headers); the two filters
# (libacl_rt.so, libprofapi.so) are generated at build time
LIBRARY_DIRS = ("msprofiler", "ascend_dump", "acl_tdt_channel", "acl_tdt_queue", "c_sec")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _strip_c(text: str) -> str:
    """C text without comments, string literals and preprocessor lines."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", "", text, flags=re.M)


def _top_level(text: str) -> list[tuple[str, bool]]:
    """The top-level declarations of stripped C text: (text, has_body) per
    declaration ending in ';' or in a '{...}' body at file scope."""
    out: list[tuple[str, bool]] = []
    depth = 0
    cur = ""
    for ch in text:
        if depth == 0:
            if ch == ";":
                out.append((cur.strip(), False))
                cur = ""
            elif ch == "{":
                depth = 1
            else:
                cur += ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            # a function body ends its declaration; a struct/enum/initializer body
            # does not (the declaration goes on up to its ';')
            aggregate = re.match(r"\s*(typedef|struct|enum|union)\b", cur) or "=" in cur
            if depth == 0 and not aggregate:
                out.append((cur.strip(), True))
                cur = ""
    return out


def _functions(text: str) -> list[tuple[str, bool, bool]]:
    """(name, is_static, has_body) of every function declared or defined at file scope."""
    found = []
    for decl, body in _top_level(_strip_c(text)):
        if re.match(r"(typedef|struct|enum|union|_Static_assert)\b", decl) or "(" not in decl:
            continue
        m = re.search(r"\b([A-Za-z_]\w*)\s*\(", decl)
        if m is None or re.search(r"=\s*$", decl[: m.start()]):
            continue
        found.append((m.group(1), bool(re.match(r"static\b", decl)), body))
    return found


def test_source_tree_has_one_folder_per_subsystem() -> None:
    """src/ holds only the subsystem and library folders; each subsystem has exactly
    its public and its private header; the library folders have no headers."""
    assert not list(SRC.glob("*.[ch]")), "sources belong in a subsystem folder"
    assert {p.name for p in SRC.iterdir() if p.is_dir()} == set(SUBSYSTEMS) | set(LIBRARY_DIRS)
    for sub in SUBSYSTEMS:
        headers = {p.name for p in (SRC / sub).glob("*.h")}
        extra = {"lock_order.h"} if sub == "core" else set()
        assert headers == {f"{sub}.h", f"{sub}_private.h"} | extra, sub
        assert list((SRC / sub).glob("*.c")), sub
        if sub != "core":  # every higher subsystem plugs in through its descriptor
            assert "MOCK_REGISTER_SUBSYSTEM(" in (SRC / sub / "hooks.c").read_text(), sub
    for lib in LIBRARY_DIRS:
        assert not list((SRC / lib).glob("*.h")), lib


@pytest.mark.parametrize("sub", SUBSYSTEMS)
def test_subsystem_function_prefixes(sub: str) -> None:
    """Every function declared in <sub>.h / <sub>_private.h starts with '<sub>_', and
    every non-static function defined in src/<sub>/ is either an exported ACL entry
    point (acl*) or carries that prefix (so it is declared in the subsystem's header)."""
    prefix = f"{sub}_"
    headers = sorted(p.name for p in (SRC / sub).glob("*.h"))
    declared = 0
    for header in headers:
        names = [name for name, _, _ in _functions((SRC / sub / header).read_text())]
        declared += len(names)
        wrong = [n for n in names if not n.startswith(prefix)]
        assert not wrong, f"{sub}/{header} declares {wrong}: rename them to {prefix}*"
    assert declared, headers  # (misc.h alone declares nothing: misc only registers hooks)
    for src in sorted((SRC / sub).glob("*.c")):
        wrong = [
            n
            for n, static, body in _functions(src.read_text())
            if body and not static and not n.startswith((prefix, "acl"))
        ]
        assert not wrong, f"{sub}/{src.name} defines {wrong}: not {prefix}* nor an ACL entry point"


def test_private_headers_stay_in_their_folder() -> None:
    """No file includes another subsystem's private header (nor a header by a path
    outside the subsystem folders)."""
    allowed_public = {f"{s}/{s}.h" for s in SUBSYSTEMS} | {"core/lock_order.h"}
    for path in sorted(SRC.rglob("*.[ch]")):
        folder = path.parent.name
        for inc in INCLUDE_RE.findall(path.read_text()):
            if inc.startswith("acl/") or inc == "securec.h":  # public headers (include/)
                continue
            ok = inc in allowed_public or inc == f"{folder}/{folder}_private.h"
            assert ok, f"{path.relative_to(SRC)} includes {inc!r}"


def test_layout_check_sees_violations() -> None:
    """The parser of the layout checks finds prototypes, inline definitions and
    non-static definitions, and skips typedefs, function pointers and macros."""
    text = """
    #define MOCK_X(a) \\
        foo_bar(a)
    typedef aclError (*mock_task_fn)(void *arg);
    typedef struct s { int (*cb)(int); } s;
    MOCK_HIDDEN aclError core_error(const char *f, ...) __attribute__((format(printf, 2, 3)));
    static inline int core_two(void) { if (x) { return 2; } return 1; }
    static const char *names[] = {"a(", "b"};
    MOCK_HIDDEN mock_stream *mock_stream_self(void);
    aclError aclrtFoo(void (*fn)(void *), void *arg)
    {
        return 0;
    }
    static void helper(void) {}
    """
    assert _functions(text) == [
        ("core_error", False, False),
        ("core_two", True, True),
        ("mock_stream_self", False, False),
        ("aclrtFoo", False, True),
        ("helper", True, True),
    ]


def test_readme_source_layout_matches_tree() -> None:
    """The tree in mock_libascendcl/README.md "Source layout" names exactly the files of
    each src/ folder."""
    text = (MOCK / "README.md").read_text()
    section = text.split("## Source layout", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    listed: dict[str, set[str]] = {}
    folder = ""
    for line in block.splitlines():
        m = re.match(r"\s{2}(\w+)/\s", line)
        if m:
            folder = m.group(1)
        if folder:
            listed.setdefault(folder, set()).update(re.findall(r"\b[\w]+\.[ch]\b", line))
    on_disk = {
        d.name: {p.name for p in d.iterdir() if p.suffix in (".c", ".h")}
        for d in SRC.iterdir()
        if d.is_dir()
    }
    assert listed == on_disk


# ---------------------------------------------------------------- layer order
# core < stream < mem < misc < notify < ipc < kernel < graph < diag: a file calls functions
# (and includes public headers) of its own layer or lower ones. The calls against that order
# are exactly the rows of the table in the README "Source layout" section; everything else
# goes through the subsystem hooks (core/core.h "subsystem.c").

# a call by name (not through a struct member such as a hook: `sub->stream_destroyed(s)`)
CALL_RE = re.compile(r"(?<![\w.>])((?:" + "|".join(SUBSYSTEMS) + r")_\w+|acl\w+)\s*\(")


def _acl_definitions() -> dict[str, str]:
    """Exported entry point -> the subsystem folder defining it."""
    found = {}
    for sub in SUBSYSTEMS:
        for src in (SRC / sub).glob("*.c"):
            for name, _static, body in _functions(src.read_text()):
                if body and name.startswith("acl"):
                    found[name] = sub
    return found


def _upward_calls(files: dict[str, str], acl_defs: dict[str, str]) -> set[tuple[str, str]]:
    """(file, callee) for every call from `files` (relative path -> C text) to a function
    of a higher subsystem, by the callee's prefix (or, for acl* entry points, the folder
    that defines it); also (file, header) for an include of a higher public header. A
    static function of the calling file is its own, whatever its name (stream.c's
    notify_state is not the notify subsystem)."""
    order = {sub: i for i, sub in enumerate(SUBSYSTEMS)}
    found: set[tuple[str, str]] = set()
    for rel, text in files.items():
        own = order[rel.split("/", 1)[0]]
        local = {name for name, static, body in _functions(text) if static and body}
        for name in CALL_RE.findall(_strip_c(text)):
            if name in local:
                continue
            callee = acl_defs.get(name) if name.startswith("acl") else name.split("_", 1)[0]
            if callee in order and order[callee] > own:
                found.add((rel, name))
        for inc in INCLUDE_RE.findall(text):
            folder = inc.split("/", 1)[0]
            if folder in order and order[folder] > own:
                found.add((rel, inc))
    return found


def _readme_upward_table() -> set[tuple[str, str]]:
    text = (MOCK / "README.md").read_text()
    section = text.split("## Source layout", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (`[^|]*`) \| (`[^|]*`) \|", section, re.M)
    allowed: set[tuple[str, str]] = set()
    for callers, callees in rows:
        for caller in re.findall(r"`([\w/]+\.c)`", callers):
            allowed.update((caller, callee) for callee in re.findall(r"`(\w+)`", callees))
    return allowed


def _sources_by_path() -> dict[str, str]:
    return {
        f"{sub}/{p.name}": p.read_text()
        for sub in SUBSYSTEMS
        for p in sorted((SRC / sub).glob("*.c"))
    }


def test_cross_subsystem_calls_match_readme() -> None:
    """The upward calls derived from the sources are exactly the README table's rows, and
    a file includes a higher layer's public header only to make one of them."""
    found = _upward_calls(_sources_by_path(), _acl_definitions())
    calls = {(f, c) for f, c in found if not c.endswith(".h")}
    allowed = _readme_upward_table()
    assert allowed, "README 'Source layout' has no table of upward calls"
    assert calls == allowed, (
        f"upward calls not in the README table: {sorted(calls - allowed)}; "
        f"table rows the sources do not make: {sorted(allowed - calls)}"
    )
    callers = {f for f, _ in allowed}
    includes = {(f, h) for f, h in found if h.endswith(".h")}
    assert all(f in callers for f, _ in includes), f"upward includes: {sorted(includes)}"


def test_layer_check_sees_violations() -> None:
    """The derivation finds a prefixed upward call, an upward acl* entry point and an
    upward include, and ignores downward calls, comments and hook tables."""
    files = {
        "core/x.c": '#include "mem/mem.h"\n/* stream_enqueue(s) in a comment */\n'
        "static void f(void) { core_error(a); mem_lookup(p, &i); aclrtMalloc(&d, 1, 0); }\n",
        "misc/y.c": "static const core_subsystem k = {.release = misc_dump_finalize};\n"
        "void g(void) { stream_enqueue(s, fn, a, NULL); core_error(b); }\n",
        "core/z.c": "void h(const core_subsystem *sub) {\n"
        "    sub->stream_destroyed(s); sub.mem_x(1);\n}\n",
        "stream/w.c": "static void notify_state(int x) { (void)x; }\n"
        "void k(void) { notify_state(1); notify_ipc_put(p); }\n",
    }
    found = _upward_calls(files, {"aclrtMalloc": "mem"})
    assert found == {
        ("core/x.c", "mem_lookup"),
        ("core/x.c", "aclrtMalloc"),
        ("core/x.c", "mem/mem.h"),
        ("stream/w.c", "notify_ipc_put"),
    }


# ---------------------------------------------------------------- lock order
# src/core/lock_order.h lists every lock in lock order (MOCK_LOCK_TABLE). The run-time
# checker of the test builds enforces it; these tests tie the table to the sources and
# to the stress tests of tests/c/test_lock_order.c.

LOCK_HEADER = SRC / "core" / "lock_order.h"
LOCK_TEST = MOCK / "tests" / "c" / "test_lock_order.c"
LOCK_DECL_RE = re.compile(
    r"MOCK_(?:RECURSIVE_)?MUTEX_INIT\((MOCK_LOCK_\w+)\)|MOCK_RWLOCK_INIT\((MOCK_LOCK_\w+)\)"
    r"|MOCK_HANDLE_SET_INIT\((MOCK_LOCK_\w+)\)|core_mutex_init\([^,]+,\s*(MOCK_LOCK_\w+)\)"
)


def _lock_table() -> list[tuple[str, str, str]]:
    """(id, where, may_hold expression) of every MOCK_LOCK_TABLE entry, in order."""
    text = LOCK_HEADER.read_text()
    body = text.split("#define MOCK_LOCK_TABLE(X)", 1)[1].split("\n\n", 1)[0]
    body = re.sub(r"/\*.*?\*/", " ", body.replace("\\\n", " "), flags=re.S)
    entries = []
    for m in re.finditer(r"\bX\((MOCK_LOCK_\w+),\s*\"([^\"]*)\",\s*((?:\"[^\"]*\"\s*)+),", body):
        rest = body[m.end() :]
        depth, end = 1, 0
        while depth:  # the may-hold expression runs to the X( entry's closing parenthesis
            depth += {"(": 1, ")": -1}.get(rest[end], 0)
            end += 1
        entries.append((m.group(1), m.group(2), rest[: end - 1].strip()))
    return entries


def _required_pairs(table: list[tuple[str, str, str]]) -> set[str]:
    """The "OUTER > INNER" labels a stress test must name: one per MOCK_HOLDS(OUTER),
    "MOCK_LOCK_LIFECYCLE > *" for MOCK_HOLDS_LIFECYCLE, "* > ID" for MOCK_HOLDS_EARLIER."""
    pairs: set[str] = set()
    for lock, _where, may_hold in table:
        for outer in re.findall(r"MOCK_HOLDS\((MOCK_LOCK_\w+)\)", may_hold):
            pairs.add(f"{outer} > {lock}")
        if "MOCK_HOLDS_LIFECYCLE" in may_hold:
            pairs.add("MOCK_LOCK_LIFECYCLE > *")
        if re.search(r"MOCK_HOLDS_EARLIER\(", may_hold):
            pairs.add(f"* > {lock}")
    return pairs


def test_every_lock_is_in_the_lock_order_table() -> None:
    """No raw pthread mutex/rwlock outside lock_order.h; every lock declared under src/
    uses a table id, every id is used, and each entry names the file that declares it."""
    table = _lock_table()
    ids = [lock for lock, _, _ in table]
    assert len(ids) == len(set(ids)) and len(ids) > 30, ids
    used: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.[ch]")):
        rel = str(path.relative_to(SRC))
        text = _strip_c(path.read_text())
        if rel != "core/lock_order.h":
            raw = re.findall(
                r"\bpthread_(?:mutex|rwlock|spinlock)_t\b|PTHREAD_\w*MUTEX_INITIALIZER", text
            )
            assert not raw, f"{rel} declares a lock without an id of core/lock_order.h: {raw}"
        for groups in LOCK_DECL_RE.findall(path.read_text()):
            lock = next(g for g in groups if g)
            used.setdefault(lock, set()).add(rel)
    assert set(used) - {"MOCK_LOCK_ERROR_PROCESS"} <= set(ids), set(used) - set(ids)
    assert set(used) == set(ids), f"table ids never declared: {sorted(set(ids) - set(used))}"
    for lock, where, _ in table:
        assert where.split()[0] in used[lock], f"{lock}: '{where}' but declared in {used[lock]}"


def test_lock_pairs_have_stress_tests() -> None:
    """Every pair of locks the table lets nest is named by a "pairs:" comment of a stress
    test in tests/c/test_lock_order.c, and every such test is run."""
    text = LOCK_TEST.read_text()
    named: set[str] = set()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("/* pairs: "):
            continue
        spec = line[len("/* pairs: ") :]
        for more in lines[i + 1 :]:  # continuation lines: " *        A > B, ..."
            if not re.match(r" \*\s{2,}(MOCK_LOCK_|\* >)", more):
                break
            spec += " " + more[2:].strip()
        named.update(p.strip() for p in spec.split(",") if p.strip())
    required = _required_pairs(_lock_table())
    assert required, "no nesting pairs found in lock_order.h"
    assert required <= named, f"pairs without a stress test: {sorted(required - named)}"
    assert named <= required, (
        f"stress tests name pairs the table does not have: {sorted(named - required)}"
    )
    for fn in re.findall(r"static void (test_stress_\w+)\(void\)", text):
        assert f"RUN_TEST({fn});" in text, fn


LOCK_CALLS = re.compile(
    r"\b(core_mutex_lock|core_rwlock_rdlock|core_rwlock_wrlock|core_handle_set_lock)\s*\("
)
UNLOCK_CALLS = re.compile(r"\b(core_mutex_unlock|core_rwlock_unlock|core_handle_set_unlock)\s*\(")


def _function_bodies(text: str) -> list[tuple[str, str]]:
    """(name, body) of every function defined at file scope of stripped C text."""
    out, depth, head, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if depth == 0:
            if ch == ";":
                head = ""
            elif ch == "{":
                depth, start = 1, i
            else:
                head += ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                m = re.search(r"\b(\w+)\s*\([^{]*$", head)
                if (
                    m
                    and not re.match(r"\s*(typedef|struct|enum|union)\b", head)
                    and "=" not in head
                ):
                    out.append((m.group(1), text[start : i + 1]))
                head = ""
    return out


def _early_unlocks(text: str) -> list[str]:
    """Functions with more than two exits that release a lock at more places than they
    take it (an unlock before each early return)."""
    bad = []
    for name, body in _function_bodies(_strip_c(text)):
        takes, drops = len(LOCK_CALLS.findall(body)), len(UNLOCK_CALLS.findall(body))
        exits = len(re.findall(r"\breturn\b", body))
        if not re.search(r"\breturn\b[^;]*;\s*\}\s*$", body):
            exits += 1  # falls off the end
        if takes and exits > 2 and drops > takes:
            bad.append(name)
    return bad


def test_functions_with_many_exits_unlock_once() -> None:
    """A function that takes a lock and has more than two exits leaves it at one place."""
    bad = {
        str(path.relative_to(SRC)): _early_unlocks(path.read_text())
        for path in sorted(SRC.rglob("*.c"))
        if _early_unlocks(path.read_text())
    }
    assert not bad, f"unlock before each early return (use one exit): {bad}"


def test_unlock_check_sees_violations() -> None:
    text = """
    static int three_exits_two_unlocks(int x) {
        core_mutex_lock(&m);
        if (x) { core_mutex_unlock(&m); return 1; }
        core_mutex_unlock(&m);
        if (x > 2) { return 2; }
        return 0;
    }
    static int two_exits(int x) {
        core_mutex_lock(&m);
        if (x) { core_mutex_unlock(&m); return 1; }
        core_mutex_unlock(&m);
        return 0;
    }
    static void loop(void) { for (;;) { core_mutex_lock(&m); core_mutex_unlock(&m); } }
    """
    assert _early_unlocks(text) == ["three_exits_two_unlocks"]
