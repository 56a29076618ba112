"""pyacl_rt._raw._loader: search order over fake library trees, refusals, fallback, versions.

Library selection is process-global (cached, and LD_LIBRARY_PATH is read by ld.so at
start-up), so every search runs in a fresh subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pyacl_rt._raw._loader import is_refused_path, parse_cann_version

FAKE_SRC = """
#include <stdint.h>
int aclrtGetDeviceCount(uint32_t *n) { if (n) *n = 1; return 0; }
"""

# Runs the loader's selection in the subprocess; argv[1] = JSON list for STANDARD_DIRS.
PROBE = r"""
import json, sys, warnings
from pyacl_rt._raw import _backend, _loader
_loader.STANDARD_DIRS = tuple(json.loads(sys.argv[1]))
out = {}
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    if len(sys.argv) > 2:
        import ctypes
        ctypes.CDLL(sys.argv[2])  # someone else loaded a libascendcl.so already
    try:
        sel = _loader.select_library()
        sel2 = _loader.select_library()
        out = {"path": sel.path, "via": sel.found_via, "backend": sel.backend,
               "same": sel is sel2, "attempts": [str(a) for a in sel.attempts]}
    except Exception as e:
        out = {"error": type(e).__name__, "msg": str(e)}
    out["warnings"] = [str(x.message) for x in w
                       if issubclass(x.category, _loader.BackendFallbackWarning)]
