"""scripts/gen_acl.py: generated files in sync, headers compile, ABI conformance, cffi tables.

The C/C++ checks need gcc/g++ on PATH and are skipped (with the reason) otherwise.
"""

from __future__ import annotations

import collections
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "scripts" / "gen_acl.py"
MOCK = ROOT / "mock_libascendcl"
INCLUDE = MOCK / "include"
ABI_DIR = MOCK / "abi"

GCC = shutil.which("gcc")
GXX = shutil.which("g++")
needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc not found on PATH")
needs_gxx = pytest.mark.skipif(GXX is None, reason="g++ not found on PATH")
WARN = ["-Wall", "-Wextra", "-Werror"]

PUBLIC_HEADERS = [
    "acl/acl.h",
    "acl/acl_base.h",
    "acl/acl_base_rt.h",
    "acl/acl_rt.h",
    "acl/acl_rt_allocator.h",
    "acl/acl_prof.h",
    "acl/acl_dump.h",
    "acl/acl_mdl.h",
    "acl/acl_op.h",
    "acl/acl_base_mdl.h",
    "acl/error_codes/rt_error_codes.h",
    "acl/error_codes/ge_error_codes.h",
    "acl/acl_tdt.h",  # hand-written (valid C too, unlike CANN's)
    "acl/acl_tdt_queue.h",
    "securec.h",
]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return _load("_test_gen_acl", GEN)


@pytest.fixture(scope="module")
def tables(gen: ModuleType) -> Any:
    return gen.Tables(ABI_DIR)


@pytest.fixture(scope="module")
def abi() -> Any:
    """Both generated tables, loaded by path: the big ``_abi_data`` and the small
    ``_abi_runtime`` (constants, error codes, names: what ``import pyacl_rt`` loads)."""
    raw = ROOT / "pyacl_rt" / "_raw"
    big = _load("_test_abi_data", raw / "_abi_data.py")
    small = _load("_test_abi_runtime", raw / "_abi_runtime.py")
    return SimpleNamespace(**vars(big), **{k: v for k, v in vars(small).items() if k.isupper()})


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def _compile(
    compiler: str | None, std: str, src: Path, out: Path | None, *extra: str
) -> subprocess.CompletedProcess[str]:
    assert compiler is not None
    cmd = [compiler, f"-std={std}", *WARN, *extra, f"-I{INCLUDE}", str(src)]
    cmd += ["-o", str(out)] if out is not None else ["-fsyntax-only"]
    return _run(cmd)


# ----------------------------------------------------------------------------- generator


def test_generated_files_in_sync(tmp_path: Path, gen: ModuleType, tables: Any) -> None:
    res = _run([sys.executable, str(GEN), "--out", str(tmp_path)])
    assert res.returncode == 0, res.stderr
    files = gen.generate(tables)
    assert len(files) >= 20
    stale = []
    for rel in sorted(files):
        committed = ROOT / rel
        fresh = tmp_path / rel
        if not committed.exists() or committed.read_bytes() != fresh.read_bytes():
            stale.append(rel)
    assert not stale, f"run `python scripts/gen_acl.py`; out of date: {stale}"


def test_generator_is_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        res = _run([sys.executable, str(GEN), "--out", str(d)])
        assert res.returncode == 0, res.stderr
    fa = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert fa == fb
    assert all((a / p).read_bytes() == (b / p).read_bytes() for p in fa)


def test_generator_check_mode_and_bad_input(tmp_path: Path) -> None:
    res = _run([sys.executable, str(GEN), "--check"])
    assert res.returncode == 0, res.stdout + res.stderr
    res = _run([sys.executable, str(GEN), "--abi-dir", str(tmp_path), "--out", str(tmp_path)])
    assert res.returncode == 2
    assert "gen_acl.py: error:" in res.stderr and "acl_functions.tsv" in res.stderr


