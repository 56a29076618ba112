"""The mock's install prefix as a CANN toolkit (mock README "The install prefix").

Against the prefix bundled with pyacl_rt (``pyacl_rt/_mock``, the same ``cmake --install``
layout; tests/test_packaging.py checks the ``cmake --install`` prefix and the wheel):

* the layout CANN's scripts probe: environment scripts, headers, the eight libraries,
  the ``<arch>-linux`` links and the toolkit install info, version files, the Ascend C
  kernel CMake functions;
* ``set_env.sh`` / ``bin/setenv.bash`` export what CANN's do, computed from where the
  prefix is (a copy elsewhere works), without duplicates when sourced twice;
* C and C++ programs built the way CANN's samples build them - a CMake project reading
  ``ASCEND_CANN_PACKAGE_PATH`` (``include_directories``, ``link_directories(.../lib64)``,
  linking ``acl_rt`` / ``ascendcl``, ``c_sec``, ``msprofiler``, ``profapi``,
  ``ascend_dump``, ``acl_tdt_channel``, ``acl_tdt_queue``), a run script that sources
  ``set_env.sh`` and probes ``aclrtGetSocName`` - and run;
* ``libacl_rt.so`` and ``libascendcl.so`` loaded in one process are one runtime;
* ``ascendc_library()`` stops the configuration with a clear message; a project that only
  includes ``ascendc.cmake`` configures;
* the mock README's CANN sample (CMakeLists.txt, main.c, run.sh), verbatim.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pyacl_rt import mock

REPO = Path(__file__).resolve().parent.parent
ARCH = platform.machine()
LIBRARIES = (
    "libascendcl.so",
    "libacl_rt.so",
    "libmsprofiler.so",
    "libprofapi.so",
    "libascend_dump.so",
    "libacl_tdt_channel.so",
    "libacl_tdt_queue.so",
    "libc_sec.so",
)
HEADERS = (
    "acl/acl.h",
    "acl/acl_base.h",
    "acl/acl_rt.h",
    "acl/acl_base_rt.h",
    "acl/acl_prof.h",
    "acl/acl_dump.h",
    "acl/acl_tdt.h",
    "acl/acl_tdt_queue.h",
    "acl/error_codes/rt_error_codes.h",
    "acl/error_codes/ge_error_codes.h",
    "acl/acl_mock.h",
    "acl/acl_mock_kernel.h",
    "securec.h",
)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed")
    return path


@pytest.fixture(scope="module")
def prefix() -> Path:
    p = mock.prefix()
    if not (p / "set_env.sh").is_file():
        pytest.skip(f"{p} is not a built prefix with the CANN layout (pip install -e .)")
    return p


def _env(**extra: str) -> dict[str, str]:
    """A shell environment without any CANN / mock / pyacl_rt setting of the caller."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ASCEND_", "PYACL_RT_", "TOOLCHAIN_"))
        and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD", "CFLAGS", "LDFLAGS")
    }
    env.update(extra)
    return env


def _bash(script: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("bash"), "-c", script], capture_output=True, text=True, timeout=600, **kw
    )


def _ok(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
    return proc.stdout


# ------------------------------------------------------------------------ layout


def assert_cann_layout(p: Path, symlinks: bool = True) -> None:
    """The files and directories CANN's scripts probe (shared with test_packaging)."""
    for lib in LIBRARIES:
        assert (p / "lib64" / lib).is_file(), lib
    for header in HEADERS:
        assert (p / "include" / header).is_file(), header
    assert (p / "set_env.sh").is_file() and (p / "bin" / "setenv.bash").is_file()
    version = (p / "share/info/runtime/version.info").read_text()
    assert re.fullmatch(r"Version=\d+\.\d+\S*\n", version), version
    assert (p / "version.info").read_text() == version
    assert (p / "opp" / "version.info").read_text() == version
    info = (p / f"{ARCH}-linux" / "ascend_toolkit_install.info").read_text()
    assert f"version={version[8:].strip()}\n" in info and f"arch={ARCH}\n" in info
    for sub in ("tikcpp", "compiler/tikcpp", "tools/tikcpp"):
        assert (p / sub / "ascendc_kernel_cmake" / "ascendc.cmake").is_file(), sub
    if symlinks:
        for link, target in (("include", "../include"), ("lib64", "../lib64")):
            path = p / f"{ARCH}-linux" / link
            assert path.is_symlink() and os.readlink(path) == target, path
        assert (p / f"{ARCH}-linux" / "lib64" / "libascendcl.so").is_file()
        assert (p / f"{ARCH}-linux" / "include" / "acl" / "acl.h").is_file()


def test_layout(prefix: Path) -> None:
    assert_cann_layout(prefix)
    # the version probes read it (torch_npu's collect_env: first line with "version")
    info = (prefix / f"{ARCH}-linux" / "ascend_toolkit_install.info").read_text().splitlines()
    first = next(line for line in info if "version" in line)
    assert first.startswith("version=")


def test_pyacl_rt_mock_prints_the_prefix(prefix: Path, run_python: Any, clean_env: Any) -> None:
    proc = run_python(
        "import sys; from pyacl_rt.mock import main; sys.exit(main(['--cmake-prefix']))",
        env=clean_env(),
    )
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()) == prefix