print("RESULT " + json.dumps(out))
"""


@pytest.fixture
def tree(tmp_path: Path, build_shared_lib: Any) -> Any:
    """Creates fake installs: tree('a/lib64') -> absolute path of a fake libascendcl.so."""

    def make(rel: str) -> str:
        return str(build_shared_lib(tmp_path / rel / "libascendcl.so", FAKE_SRC))

    make.root = tmp_path  # type: ignore[attr-defined]
    return make


def probe(
    run_python: Any,
    clean_env: Any,
    std_dirs: list[str] | None = None,
    preload: str | None = None,
    cwd: str | None = None,
    **env: str,
) -> dict[str, Any]:
    args = [json.dumps(std_dirs or [])] + ([preload] if preload else [])
    e = clean_env(**env)
    code = "import sys; sys.argv[1:] = " + repr(args) + "\n" + PROBE
    proc = run_python(code, env=e, cwd=cwd)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
    result: dict[str, Any] = json.loads(lines[-1][7:])
    return result


# --------------------------------------------------------------- search order
def test_explicit_library_wins(tree: Any, run_python: Any, clean_env: Any) -> None:
    explicit = tree("explicit/lib")
    home = tree("home/lib64")
    r = probe(
        run_python,
        clean_env,
        PYACL_RT_BACKEND="real",
        PYACL_RT_LIBRARY=explicit,
        ASCEND_HOME_PATH=str(Path(home).parent.parent),
        LD_LIBRARY_PATH=str(Path(home).parent),
    )
    assert r["path"] == explicit and r["via"] == "PYACL_RT_LIBRARY" and r["backend"] == "real"
    assert r["same"] is True


def test_already_loaded_beats_linker_search(tree: Any, run_python: Any, clean_env: Any) -> None:
    preloaded = tree("torch_npu_copy/lib64")
    other = tree("ld/lib64")
    r = probe(
        run_python,
        clean_env,
        preload=preloaded,
        PYACL_RT_BACKEND="real",
        LD_LIBRARY_PATH=str(Path(other).parent),
    )
    assert r["path"] == preloaded and "already loaded" in r["via"]


def test_dynamic_linker_before_env_homes(tree: Any, run_python: Any, clean_env: Any) -> None:
    ld = tree("ld/lib64")
    home = tree("home/lib64")
    r = probe(
        run_python,
        clean_env,
        PYACL_RT_BACKEND="real",
        LD_LIBRARY_PATH=str(Path(ld).parent),
        ASCEND_HOME_PATH=str(Path(home).parent.parent),
    )
    assert r["path"] == ld and "dynamic linker" in r["via"]


def test_ascend_home_before_toolkit_home_before_standard_dirs(
    tree: Any, run_python: Any, clean_env: Any
) -> None:
    home = tree("home/lib64")
    toolkit = tree("toolkit/lib64")
    std = tree("usr_local_Ascend/cann/lib64")
    base = {"PYACL_RT_BACKEND": "real"}
    r = probe(
        run_python,
        clean_env,
        [str(Path(std).parent)],
        ASCEND_HOME_PATH=str(Path(home).parent.parent),
        ASCEND_TOOLKIT_HOME=str(Path(toolkit).parent.parent),
        **base,
    )
    assert r["path"] == home and r["via"] == "$ASCEND_HOME_PATH/lib64"
    r = probe(
        run_python,
        clean_env,
        [str(Path(std).parent)],
        ASCEND_TOOLKIT_HOME=str(Path(toolkit).parent.parent),
        **base,
    )
    assert r["path"] == toolkit and r["via"] == "$ASCEND_TOOLKIT_HOME/lib64"
    r = probe(run_python, clean_env, [str(Path(std).parent)], **base)
    assert r["path"] == std and r["via"].startswith("standard install directory")


def test_standard_dirs_in_order(tree: Any, run_python: Any, clean_env: Any) -> None:
    cann = tree("Ascend/cann/lib64")
    legacy = tree("Ascend/ascend-toolkit/latest/lib64")
    runtime = tree("Ascend/ascend-toolkit/latest/runtime/lib64")
    dirs = [str(Path(p).parent) for p in (cann, legacy, runtime)]
    r = probe(run_python, clean_env, dirs, PYACL_RT_BACKEND="real")
    assert r["path"] == cann
    r = probe(
        run_python,
        clean_env,
        [d + "-missing" for d in dirs[:1]] + dirs[1:],
        PYACL_RT_BACKEND="real",
    )
    assert r["path"] == legacy
    assert any("not found" in a for a in r["attempts"])


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("component", ["stub", "devlib"])
def test_stub_libraries_refused_everywhere(
    component: str, tree: Any, run_python: Any, clean_env: Any
) -> None:
    stub = tree(f"cann/lib64/{component}")
    stub_home = tree(f"{component}/home/lib64")
    good = tree("good/lib64")
    r = probe(
        run_python,
        clean_env,
        [str(Path(good).parent)],
        PYACL_RT_BACKEND="real",
        LD_LIBRARY_PATH=str(Path(stub).parent),
        ASCEND_HOME_PATH=str(Path(stub_home).parent.parent),
    )
    assert r["path"] == good
    refused = [a for a in r["attempts"] if "stub library" in a]
    assert len(refused) == 2, r["attempts"]  # the linker hit and $ASCEND_HOME_PATH

    r = probe(run_python, clean_env, PYACL_RT_BACKEND="real", PYACL_RT_LIBRARY=stub)
    assert r["error"] == "LibraryNotFoundError" and "stub library" in r["msg"]


def test_stub_refused_through_symlink(tmp_path: Path, tree: Any) -> None:
    stub = tree("x/stub")
    link = tmp_path / "innocent" / "libascendcl.so"
    link.parent.mkdir()
    link.symlink_to(stub)
    assert is_refused_path(str(link))
    assert is_refused_path("lib64/libascendcl.so")  # relative
    assert is_refused_path("/usr/local/Ascend/cann/lib64/libascendcl.so") is None


def test_relative_paths_refused(tree: Any, run_python: Any, clean_env: Any) -> None:
    lib = tree("rel/lib64")
    root = str(Path(lib).parent.parent)
    r = probe(
        run_python,
        clean_env,
        cwd=root,
        PYACL_RT_BACKEND="real",
        PYACL_RT_LIBRARY="lib64/libascendcl.so",
    )
    assert r["error"] == "ConfigError" and "PYACL_RT_LIBRARY" in r["msg"]
    r = probe(
        run_python,
        clean_env,
        cwd=str(Path(root).parent),
        PYACL_RT_BACKEND="real",
        ASCEND_HOME_PATH="rel",
    )
    assert r["error"] == "LibraryNotFoundError"
    assert "ASCEND_HOME_PATH is a relative path" in r["msg"]


def test_working_directory_never_loaded(tree: Any, run_python: Any, clean_env: Any) -> None:
    lib = tree("cwd")
    cwd = str(Path(lib).parent)
    # "." and an empty entry in LD_LIBRARY_PATH both mean the working directory to ld.so
    for ld_path in (".", ":"):
        r = probe(run_python, clean_env, cwd=cwd, PYACL_RT_BACKEND="real", LD_LIBRARY_PATH=ld_path)
        assert r["error"] == "LibraryNotFoundError", r
        assert "current working directory" in r["msg"]


# ------------------------------------------------------------ auto and real
def test_auto_falls_back_to_mock_with_one_warning(run_python: Any, clean_env: Any) -> None:
    code = r"""
    import json, warnings
    from pyacl_rt._raw import _backend, _loader
    _loader.STANDARD_DIRS = ()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s1 = _loader.select_library()
        s2 = _loader.select_library()
        from pyacl_rt import lowlevel
        lowlevel.load()
        info = _backend.backend_info()
    ws = [x for x in w if issubclass(x.category, _loader.BackendFallbackWarning)]
    print("RESULT " + json.dumps({"n": len(ws), "msg": str(ws[0].message) if ws else "",
          "backend": info.backend, "path": s1.path, "via": s1.found_via,
          "mock": str(_loader.bundled_mock_library())}))
    """
    proc = run_python(code, env=clean_env(PYACL_RT_BACKEND="auto"))
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert r["n"] == 1
    assert "falling back to the bundled mock" in r["msg"]
    assert r["backend"] == "mock" and r["path"] == r["mock"] and "fallback" in r["via"]

    proc = run_python(code, env=clean_env(PYACL_RT_BACKEND="auto", PYACL_RT_WARN_FALLBACK="0"))
    assert json.loads(proc.stdout.split("RESULT ", 1)[1])["n"] == 0


def test_real_failure_lists_every_place(tmp_path: Path, run_python: Any, clean_env: Any) -> None:
    std = [str(tmp_path / "a" / "lib64"), str(tmp_path / "b" / "lib64")]
    r = probe(
        run_python,
        clean_env,
        std,
        PYACL_RT_BACKEND="real",
        ASCEND_HOME_PATH=str(tmp_path / "home"),
    )
    assert r["error"] == "LibraryNotFoundError"
    msg = r["msg"]
    for needle in (
        "PYACL_RT_LIBRARY",
        "already loaded",
        "dynamic linker",
        str(tmp_path / "home" / "lib64" / "libascendcl.so"),
        "ASCEND_TOOLKIT_HOME",
        *std,
    ):
        assert needle in msg, (needle, msg)
    assert msg.count("rejected") >= 7


def test_mock_backend_uses_bundled_library(run_python: Any, clean_env: Any) -> None:
    code = r"""
    import json
    from pyacl_rt import lowlevel
    from pyacl_rt._raw import _backend, _loader
    info = _backend.backend_info()
    print("RESULT " + json.dumps({"backend": info.backend, "path": info.path,
          "via": info.found_via, "version": info.cann_version, "parsed": str(info.version),
          "src": info.version_source, "set": info.supports("aclrtSetDevice"),
          "bogus": info.supports("aclrtNoSuchThing"), "ge": info.cann_at_least("8.0.RC1"),
          "libs": info.libraries}))
    """
    proc = run_python(
        code, env=clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_CANN_VERSION="8.1.RC1")
    )
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert r["backend"] == "mock" and r["via"] == "PYACL_RT_BACKEND=mock"
    assert r["path"].endswith(os.path.join("_mock", "lib64", "libascendcl.so"))
    assert r["version"] == "8.1.RC1" and r["parsed"] == "8.1rc1"
    assert r["set"] is True and r["bogus"] is False and r["ge"] is True
    assert r["libs"]["libascendcl.so"] == r["path"]


def test_backend_info_reports_real_library_version_file(
    tree: Any, tmp_path: Path, run_python: Any, clean_env: Any
) -> None:
    lib = tree("cann-9.1.0/x86_64-linux/lib64")
    info = tmp_path / "cann-9.1.0" / "share" / "info" / "runtime"
    info.mkdir(parents=True)
    (info / "version.info").write_text("Version=9.1.0-beta.3\n")
    code = r"""
    import json
    from pyacl_rt._raw import _backend, _loader
    i = _backend.backend_info()
    print("RESULT " + json.dumps({"b": i.backend, "v": i.cann_version, "p": str(i.version),
          "src": i.version_source, "ge": i.cann_at_least("8.5.0"),
          "lt": i.cann_at_least("9.1.0"), "missing": len(i.missing)}))
    """
    proc = run_python(code, env=clean_env(PYACL_RT_BACKEND="real", PYACL_RT_LIBRARY=lib))
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert r["b"] == "real" and r["v"] == "9.1.0-beta.3" and r["p"] == "9.1.0b3"
    assert r["src"].endswith("version.info")
    assert r["ge"] is True and r["lt"] is False and r["missing"] > 400


# ------------------------------------------------------------------ versions
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8.0.RC3", "8.0rc3"),
        ("8.0.rc3", "8.0rc3"),
        ("8.1.RC1", "8.1rc1"),
        ("8.0.RC3.alpha002", "8.0rc3.dev2"),
        ("8.0.RC2.1", "8.0rc2.post1"),
        ("7.0.T13", "7.0.dev13"),
        ("8.0.0", "8.0.0"),
        ("8.5.0", "8.5.0"),
        ("9.1.0-beta.3", "9.1.0b3"),
        ("9.1.0-alpha", "9.1.0a0"),
        ("9.1.0.alpha1", "9.1.0a1"),
        ("9.1.0-rc.2", "9.1.0rc2"),
        ("9.1.0.rc1", "9.1.0rc1"),
        ("26.1.0.b083", "26.1.0.dev83"),
        (" 8.3.RC1 ", "8.3rc1"),
    ],
)
def test_parse_cann_version(text: str, expected: str) -> None:
    assert str(parse_cann_version(text)) == expected


def test_cann_versions_sort_like_releases() -> None:
    order = [
        "7.0.T13",
        "8.0.RC3.alpha002",
        "8.0.RC3",
        "8.0.0",
        "8.1.RC1",
        "8.3.RC1",
        "8.5.0",
        "9.1.0-alpha",
        "9.1.0-beta.3",
        "9.1.0-rc.1",
        "9.1.0",
    ]
    parsed = [parse_cann_version(v) for v in order]
    assert parsed == sorted(parsed)


@pytest.mark.parametrize("bad", ["", "latest", "8.x", "RC3"])
def test_parse_cann_version_rejects_garbage(bad: str) -> None:
    with pytest.raises(ValueError, match="CANN version"):
        parse_cann_version(bad)


BROKEN_SRC = """
extern void nonexistent_driver_function(void);
int aclInit(const char *p) { (void)p; nonexistent_driver_function(); return 0; }
"""


def test_found_but_unloadable_library(
    tmp_path: Path, build_shared_lib: Any, run_python: Any, clean_env: Any
) -> None:
    """auto: a real library that is found but cannot be loaded (e.g. toolkit without the
    driver) falls back to the mock with the dlopen error in the one warning; real: error."""
    lib = build_shared_lib(tmp_path / "cann" / "lib64" / "libascendcl.so", BROKEN_SRC)
    home = str(lib.parent.parent)
    code = r"""
    import json, warnings
    from pyacl_rt import errors, lowlevel
    from pyacl_rt._raw import _loader
    _loader.STANDARD_DIRS = ()
    out = {}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            sel = lowlevel.load()
            out["sel"] = [sel.backend, sel.found_via, lowlevel.is_mock_library()]
        except errors.LibraryNotFoundError as e:
            out["error"] = str(e)
    out["warnings"] = [str(x.message) for x in w
                       if issubclass(x.category, _loader.BackendFallbackWarning)]
    print("RESULT " + json.dumps(out))
    """
    proc = run_python(code, env=clean_env(PYACL_RT_BACKEND="auto", ASCEND_HOME_PATH=home))
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert r["sel"][0] == "mock" and "fallback" in r["sel"][1] and r["sel"][2] is True
    assert len(r["warnings"]) == 1
    assert (
        "failed to load" in r["warnings"][0] and "nonexistent_driver_function" in r["warnings"][0]
    )

    proc = run_python(code, env=clean_env(PYACL_RT_BACKEND="real", ASCEND_HOME_PATH=home))
    r = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert "nonexistent_driver_function" in r["error"] and r["warnings"] == []


# ------------------------------------------------- the warning points at user code
USER_SCRIPT = """\
import pyacl_rt
from pyacl_rt._raw import _loader