@pytest.mark.parametrize(
    ("table", "old", "new", "expect"),
    [
        ("acl_constants.tsv", "ACL_FLOAT16\t1\t", "ACL_FLOAT16\tone\t", "value is not an integer"),
        ("acl_structs.tsv", "\t2576\t", "\t2576\t\textra\t", "fields, expected"),
        (
            "acl_functions.tsv",
            "aclInit\taclError\tconst char *configPath",
            "aclInit\taclError\t*",
            "parameter",
        ),
        (
            "mock_overrides.tsv",
            "aclrtCheckArchCompatibility\tsimulate",
            "aclrtNoSuchFunction\tsimulate",
            "unknown function",
        ),
        (
            "mock_overrides.tsv",
            "aclrtCheckArchCompatibility\tsimulate",
            "aclrtSetDevice\tsimulate",
            "repeats the table",
        ),
    ],
)
def test_generator_rejects_malformed_tables(
    tmp_path: Path, table: str, old: str, new: str, expect: str
) -> None:
    abi_dir = tmp_path / "abi"
    abi_dir.mkdir()
    for p in ABI_DIR.glob("*.tsv"):
        shutil.copy(p, abi_dir / p.name)
    text = (abi_dir / table).read_text()
    assert old in text
    (abi_dir / table).write_text(text.replace(old, new, 1))
    out = tmp_path / "out"
    res = _run([sys.executable, str(GEN), "--abi-dir", str(abi_dir), "--out", str(out)])
    assert res.returncode == 2
    assert re.search(rf"{re.escape(table)}:\d+: .*{expect}", res.stderr), res.stderr
    assert "Traceback" not in res.stderr
    assert not out.exists()  # nothing is written from a bad table


def test_table_counts(tables: Any, abi: Any) -> None:
    t = tables
    assert len(t.functions) == 442
    assert len(t.constants) == 804
    assert len(t.structs) == 71
    kinds = collections.Counter(c.kind for c in t.constants)
    assert kinds == {"enum": 445, "macro": 105, "errcode": 254}
    structs = t.structs.values()
    assert sum(1 for s in structs if s.opaque) == 9
    assert sum(len(s.fields) for s in structs) == 225
    mock = collections.Counter(f.mock for f in t.functions)
    # 179 moved by abi/mock_overrides.tsv
    assert mock == {"simulate": 429, "unsupported": 13}
    assert len(abi.FUNCTIONS) == 442
    assert len(abi.BINDING_FUNCTIONS) == 442
    assert tuple(b.name for b in abi.BINDING_FUNCTIONS) == abi.BINDING_NAMES
    assert len(abi.CONSTANTS) == 804
    assert len(abi.ERROR_CODES) == 254
    assert len(abi.STRUCTS) == 71
    assert sum(len(s.fields) for s in abi.STRUCTS.values()) == 225
    assert len(abi.ENUMS) == 83
    assert sum(len(v) for v in abi.ENUMS.values()) == 445
    assert abi.ENUMS["aclrtMemcpyKind"]["ACL_MEMCPY_DEVICE_TO_HOST"] == 2
    assert abi.STRUCTS["aclrtErrorInfo"].size == 2576
    assert "aclrtStream" in abi.HANDLE_TYPES and len(abi.HANDLE_TYPES) == 22


def test_mock_readme_counts(tables: Any) -> None:
    """The mock README's counts of simulated, moved and unsupported functions are the
    tables' (abi/mock_overrides.tsv moves functions from unsupported to simulate)."""
    text = (ROOT / "mock_libascendcl" / "README.md").read_text()
    mock = collections.Counter(f.mock for f in tables.functions)
    overrides = (ROOT / "mock_libascendcl" / "abi" / "mock_overrides.tsv").read_text()
    moved = len(overrides.splitlines()) - 1
    moves = r"plus the (\d+)\s+functions `abi/mock_overrides.tsv` moves .*?\((\d+) functions\)"
    m = re.search(moves, text, re.S)
    assert m is not None, "README: 'plus the N functions abi/mock_overrides.tsv moves ... (M ...)'"
    assert (int(m.group(1)), int(m.group(2))) == (moved, mock["simulate"])
    section = text.split("## What is not supported", 1)[1]
    m = re.search(r"\((\d+) functions\)", section)
    assert m is not None and int(m.group(1)) == mock["unsupported"]


# Headers written by hand (not from the ABI tables): the mock's own API, and the TDT
# headers whose functions are outside the tables (acl_inventory.md "Out-of-scope headers").
HAND_WRITTEN_HEADERS = {"acl_mock.h", "acl_mock_kernel.h", "acl_tdt.h", "acl_tdt_queue.h"}


def _generated_headers() -> list[Path]:
    acl = INCLUDE / "acl"
    return sorted(p for p in acl.rglob("*.h") if p.name not in HAND_WRITTEN_HEADERS)