# ------------------------------------------------------------------ environment

ENV_VARS = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_OPP_PATH", "ASCEND_AICPU_PATH")


def _exports(script: str, cwd: Path) -> dict[str, str]:
    out = _ok(_bash(script + "; env", cwd=cwd, env=_env(PATH="/usr/bin:/bin")))
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


@pytest.mark.parametrize("script", ["set_env.sh", "bin/setenv.bash"])
def test_env_scripts_are_relocatable(prefix: Path, tmp_path: Path, script: str) -> None:
    """Sourced from a copy of the prefix (symlinks kept), from another directory, twice."""
    copy = tmp_path / "Ascend" / "cann-mock"
    shutil.copytree(prefix, copy, symlinks=True)
    real = copy.resolve()
    env = _exports(f"source {copy}/{script} && source {copy}/{script}", cwd=tmp_path)
    for var in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_AICPU_PATH"):
        assert env[var] == str(real), var
    assert env["ASCEND_OPP_PATH"] == f"{real}/opp"
    assert env["TOOLCHAIN_HOME"] == f"{real}/toolkit"
    assert env["LD_LIBRARY_PATH"] == f"{real}/lib64"  # once, although sourced twice
    assert env["PATH"] == f"{real}/bin:/usr/bin:/bin"
    # an existing LD_LIBRARY_PATH is kept after the prefix's lib64
    more = _exports(f"export LD_LIBRARY_PATH=/opt/x; source {copy}/{script}", cwd=tmp_path)
    assert more["LD_LIBRARY_PATH"] == f"{real}/lib64:/opt/x"