_loader.STANDARD_DIRS = ()  # no real library anywhere: auto falls back to the mock
{call}  # the line the warning must point at
"""


@pytest.mark.parametrize(
    "call",
    [
        "pyacl_rt.device_count()",
        "pyacl_rt.init()",
        "pyacl_rt.Stream(0).close()",
        "pyacl_rt.lowlevel.aclrtGetDeviceCount(pyacl_rt.lowlevel.scratch().u32)",
        "pyacl_rt.backend_info()",
    ],
)
def test_fallback_warning_is_short_public_and_points_at_user_line(
    call: str, tmp_path: Path, clean_env: Any
) -> None:
    """BackendFallbackWarning is public (pyacl_rt.BackendFallbackWarning, a UserWarning),
    one short line, and attributed to the user's line that first needed the library
    (it was attributed to a pyacl_rt frame, e.g. lowlevel.py: `sel = _loader.select_...`)."""
    import pyacl_rt

    assert issubclass(pyacl_rt.BackendFallbackWarning, UserWarning)
    assert "BackendFallbackWarning" in pyacl_rt.__all__
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT.format(call=call))
    proc = subprocess.run(
        [sys.executable, "-W", "always", str(script)],
        env=clean_env(PYACL_RT_BACKEND="auto", PYACL_RT_WARN_FALLBACK="1"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if "BackendFallbackWarning" in ln]
    assert len(lines) == 1, proc.stderr
    location, _, message = lines[0].partition(": BackendFallbackWarning: ")
    assert location == f"{script}:5", proc.stderr
    assert message.startswith("pyacl_rt: no real libascendcl.so found (")
    assert "falling back to the bundled mock" in message
    assert "PYACL_RT_BACKEND=mock" in message and len(message) < 250, message


# ------------------------------------------------- refused before anything loads
PLANTED_SRC = """
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void planted(void) {
    const char *marker = getenv("PLANTED_MARKER");
    FILE *f = marker ? fopen(marker, "w") : NULL;
    if (f) { fputs("constructor ran", f); fclose(f); }
}
int aclrtGetDeviceCount(uint32_t *n) { if (n) *n = 1; return 0; }
"""

# Selects the library, then uses the runtime (auto falls back to the mock).
USE = r"""
import json, warnings
warnings.simplefilter("ignore")
import pyacl_rt as npu
from pyacl_rt._raw import _loader
out = {}
try:
    sel = _loader.select_library()
    out["path"] = sel.path
    out["backend"] = sel.backend
    out["attempts"] = [str(a) for a in sel.attempts]
    out["devices"] = npu.device_count()