def test_readme_lists_every_unsupported_function(tables: Any) -> None:
    """The mock README "What is not supported" names exactly the functions the tables
    leave unsupported, each once (test_mock_readme_counts checks the counts)."""
    text = (ROOT / "mock_libascendcl" / "README.md").read_text()
    section = text.split("## What is not supported", 1)[1].split("\n## ", 1)[0]
    names = {f.name for f in tables.functions}
    listed = [n for n in re.findall(r"`(\w+)`", section) if n in names]
    unsupported = sorted(f.name for f in tables.functions if f.mock == "unsupported")
    assert sorted(listed) == unsupported


def test_every_function_declared_exactly_once(tables: Any) -> None:
    names = [f.name for f in tables.functions]
    decl = re.compile(
        r"^(?:ACLMOCK_\w+(?:\([^)]*\))? )*(?:ACL_FUNC_VISIBILITY|MSVP_PROF_API) .*?\b(\w+)\("
    )
    found: collections.Counter[str] = collections.Counter()
    for h in _generated_headers():
        for line in h.read_text().splitlines():
            m = decl.match(line)
            if m:
                found[m.group(1)] += 1
    assert set(found) == set(names)
    assert all(n == 1 for n in found.values()), [k for k, n in found.items() if n != 1]


def test_unsupported_stubs_and_export_lists(tables: Any, gen: ModuleType) -> None:
    funcs = tables.functions
    for lib in gen.LIBS:
        text = (ROOT / gen.UNSUPPORTED_PATHS[lib]).read_text()
        defined = re.findall(r"^[^\s#/*].*?\b(\w+)\([^;]*\)\n\{", text, re.M)
        expected = sorted(f.name for f in funcs if f.lib == lib and f.mock == "unsupported")
        assert sorted(defined) == expected
        for name in expected:
            assert f'"{name} is not supported by the mock runtime "' in text
        exports = (ROOT / gen.EXPORT_PATHS[lib]).read_text().split()
        assert exports == sorted(f.name for f in funcs if f.lib == lib)
    assert sum(len((ROOT / p).read_text().split()) for p in gen.EXPORT_PATHS.values()) == 442


# ----------------------------------------------------------------------------- headers

STDS = [("gcc", "c99"), ("gcc", "c11"), ("g++", "c++11"), ("g++", "c++17")]


@pytest.mark.parametrize(("tool", "std"), STDS, ids=[s for _, s in STDS])
def test_headers_compile(tmp_path: Path, tool: str, std: str) -> None:
    compiler = GCC if tool == "gcc" else GXX
    if compiler is None:
        pytest.skip(f"{tool} not found on PATH")
    ext = "c" if tool == "gcc" else "cpp"
    # every header alone (self-contained), then all of them twice (include guards)
    for h in PUBLIC_HEADERS:
        src = tmp_path / f"one.{ext}"
        src.write_text(f'#include "{h}"\ntypedef int translation_unit_not_empty;\n')
        res = _compile(compiler, std, src, None, "-Wpedantic")
        assert res.returncode == 0, f"{h} ({std}):\n{res.stderr}"
    src = tmp_path / f"all.{ext}"
    incs = "".join(f'#include "{h}"\n' for h in PUBLIC_HEADERS) * 2
    src.write_text(incs + USAGE)
    res = _compile(compiler, std, src, None, "-Wpedantic")
    assert res.returncode == 0, f"all headers ({std}):\n{res.stderr}"
    # the headers alone also pass the stricter warnings user projects often enable
    strict = ["-Wpedantic", "-Wshadow", "-Wconversion", "-Wsign-conversion", "-Wundef"]
    strict += ["-Wcast-qual", "-Wredundant-decls", "-Wmissing-declarations"]
    if ext == "c":
        strict += ["-Wstrict-prototypes", "-Wmissing-prototypes", "-Wc++-compat"]
    else:
        strict += ["-Wold-style-cast", "-Wzero-as-null-pointer-constant", "-Wuseless-cast"]
    src = tmp_path / f"strict.{ext}"
    src.write_text(incs + "typedef int translation_unit_not_empty;\n")
    res = _compile(compiler, std, src, None, *strict)
    assert res.returncode == 0, f"all headers, strict warnings ({std}):\n{res.stderr}"