def test_env_script_needs_bash_or_zsh(prefix: Path) -> None:
    dash = shutil.which("dash")
    if dash is None:
        pytest.skip("dash is not installed")
    proc = subprocess.run(
        [dash, "-c", f". {prefix}/set_env.sh; echo rc=$?; echo home=$ASCEND_HOME_PATH"],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert "source this file from bash or zsh" in proc.stderr
    assert "home=\n" in proc.stdout


# ------------------------------------------------------ sample-style programs

CMAKE_PROJECT = r"""
cmake_minimum_required(VERSION 3.16)
project(cann_style_samples C CXX)
set(CMAKE_CXX_STANDARD 17)

# as CANN's samples: the toolkit from ASCEND_CANN_PACKAGE_PATH, else ASCEND_HOME_PATH
if(NOT DEFINED ASCEND_CANN_PACKAGE_PATH)
  if(DEFINED ENV{ASCEND_CANN_PACKAGE_PATH})
    set(ASCEND_CANN_PACKAGE_PATH $ENV{ASCEND_CANN_PACKAGE_PATH})
  elseif(DEFINED ENV{ASCEND_HOME_PATH})
    set(ASCEND_CANN_PACKAGE_PATH $ENV{ASCEND_HOME_PATH})
  else()
    set(ASCEND_CANN_PACKAGE_PATH /usr/local/Ascend/cann)
  endif()
endif()
# the kernel samples' probe for the Ascend C CMake functions: only included here
if(EXISTS ${ASCEND_CANN_PACKAGE_PATH}/compiler/tikcpp/ascendc_kernel_cmake)
  set(ASCENDC_CMAKE_DIR ${ASCEND_CANN_PACKAGE_PATH}/compiler/tikcpp/ascendc_kernel_cmake)
elseif(EXISTS ${ASCEND_CANN_PACKAGE_PATH}/tools/tikcpp/ascendc_kernel_cmake)
  set(ASCENDC_CMAKE_DIR ${ASCEND_CANN_PACKAGE_PATH}/tools/tikcpp/ascendc_kernel_cmake)
else()
  message(FATAL_ERROR "ascendc_kernel_cmake not found in ${ASCEND_CANN_PACKAGE_PATH}")
endif()
include(${ASCENDC_CMAKE_DIR}/ascendc.cmake)

include_directories(${ASCEND_CANN_PACKAGE_PATH}/include
                    ${ASCEND_CANN_PACKAGE_PATH}/${CMAKE_SYSTEM_PROCESSOR}-linux/include)
link_directories(${ASCEND_CANN_PACKAGE_PATH}/lib64)
add_compile_options(-Wall -Wextra -Werror -Wno-deprecated-declarations)

add_executable(rt_app rt_app.cpp)               # the new library name (CANN >= 8.5)
target_link_libraries(rt_app PRIVATE acl_rt c_sec)
add_executable(legacy_app legacy_app.c)         # the compatibility name and companions
target_link_libraries(legacy_app PRIVATE ascendcl msprofiler ascend_dump)
add_executable(prof_app prof_app.c)
target_link_libraries(prof_app PRIVATE profapi acl_rt)
add_executable(tdt_app tdt_app.c)
target_link_libraries(tdt_app PRIVATE acl_tdt_channel acl_tdt_queue acl_rt)
add_executable(both_app both_app.c)             # loads libacl_rt.so and libascendcl.so
target_link_libraries(both_app PRIVATE -Wl,--no-as-needed acl_rt ascendcl dl)
target_compile_definitions(both_app PRIVATE SOC_VERSION="${SOC_VERSION}")
"""

CHECK_MACRO = r"""
#define CHECK(expr)                                                                     \
    do {                                                                                \
        aclError check_rc_ = (expr);                                                    \
        if (check_rc_ != ACL_SUCCESS) {                                                 \
            const char *msg_ = aclGetRecentErrMsg();                                    \
            fprintf(stderr, "%s failed: %d %s\n", #expr, (int)check_rc_, msg_ ? msg_ : ""); \
            return 1;                                                                   \
        }                                                                               \
    } while (0)
"""

SOURCES = {
    "rt_app.cpp": r"""
#include <cstdio>
#include <cstring>
#include <vector>
#include "acl/acl.h"
#include "securec.h"
"""
    + CHECK_MACRO
    + r"""
int main() {
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream = nullptr;
    CHECK(aclrtCreateStream(&stream));
    std::vector<int> host(256), back(256);
    for (size_t i = 0; i < host.size(); i++) host[i] = static_cast<int>(i * 3);
    void *dev = nullptr;
    const size_t bytes = host.size() * sizeof(int);
    CHECK(aclrtMalloc(&dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpyAsync(dev, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    CHECK(aclrtMemcpyAsync(back.data(), bytes, dev, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    char line[64];
    int same = host == back;
    if (sprintf_s(line, sizeof line, "rt_app %s ok=%d", aclrtGetSocName(), same) < 0) return 2;
    char copy[64];
    if (strcpy_s(copy, sizeof copy, line) != EOK) return 3;
    std::puts(copy);
    CHECK(aclrtFree(dev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return 0;
}
""",
    "legacy_app.c": r"""
#include <stdio.h>
#include "acl/acl.h"
#include "acl/acl_prof.h"
#include "acl/acl_dump.h"
"""
    + CHECK_MACRO
    + r"""
int main(void) {
    char pkg[] = "runtime", version[ACL_PKG_VERSION_MAX_SIZE] = {0};
    CHECK(aclInit(NULL));
    CHECK(aclsysGetVersionStr(pkg, version));
    CHECK(aclprofInit("prof_out", 8));
    CHECK(aclprofFinalize());
    printf("legacy_app runtime=%s dump=%s\n", version, acldumpGetPath(DATA_DUMP) ? "on" : "off");
    CHECK(aclFinalize());
    return 0;
}
""",
    "prof_app.c": r"""
#include <stdio.h>
#include "acl/acl.h"
#include "acl/acl_prof.h"
"""
    + CHECK_MACRO
    + r"""
int main(void) {
    uint32_t devices[1] = {0};
    CHECK(aclInit(NULL));
    aclprofConfig *cfg = aclprofCreateConfig(devices, 1, ACL_AICORE_NONE, NULL, ACL_PROF_ACL_API);
    if (cfg == NULL) return 2;
    CHECK(aclprofDestroyConfig(cfg));
    printf("prof_app ok\n");
    CHECK(aclFinalize());
    return 0;
}
""",
    "tdt_app.c": r"""
#include <stdio.h>
#include <string.h>
#include "acl/acl.h"
#include "acl/acl_tdt.h"
#include "acl/acl_tdt_queue.h"
"""
    + CHECK_MACRO
    + r"""
int main(void) {
    CHECK(aclInit(NULL));
    acltdtChannelHandle *ch = acltdtCreateChannelWithCapacity(0, "input", 4);
    if (ch == NULL) return 2;
    float v[4] = {1, 2, 3, 4};
    int64_t dims[1] = {4};
    acltdtDataset *tx = acltdtCreateDataset(), *rx = acltdtCreateDataset();
    acltdtDataItem *it =
        acltdtCreateDataItem(ACL_TENSOR_DATA_TENSOR, dims, 1, ACL_FLOAT, v, sizeof v);
    CHECK(acltdtAddDataItem(tx, it));
    CHECK(acltdtSendTensor(ch, tx, 1000));
    CHECK(acltdtReceiveTensor(ch, rx, 1000));
    const float *got = acltdtGetDataAddrFromItem(acltdtGetDataItem(rx, 0));
    uint32_t qid = 0;
    CHECK(acltdtCreateQueue(NULL, &qid));
    char msg[] = "frame", out[16] = {0};
    size_t n = 0;
    CHECK(acltdtEnqueueData(qid, msg, sizeof msg, NULL, 0, 0, 0));
    CHECK(acltdtDequeueData(qid, out, sizeof out, &n, NULL, 0, 0));
    printf("tdt_app channel=%g queue=%s\n", got[3], out);
    CHECK(acltdtDestroyQueue(qid));
    CHECK(acltdtDestroyDataset(rx));
    CHECK(acltdtDestroyDataset(tx));
    CHECK(acltdtDestroyDataItem(it));
    CHECK(acltdtStopChannel(ch));
    CHECK(acltdtDestroyChannel(ch));
    CHECK(aclFinalize());
    return 0;
}
""",
    "both_app.c": r"""
#include <dlfcn.h>
#include <stdio.h>
#include "acl/acl.h"
#include "acl/acl_mock.h"
"""
    + CHECK_MACRO
    + r"""
typedef int64_t (*stat_fn)(int32_t, aclmockStat);
int main(void) {
    void *rt = dlopen("libacl_rt.so", RTLD_NOW), *cl = dlopen("libascendcl.so", RTLD_NOW);
    if (rt == NULL || cl == NULL) return 2;
    stat_fn a = (stat_fn)dlsym(rt, "aclmockGetStat"), b = (stat_fn)dlsym(cl, "aclmockGetStat");
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    /* one runtime: the same function, the same state through both libraries */
    printf("both_app soc=%s probed=%s same=%d contexts=%lld,%lld\n", aclrtGetSocName(),
           SOC_VERSION, a == b, (long long)a(0, ACLMOCK_STAT_CONTEXTS),
           (long long)b(0, ACLMOCK_STAT_CONTEXTS));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    return 0;
}
""",
}

# As CANN's sample scripts: set the environment up from the toolkit, find out the SoC
# (here with a probe program calling aclrtGetSocName), configure with it, build, run.
RUN_SCRIPT = r"""
set -e
source "${ASCEND_CANN_PACKAGE_PATH:?}/set_env.sh"
cat > soc_probe.c <<'EOF'
#include <stdio.h>
#include "acl/acl.h"
int main(void) { printf("%s\n", aclrtGetSocName()); return 0; }
EOF
cc soc_probe.c -I"$ASCEND_HOME_PATH/include" -L"$ASCEND_HOME_PATH/lib64" -lacl_rt -o soc_probe
SOC_VERSION=$(./soc_probe)
echo "SoC: $SOC_VERSION"
cmake -S . -B build -DSOC_VERSION="$SOC_VERSION" > /dev/null
cmake --build build > /dev/null
for app in rt_app legacy_app prof_app tdt_app both_app; do ./build/$app; done
"""


def test_cann_style_programs(prefix: Path, tmp_path: Path) -> None:
    _tool("cmake")
    _tool("cc")
    _tool("c++")
    (tmp_path / "CMakeLists.txt").write_text(CMAKE_PROJECT)
    for name, text in SOURCES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "run.sh").write_text(RUN_SCRIPT)
    env = _env(ASCEND_CANN_PACKAGE_PATH=str(prefix), ASCEND_MOCK_SOC_NAME="Ascend910B3")
    out = _ok(_bash("bash run.sh", cwd=tmp_path, env=env))
    version = (prefix / "share/info/runtime/version.info").read_text()[8:].strip()
    assert out.splitlines() == [
        "SoC: Ascend910B3",
        "rt_app Ascend910B3 ok=1",
        f"legacy_app runtime={version} dump=off",
        "prof_app ok",
        "tdt_app channel=4 queue=frame",
        "both_app soc=Ascend910B3 probed=Ascend910B3 same=1 contexts=1,1",
    ]
    # each program needs exactly the libraries the samples link (by soname)
    readelf = shutil.which("readelf")
    if readelf is not None:
        needed = _ok(_bash(f"{readelf} -d build/rt_app", cwd=tmp_path))
        assert "[libacl_rt.so]" in needed and "[libc_sec.so]" in needed
        assert "[libascendcl.so]" not in needed  # the filter resolves into it at run time


