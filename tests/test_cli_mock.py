"""``pyacl-rt mock prefix`` and ``pyacl-rt mock env``: the bundled mock as a CANN install.

* ``prefix`` prints the prefix :func:`pyacl_rt.mock.prefix` names;
* ``eval "$(pyacl-rt mock env)"`` in a shell exports what sourcing the prefix's
  ``set_env.sh`` exports (same values, nothing added twice when evaluated twice), and a C
  program compiled and run in that shell finds the headers and the library through the
  exported variables alone (no rpath, no pyacl_rt flags);
* usage errors exit 2 with the usage of ``pyacl-rt mock``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import _clean_env

from pyacl_rt import cli, mock

EXPORTED = (
    "ASCEND_HOME_PATH",
    "ASCEND_TOOLKIT_HOME",
    "ASCEND_OPP_PATH",
    "ASCEND_AICPU_PATH",
    "TOOLCHAIN_HOME",
    "LD_LIBRARY_PATH",
    "PATH",
)

PROGRAM = r"""
#include <stdio.h>
#include "acl/acl.h"

int main(void) {
    uint32_t n = 0;
    if (aclInit(NULL) != ACL_SUCCESS || aclrtGetDeviceCount(&n) != ACL_SUCCESS) return 1;
    const char *soc = aclrtGetSocName();
    printf("devices=%u soc=%s\n", n, soc ? soc : "?");
    return aclFinalize() == ACL_SUCCESS ? 0 : 1;
}
"""


def _bash(script: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = _clean_env(**extra)
    env["PYACL_RT_PYTHON"] = sys.executable
    return subprocess.run(
        [shutil.which("bash") or "/bin/bash", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _dump_vars() -> str:
    return "; ".join(f'echo "{v}=${{{v}}}"' for v in EXPORTED)


def test_prefix_prints_the_bundled_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["mock", "prefix"]) == 0
    out = capsys.readouterr().out
    assert out == f"{mock.prefix()}\n"
    assert (Path(out.strip()) / "set_env.sh").is_file()


def test_env_exports_what_set_env_sh_exports() -> None:
    via_eval = _bash(f'eval "$("$PYACL_RT_PYTHON" -m pyacl_rt mock env)"; {_dump_vars()}')
    via_source = _bash(f'. "{mock.prefix()}/set_env.sh"; {_dump_vars()}')
    assert via_eval.returncode == 0, via_eval.stderr
    assert via_source.returncode == 0, via_source.stderr
    assert via_eval.stdout == via_source.stdout
    lines = dict(line.split("=", 1) for line in via_eval.stdout.splitlines())
    home = str(mock.prefix().resolve())
    assert lines["ASCEND_HOME_PATH"] == home
    assert lines["LD_LIBRARY_PATH"].split(":")[0] == f"{home}/lib64"
    assert lines["PATH"].split(":")[0] == f"{home}/bin"


def test_env_twice_adds_nothing_twice() -> None:
    cmd = 'eval "$("$PYACL_RT_PYTHON" -m pyacl_rt mock env)"'
    once = _bash(f"{cmd}; {_dump_vars()}", LD_LIBRARY_PATH="/opt/x")
    twice = _bash(f"{cmd}; {cmd}; {_dump_vars()}", LD_LIBRARY_PATH="/opt/x")
    assert once.returncode == 0 and twice.returncode == 0, once.stderr + twice.stderr
    assert once.stdout == twice.stdout
    assert f"LD_LIBRARY_PATH={mock.prefix().resolve()}/lib64:/opt/x\n" in once.stdout


def test_env_values_are_shell_quoted(tmp_path: Path) -> None:
    exports = mock.env_exports({"PATH": "/a b/$HOME", "LD_LIBRARY_PATH": ""})
    assert exports["PATH"].endswith(":/a b/$HOME")
    assert exports["LD_LIBRARY_PATH"] == f"{mock.prefix().resolve()}/lib64"
    proc = _bash(
        'eval "$("$PYACL_RT_PYTHON" -m pyacl_rt mock env)"; echo "$PATH"',
        PATH="/usr/bin:/bin:/a b/$HOME",
    )
    assert proc.stdout.strip().endswith(":/a b/$HOME"), proc.stderr


def test_a_c_program_builds_and_runs_in_a_shell_that_evals_env(tmp_path: Path) -> None:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc})")
    (tmp_path / "prog.c").write_text(PROGRAM)
    script = f"""
        set -e
        eval "$("$PYACL_RT_PYTHON" -m pyacl_rt mock env)"
        cd "{tmp_path}"
        {cc} prog.c -I"$ASCEND_HOME_PATH/include" -L"$ASCEND_HOME_PATH/lib64" -lascendcl -o prog
        ./prog
    """
    proc = _bash(script, ASCEND_MOCK_DEVICE_COUNT="3", ASCEND_MOCK_SOC_NAME="Ascend310P3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "devices=3 soc=Ascend310P3"
    # Without the eval the loader does not find the library (no rpath was linked).
    bare = subprocess.run(
        [str(tmp_path / "prog")], env=_clean_env(), capture_output=True, text=True, timeout=60
    )
    assert bare.returncode != 0
    assert "libascendcl.so" in bare.stderr


@pytest.mark.parametrize("args", [["mock"], ["mock", "nope"], ["mock", "env", "--x"]])
def test_mock_usage_errors_exit_2(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pyacl_rt", *args],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "usage: pyacl-rt mock" in proc.stderr