USAGE = """
/* a few things CANN programs do with the declarations */
static int classify(aclError rc)
{
    switch (rc) {
    case ACL_ERROR_RT_PARAM_INVALID:      /* #define codes are constant expressions */
    case ACL_ERROR_RT_FEATURE_NOT_SUPPORT:
        return 1;
    default:
        return rc == ACL_SUCCESS ? 0 : 2;
    }
}

int use_declarations(void);
int use_declarations(void)
{
    dim3 grid = {1, 2, 3};
    aclrtMemcpyKind kind = ACL_MEMCPY_HOST_TO_DEVICE;
    aclrtStream stream = 0;
    aclrtErrorInfo info;
    acldumpChunk *chunk = 0;
    unsigned long long mask = ACL_PROF_ACL_API | ACL_PROF_AICORE_SHAPE;
    aclError (*fn)(void *, size_t, const void *, size_t, aclrtMemcpyKind, aclrtStream) =
        aclrtMemcpyAsync;
    (void)stream;
    (void)chunk;
    (void)fn;
    (void)kind;
    info.tryRepair = 0;
    return classify((aclError)(grid.x + info.tryRepair)) + (int)(mask >> 40) +
           (int)ACL_ERROR_GE_PARAM_INVALID + (int)(ACL_PROF_TENSOR_DATA_SHAPE_LEN) +
           (int)NORMAL_PAGE_TYPE + (int)HBM_TYPE + (int)DATA_DUMP +
           (int)MAX_MEM_UCE_INFO_ARRAY_SIZE + (int)sizeof(struct MemAttrMapping);
}
"""


@needs_gcc
def test_unsupported_sources_compile() -> None:
    for rel in (
        "src/misc/unsupported.c",
        "src/msprofiler/unsupported.c",
        "src/ascend_dump/unsupported.c",
    ):
        res = _compile(GCC, "c11", MOCK / rel, None, "-Wpedantic", "-D_GNU_SOURCE")
        assert res.returncode == 0, f"{rel}:\n{res.stderr}"
    # the generated call-every-unsupported-function program (run by the C test suite)
    res = _compile(
        GCC,
        "c11",
        MOCK / "tests/abi/test_unsupported.c",
        None,
        "-D_GNU_SOURCE",
        f"-I{MOCK / 'tests' / 'c'}",
    )
    assert res.returncode == 0, res.stderr


# ----------------------------------------------------------------------------- ABI tests


@needs_gcc
@pytest.mark.parametrize("std", ["c99", "c11"])
def test_abi_conformance_c(tmp_path: Path, std: str) -> None:
    exe = tmp_path / "abi_c"
    res = _compile(GCC, std, MOCK / "tests/abi/abi_conformance.c", exe, "-Wpedantic")
    assert res.returncode == 0, res.stderr
    run = _run([str(exe)])
    assert run.returncode == 0, run.stdout + run.stderr
    assert "109 static-const values checked, 0 mismatches" in run.stdout


@needs_gxx
@pytest.mark.parametrize("std", ["c++11", "c++17"])
def test_abi_conformance_cpp(tmp_path: Path, std: str) -> None:
    exe = tmp_path / "abi_cpp"
    res = _compile(GXX, std, MOCK / "tests/abi/abi_conformance.cpp", exe, "-Wpedantic")
    assert res.returncode == 0, res.stderr
    run = _run([str(exe)])
    assert run.returncode == 0, run.stdout + run.stderr


MUTATIONS = [
    # (table, old, new, layer that must notice)
    (
        "acl_functions.tsv",
        "aclrtMemcpyKind kind, aclrtStream stream",
        "unsigned int kind, aclrtStream stream",
        "c++",
    ),
    ("acl_structs.tsv", "aclrtMemLocation\ttype\taclrtMemLocationType\t4", None, "c"),
    (
        "acl_constants.tsv",
        "ACL_ERROR_INVALID_PARAM\t100000",
        "ACL_ERROR_INVALID_PARAM\t100001",
        "c",
    ),
    ("acl_constants.tsv", "ACL_EVENT_SYNC\t1\t", "ACL_EVENT_SYNC\t2\t", "c++"),
]