def test_ascendc_library_needs_the_device_compiler(prefix: Path, tmp_path: Path) -> None:
    cmake = _tool("cmake")
    kernel_cmake = prefix / "tikcpp" / "ascendc_kernel_cmake" / "ascendc.cmake"
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(kernels C)\n"
        f'include("{kernel_cmake}")\n'
        'if(NOT ASCENDC_MOCK)\n  message(FATAL_ERROR "ASCENDC_MOCK is not set")\nendif()\n'
        "ascendc_library(add_kernel STATIC add_custom.cpp)\n"
    )
    proc = subprocess.run(
        [cmake, "-S", str(tmp_path), "-B", str(tmp_path / "build")],
        capture_output=True,
        text=True,
        env=_env(),
    )
    assert proc.returncode != 0
    text = " ".join(proc.stderr.split())
    assert "ascendc_library(add_kernel): Ascend C kernels need the device compiler" in text
    assert "host twin" in text


# ------------------------------------------------------- the README's sample

README = REPO / "mock_libascendcl" / "README.md"


def _readme_sample() -> dict[str, str]:
    """The blocks of the README section "A CANN program against the prefix", by the file
    name on their first line."""
    text = README.read_text()
    section = text.split("### A CANN program against the prefix", 1)[1].split("\n## ", 1)[0]
    files: dict[str, str] = {}
    for block in re.findall(r"^```\w*\n(.*?)^```", section, re.S | re.M):
        first = block.splitlines()[0]
        m = re.search(r"(CMakeLists\.txt|main\.c|run\.sh)", first)
        assert m, first
        files[m.group(1)] = block
    return files


def test_readme_cann_program(prefix: Path, tmp_path: Path) -> None:
    _tool("cmake")
    _tool("cc")
    files = _readme_sample()
    assert set(files) == {"CMakeLists.txt", "main.c", "run.sh"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = _env(ASCEND_CANN_PACKAGE_PATH=str(prefix))
    out = _ok(_bash("bash run.sh", cwd=tmp_path, env=env))
    shown = re.search(r"prints:\n((?:#   .*\n)+)", files["run.sh"])
    assert shown, "the README's run.sh shows its output in '# prints:' lines"
    expected = [line[4:] for line in shown.group(1).splitlines()]
    assert out.splitlines() == expected