except Exception as e:
    out["error"] = type(e).__name__
    out["msg"] = str(e)
print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize(
    "where",
    ["cwd '.'", "cwd empty entry", "cwd trailing ':'", "cwd absolute", "stubs dir", "devlib dir"],
)
@pytest.mark.parametrize("backend", ["auto", "real"])
def test_planted_library_never_loaded(
    where: str, backend: str, tmp_path: Path, build_shared_lib: Any, run_python: Any, clean_env: Any
) -> None:
    """Issue 7: the search dlopen()ed whatever the dynamic linker found and refused a
    working-directory or stub path only afterwards, so a planted library's constructor
    had already run. The search now walks LD_LIBRARY_PATH / ld.so.cache / system dirs
    itself and refuses before loading: the constructor's marker file never appears."""
    marker = tmp_path / "marker.txt"
    cwd = tmp_path / "work"
    if where.startswith("cwd"):
        lib = build_shared_lib(cwd / "libascendcl.so", PLANTED_SRC)
        ld_path = {
            "cwd '.'": ".",
            "cwd empty entry": "/nonexistent::/also-missing",
            "cwd trailing ':'": "/nonexistent:",
            "cwd absolute": str(cwd),
        }[where]
    else:
        sub = "stubs" if where == "stubs dir" else "devlib"
        lib = build_shared_lib(tmp_path / "cann" / "lib64" / sub / "libascendcl.so", PLANTED_SRC)
        cwd.mkdir()
        ld_path = str(lib.parent)
    env = clean_env(PYACL_RT_BACKEND=backend, LD_LIBRARY_PATH=ld_path, PLANTED_MARKER=str(marker))
    env["PYACL_RT_WARN_FALLBACK"] = "0"
    proc = run_python(USE, env=env, cwd=str(cwd))
    assert not marker.exists(), f"the planted library's constructor ran ({where})"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
    r = json.loads(lines[-1][7:])
    if backend == "real":
        assert r["error"] == "LibraryNotFoundError", r
        text = r["msg"]
    else:
        assert r["backend"] == "mock" and r["devices"] > 0, r
        text = " ".join(r["attempts"])
    if where.startswith("cwd"):
        assert "current working directory" in text
    else:
        assert "stub library" in text