@needs_gcc
@needs_gxx
@pytest.mark.parametrize(("table", "old", "new", "layer"), MUTATIONS)
def test_abi_conformance_detects_mutations(
    tmp_path: Path, gen: ModuleType, table: str, old: str, new: str | None, layer: str
) -> None:
    """The conformance tests generated from a corrupted table must fail against our headers."""
    abi_dir = tmp_path / "abi"
    abi_dir.mkdir()
    for p in ABI_DIR.glob("*.tsv"):
        shutil.copy(p, abi_dir / p.name)
    text = (abi_dir / table).read_text()
    assert old in text
    if new is None:
        new = old[:-1] + "5"  # offset 4 -> 5
    (abi_dir / table).write_text(text.replace(old, new, 1))
    t = gen.Tables(abi_dir)
    if layer == "c":
        src = tmp_path / "m.c"
        src.write_text(gen.gen_abi_c(t))
        exe = tmp_path / "m"
        res = _compile(GCC, "c11", src, exe)
        failed = res.returncode != 0 or _run([str(exe)]).returncode != 0
    else:
        src = tmp_path / "m.cpp"
        src.write_text(gen.gen_abi_cpp(t))
        failed = _compile(GXX, "c++11", src, None).returncode != 0
    assert failed, f"mutation of {table} ({old!r} -> {new!r}) was not detected by the {layer} test"


# ----------------------------------------------------------------------------- cffi tables


def _binding_cdef(abi: Any) -> str:
    lines = [abi.CDEF_TYPES]
    for b in abi.BINDING_FUNCTIONS:
        if b.variadic:
            continue
        params = ", ".join(f"{t}{'' if t.endswith('*') else ' '}{n}" for t, n in b.params_binding)
        r = b.restype_binding
        lines.append(f"{r}{'' if r.endswith('*') else ' '}{b.name}({params or 'void'});")
    return "\n".join(lines) + "\n"


def test_binding_types(abi: Any, tables: Any) -> None:
    handles = {td.name for td in tables.typedefs if td.kind == "handle"}
    by_name = {f.name: f for f in abi.FUNCTIONS}
    words = re.compile(r"\w+")
    for b in abi.BINDING_FUNCTIONS:
        f = by_name[b.name]
        assert b.params_c == f.params and b.restype_c == f.restype and b.lib == f.lib
        assert b.variadic == (b.name == "aclAppLog")
        for t in [b.restype_binding] + [t for t, _ in b.params_binding]:
            assert not (set(words.findall(t)) & handles), (b.name, t)
            assert not re.search(r"\bvoid\s*\*", t), (b.name, t)
            assert "(*" not in t, (b.name, t)
    # handle typedefs are not declared at all (they cross as uintptr_t / void *)
    assert not (set(words.findall(abi.CDEF_TYPES)) & handles)
    rt = {b.name: b for b in abi.BINDING_FUNCTIONS}
    assert rt["aclrtMalloc"].params_binding[0] == ("uintptr_t *", "devPtr")
    assert rt["aclrtCreateStream"].params_binding == (("uintptr_t *", "stream"),)
    assert rt["aclrtMemcpy"].params_binding[0] == ("uintptr_t", "dst")
    assert rt["aclrtGetSocName"].restype_binding == "const char *"
    assert rt["aclCreateDataBuffer"].restype_binding == "aclDataBuffer *"
    assert rt["aclprofCreateStamp"].restype_binding == "uintptr_t"


def test_error_names(abi: Any) -> None:
    assert abi.ERROR_NAMES[0] == "ACL_SUCCESS"
    assert abi.ERROR_NAMES[107002] == "ACL_ERROR_RT_CONTEXT_NULL"
    assert abi.ERROR_NAMES[100000] == "ACL_ERROR_INVALID_PARAM"
    assert set(abi.ERROR_NAMES) == set(abi.ERROR_CODES.values())
    for code, name in abi.ERROR_NAMES.items():
        assert abi.ERROR_CODES[name] == code


@needs_gcc
def test_cdef_types_compile_as_c(tmp_path: Path, abi: Any) -> None:
    src = tmp_path / "cdef.c"
    src.write_text(
        "#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n" + _binding_cdef(abi)
    )
    res = _compile(GCC, "c11", src, None, "-Wpedantic")
    assert res.returncode == 0, res.stderr


def test_cdef_types_parse_with_cffi(abi: Any, tables: Any) -> None:
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    ffi.cdef(_binding_cdef(abi))
    checked = 0
    for s in tables.structs.values():
        if s.opaque or s.name.startswith(("struct ", "union ")):
            continue
        try:
            size = ffi.sizeof(s.name)
        except cffi.CDefError:  # not needed by the binding signatures
            continue
        assert size == s.size, s.name
        assert ffi.alignof(s.name) == s.align, s.name
        for fl in s.fields:
            if "." in fl.name or fl.c_type == "union {...}":
                continue
            assert ffi.offsetof(s.name, fl.name) == fl.offset, (s.name, fl.name)
        checked += 1
    assert checked >= 30