def test_noload_probe_never_loads(
    tmp_path: Path, build_shared_lib: Any, run_python: Any, clean_env: Any
) -> None:
    """The already-loaded probe uses dlopen(RTLD_NOLOAD): it finds a library someone
    else loaded (even without /proc/self/maps) and never loads one itself."""
    marker = tmp_path / "marker.txt"
    lib = build_shared_lib(tmp_path / "good" / "lib64" / "libascendcl.so", PLANTED_SRC)
    code = f"""
import ctypes, os
from pyacl_rt._raw import _loader
assert _loader._loaded_path("libascendcl.so") is None
assert not os.path.exists({str(marker)!r}), "RTLD_NOLOAD loaded it"
ctypes.CDLL({str(lib)!r})
assert os.path.exists({str(marker)!r})
print("PROBE", _loader._loaded_path("libascendcl.so"))
"""
    env = clean_env(LD_LIBRARY_PATH=str(lib.parent), PLANTED_MARKER=str(marker))
    proc = run_python(code, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"PROBE {lib}" in proc.stdout


def test_ld_cache_is_read_like_the_linker() -> None:
    """/etc/ld.so.cache is parsed (never executed): it knows this process's libc, at
    the path the dynamic linker loaded it from."""
    from pyacl_rt._raw import _loader

    if not os.path.exists(_loader.LD_SO_CACHE):
        pytest.skip("no /etc/ld.so.cache")
    paths = _loader._ld_cache_lookup("libc.so.6")
    loaded = _loader._loaded_path("libc.so.6")
    assert paths and loaded
    assert os.path.realpath(paths[0]) == os.path.realpath(loaded)
    assert _loader._ld_cache_entries(os.devnull) == []
