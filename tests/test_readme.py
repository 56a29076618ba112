"""The prose of the README and of the documentation site (``docs/``), held to the code
(the README's examples and shown outputs are run by ``tests/test_public_api.py``, the
site's by ``tests/test_docs.py``; the environment-variable table by
``tests/test_options.py``).

Prose cannot be executed, but what it names and the facts it states can be checked:

* every API name the README and the guides write in backticks (``npu.x``,
  ``pyacl_rt.x.y``, ``ll.x``, ``Stream.query/synchronize``, a ``memory_stats()`` key)
  exists;
* the porting table (docs/porting/torch_npu.md): a row that says "same" names only
  things pyacl_rt has, a row that says "not provided" only things it does not have;
* the facts stated in sentences (sizes, counts, which keys, what ``empty_cache()``
  does) are measured: each claim is a phrase of one page bound to a check, so changing
  the code breaks the check and changing (or moving) the sentence breaks the binding;
* phrases that the API contradicts (what the README said before the caching allocator
  existed) do not come back, on any page;
* the README's pytest example passes under pytest, with the plugin.
"""

from __future__ import annotations

import builtins
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import _clean_env

import pyacl_rt as npu
from pyacl_rt import lowlevel
from pyacl_rt._dlpack import DLPackView

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
MiB = 1 << 20


def _doc_pages() -> list[Path]:
    """The README and the site's prose pages (the API pages are generated from the
    docstrings; the architecture page is checked by tests/test_layers.py)."""
    pages = sorted(p for p in DOCS.rglob("*.md") if p.parent.name != "api")
    return [README, *(p for p in pages if p.name != "architecture.md")]


#: Public classes a README ``Class.attr`` reference may name (DLPackView: what
#: ``as_dlpack`` returns).
_CLASSES: dict[str, type] = {
    name: obj for name in npu.__all__ if isinstance(obj := getattr(npu, name), type)
}
_CLASSES["DLPackView"] = DLPackView


def _prose() -> str:
    """The README and the documentation pages without their code blocks."""
    text = "\n".join(page.read_text() for page in _doc_pages())
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _backticked(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def _strip_call(ref: str) -> str:
    """``pyacl_rt.from_dlpack(obj)`` -> ``pyacl_rt.from_dlpack``."""
    return re.sub(r"\(.*\)$", "", ref.strip())


def _resolve(ref: str) -> bool:
    """Whether an API reference exists: ``pyacl_rt.a.b``, ``npu.a``, ``ll.a`` /
    ``lowlevel.a``, ``Class.a`` or ``Class.a/b/c`` (several attributes of Class)."""
    ref = _strip_call(ref)
    head, _, rest = ref.partition(".")
    roots: dict[str, Any] = {"pyacl_rt": npu, "npu": npu, "ll": lowlevel, "lowlevel": lowlevel}
    if head in roots:
        obj: Any = roots[head]
        for part in rest.split(".") if rest else []:
            if not hasattr(obj, part):
                try:  # a submodule not imported yet (pyacl_rt.mock, pyacl_rt.cli)
                    obj = __import__(f"{obj.__name__}.{part}", fromlist=[part])
                    continue
                except (ImportError, AttributeError):
                    return False
            obj = getattr(obj, part)
        return True
    cls = _CLASSES[head]
    return all(hasattr(cls, attr) for attr in rest.split("/"))


def _api_refs(tokens: list[str]) -> Iterator[str]:
    classes = "|".join(_CLASSES)
    pattern = re.compile(rf"^(?:(?:pyacl_rt|npu|ll|lowlevel)|(?:{classes}))\.[\w./]+(\(.*\))?$")
    for tok in tokens:
        if pattern.match(tok) and "Xxx" not in tok and not tok.endswith("*"):
            yield tok


# ------------------------------------------------------------------ names exist
def test_every_backticked_api_name_exists() -> None:
    """(The porting table's "not provided" rows name what does not exist, on purpose:
    checked the other way round below.)"""
    absent = {
        tok for row in _porting_rows() if row[1] == "not provided" for tok in _backticked(row[0])
    }
    refs = [ref for ref in _api_refs(_backticked(_prose())) if ref not in absent]
    assert len(refs) >= 40, refs
    missing = [ref for ref in refs if not _resolve(ref)]
    assert not missing, f"the README or the docs name what does not exist: {missing}"


def test_every_memory_stats_key_named_exists() -> None:
    """``allocated_bytes.all.current``, ``num_device_alloc``, ``free_bytes`` ... are
    keys of ``memory_stats()`` (or of ``host_memory_stats()``)."""
    keys = set(npu.memory_stats(0)) | set(npu.host_memory_stats())
    named = [
        tok
        for tok in _backticked(_prose())
        if re.fullmatch(r"\w+\.(all|small_pool|large_pool)\.\w+|num_\w+|(free|total)_bytes", tok)
    ]
    assert len(named) >= 5, named
    assert not [tok for tok in named if tok not in keys], named


# ------------------------------------------------------------------ porting table
PORTING = DOCS / "porting" / "torch_npu.md"


def _porting_rows() -> list[tuple[str, str, str]]:
    text = PORTING.read_text()
    section = text[text.index("## Name by name") :]
    section = section[: section.index("\n## ", 1)]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| ") and len(cells) == 3 and not line.startswith("| `torch_npu.npu`"):
            rows.append((cells[0], cells[1], cells[2]))
    return rows


def _torch_names(cell: str) -> list[str]:
    """API names in a torch_npu cell: ``Stream.query/synchronize``, ``.npu_stream``
    (an attribute of the class named before it), ``set_device(d)``."""
    names, owner = [], ""
    for tok in _backticked(cell):
        tok = _strip_call(tok)
        if tok.startswith("."):
            tok = owner + tok
        elif "." in tok:
            owner = tok.split(".")[0]
        if re.fullmatch(r"[A-Za-z_][\w./]*", tok):
            names.append(tok)
    return names


def _exists(name: str) -> bool:
    head = name.split(".")[0].split("/")[0]
    if head in _CLASSES and "." in name:
        return _resolve(name)
    return hasattr(npu, name)


def test_porting_table_same_rows_exist_and_missing_rows_do_not() -> None:
    """Issue 14 item 2: the porting table said "No caching allocator" and listed the
    caching allocator as "not provided" long after it existed. A row whose pyacl_rt
    column starts with "same" names only things pyacl_rt has; a "not provided" row
    only things it does not have (concept words included: "caching allocator" ->
    caching_allocator)."""
    rows = _porting_rows()
    assert len(rows) >= 25, rows
    concepts = {"caching allocator": "caching_allocator", "tensors": "Tensor"}
    checked_same = checked_missing = 0
    for torch_cell, ours, _difference in rows:
        names = _torch_names(torch_cell)
        if ours.startswith("same"):
            missing = [n for n in names if not _exists(n)]
            assert not missing, f"porting row says 'same' but pyacl_rt lacks {missing}"
            checked_same += len(names)
        elif ours == "not provided":
            present = [n for n in names if _exists(n)]
            present += [
                api for word, api in concepts.items() if word in torch_cell and _exists(api)
            ]
            assert not present, f"porting row says 'not provided' but pyacl_rt has {present}"
            checked_missing += 1
        else:  # pyacl_rt's own names for it
            for ref in _backticked(ours):
                if re.fullmatch(r"[a-z_][\w]*(\(.*\))?", ref) and not hasattr(builtins, ref):
                    name = _strip_call(ref)
                    assert _exists(name) or hasattr(npu.DeviceProperties, name), ref
    assert checked_same >= 40 and checked_missing >= 1


# -------------------------------------------------------------- stated facts
def _reserved_growth(nbytes: int) -> int:
    """How much ``memory_reserved(0)`` grows for one new buffer of ``nbytes``, from an
    empty cache."""
    npu.empty_cache()
    before = npu.memory_reserved(0)
    buf = npu.DeviceBuffer(nbytes, device=0)
    try:
        return npu.memory_reserved(0) - before
    finally:
        buf.close()
        npu.empty_cache()


def _allocated_for(nbytes: int) -> int:
    before = npu.memory_allocated(0)
    with npu.DeviceBuffer(nbytes, device=0):
        return npu.memory_allocated(0) - before


def _torch_keys() -> set[str]:
    kinds = ["allocation", "segment", "active", "inactive_split"]
    kinds += [f"{k}_bytes" for k in ("allocated", "reserved", "active", "inactive_split")]
    kinds += ["requested_bytes"]
    grid = {
        f"{kind}.{pool}.{field}"
        for kind in kinds
        for pool in ("all", "small_pool", "large_pool")
        for field in ("current", "peak", "allocated", "freed")
    }
    extra = {"num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc"}
    extra |= {"num_device_free", "max_split_size"}
    extra |= {f"oversize_{k}.{f}" for k in ("allocations", "segments") for f in ("current", "peak")}
    return grid | extra


def _check_rounding() -> None:
    assert _allocated_for(1) == 512 and _allocated_for(513) == 1024


def _check_small_pool() -> None:
    assert _reserved_growth(MiB) == 2 * MiB


def _check_large_pool() -> None:
    assert _reserved_growth(MiB + 1) == 20 * MiB
    assert _reserved_growth(3 * MiB) == 20 * MiB
    assert _reserved_growth(11 * MiB) == 12 * MiB  # rounded up to 2 MiB


def _check_torch_keys() -> None:
    missing = _torch_keys() - set(npu.memory_stats(0))
    assert not missing, sorted(missing)


def _check_empty_cache_gives_back() -> None:
    npu.empty_cache()
    with npu.DeviceBuffer(4096, device=0):
        pass
    assert npu.memory_reserved(0) > npu.memory_allocated(0)  # cached, not freed
    npu.empty_cache()
    assert npu.memory_reserved(0) == npu.memory_allocated(0)


def _check_pool_size() -> None:
    first = [npu.stream_from_pool(0) for _ in range(32)]
    assert len({s.handle for s in first}) == 32
    assert npu.stream_from_pool(0) is first[0]  # round robin


def _check_native_reserved_equals_allocated() -> None:
    code = """
        import pyacl_rt as npu
        with npu.DeviceBuffer(4096, device=0):
            pass
        b = npu.DeviceBuffer(1000, device=0)
        assert npu.memory_reserved(0) == npu.memory_allocated(0) > 0
        b.close()
        assert npu.memory_reserved(0) == npu.memory_allocated(0) == 0
        print("OK")
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_clean_env(PYACL_RT_BACKEND="mock", PYACL_RT_ALLOCATOR="native"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout == "OK\n", proc.stderr


def _check_none_visible_is_zero() -> None:
    code = "import pyacl_rt as npu; print(npu.device_count(), npu.is_available())"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_clean_env(PYACL_RT_BACKEND="mock", ASCEND_MOCK_DEVICE_COUNT="0"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout == "0 False\n", proc.stderr


def _check_buffer_life_runs_no_python() -> None:
    """A buffer the cache serves: creating, closing and collecting it calls no Python
    function (a profile hook sees no Python frame)."""
    npu.set_device(0)
    s = npu.Stream(0)
    npu.DeviceBuffer(4096, stream=s).close()  # the first ones fill the caches
    npu.HostBuffer(4096).close()
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_qualname)

    sys.setprofile(profile)
    try:
        npu.DeviceBuffer(4096, stream=s).close()
        with npu.DeviceBuffer(4096, stream=s):
            pass
        npu.DeviceBuffer(4096, stream=s)  # collected unclosed: freed by its reference count
        npu.HostBuffer(4096).close()
        npu.HostBuffer(4096)
    finally:
        sys.setprofile(None)
    s.close()
    assert not calls, calls


def _check_bench_allocator_reports_the_life() -> None:
    """scripts/bench_allocator.py times the four lives against the raw pairs of the same
    run and its exit status is the verdict (ratios are not asserted: no timing here)."""
    script = README.parent / "scripts" / "bench_allocator.py"
    args = ["--number", "50", "--repeat", "1", "--threads", "2", "--rounds", "3"]
    proc = subprocess.run(
        [sys.executable, str(script), *args],
        env=_clean_env(PYACL_RT_BACKEND="mock"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    lines = proc.stdout.rstrip().splitlines()
    for size in ("4 KiB", "4 MiB"):
        for raw, life in (
            ("aclrtMalloc + aclrtFree", "DeviceBuffer(n, stream=s).close()"),
            ("aclrtMallocHost + aclrtFreeHost", "HostBuffer(n).close()"),
        ):
            assert any(size in x and raw in x for x in lines), (size, raw)
            row = next(x for x in lines if size in x and life in x)
            assert "(target >= 3x: PASS)" in row or "(target >= 3x: FAIL)" in row, row
    assert lines[-1] in ("PASS", "FAIL: a target was missed")
    assert (proc.returncode == 0) == (lines[-1] == "PASS")


MEMORY = "docs/guides/memory.md"
SCRIPTING = "docs/guides/scripting.md"

#: A sentence of a page (a regex over its whitespace-normalised text; the page relative to
#: the repository) and the check that makes it true.
CLAIMS: list[tuple[str, str, Callable[[], None]]] = [
    (MEMORY, r"Device blocks are rounded up to 512 bytes", _check_rounding),
    (MEMORY, r"a small pool \(blocks up to 1 MiB, 2 MiB segments\)", _check_small_pool),
    (
        MEMORY,
        r"a large pool \(20 MiB segments below 10 MiB, else the request rounded up to 2 MiB\)",
        _check_large_pool,
    ),
    (MEMORY, r"`memory_stats\(\)` has torch's keys", _check_torch_keys),
    (MEMORY, r"`empty_cache\(\)` gives cached memory back", _check_empty_cache_gives_back),
    (SCRIPTING, r"torch_npu's pooled streams: 32 per device and priority class", _check_pool_size),
    (
        "docs/porting/torch_npu.md",
        r"With `PYACL_RT_ALLOCATOR=native`: one `aclrtMalloc` per buffer, reserved == allocated",
        _check_native_reserved_equals_allocated,
    ),
    (
        SCRIPTING,
        r"With no visible device .* `device_count\(\)` is 0 and `is_available\(\)` False",
        _check_none_visible_is_zero,
    ),
    (
        MEMORY,
        r"whose memory comes from the cache is created, closed and garbage-collected "
        r"without running Python code",
        _check_buffer_life_runs_no_python,
    ),
    (
        "README.md",
        r"a buffer whose memory comes from the cache is created, closed and garbage-collected "
        r"without running Python code",
        _check_buffer_life_runs_no_python,
    ),
    (
        MEMORY,
        r"`python scripts/bench_allocator.py` measures them in one run and exits non-zero "
        r"below 3x",
        _check_bench_allocator_reports_the_life,
    ),
]


def _normalised(page: str) -> str:
    return " ".join((REPO / page).read_text().split())


@pytest.mark.parametrize("page,claim,check", CLAIMS, ids=[f"{p}:{c}" for p, c, _ in CLAIMS])
def test_documented_claim(page: str, claim: str, check: Callable[[], None]) -> None:
    assert re.search(claim, _normalised(page)), f"{page} no longer says: {claim}"
    check()


#: Phrases that were true before the caching allocator and the API now contradicts;
#: each with the fact that contradicts it.
CONTRADICTED: list[tuple[str, Callable[[], bool]]] = [
    (r"[Nn]o caching allocator", lambda: hasattr(npu, "caching_allocator")),
    (r"`empty_cache\(\)` frees nothing", lambda: hasattr(npu, "caching_allocator")),
    (r"subset of the keys", lambda: len(npu.memory_stats(0)) >= len(_torch_keys())),
    (r"caching allocator, IPC", lambda: hasattr(npu, "caching_allocator")),
]


@pytest.mark.parametrize("phrase,contradicted", CONTRADICTED, ids=[p for p, _ in CONTRADICTED])
def test_docs_have_no_contradicted_phrase(phrase: str, contradicted: Callable[[], bool]) -> None:
    if contradicted():
        for page in _doc_pages():
            text = " ".join(page.read_text().split())
            assert not re.search(phrase, text), f"stale text in {page.name}: {phrase}"


# -------------------------------------------------------------------- quick start
def _quick_start_commands() -> list[str]:
    text = README.read_text()
    section = text[text.index("## Quick start") :]
    section = section[: section.index("\n## ", 1)]
    return [m.strip() for m in re.findall(r"^```sh\n(.*?)^```", section, re.S | re.M)]


def test_quick_start_installs_what_every_example_imports() -> None:
    """Issue 14 item 10: the quick start installed no numpy, so 3 of the README's
    examples failed with ModuleNotFoundError. Its first command installs the extras the
    examples import - the README's and the documentation site's (the second is the
    development install), and is still one of two commands; .ci/run runs the second
    verbatim."""
    import ast
    import tomllib

    from packaging.requirements import Requirement

    commands = _quick_start_commands()
    assert len(commands) == 2, commands
    first, second = commands
    m = re.search(r"pip install '\.\[([\w,]+)\]'", first)
    assert m, first
    project = tomllib.loads((README.parent / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in m.group(1).split(","):
        requirements += project["optional-dependencies"][extra]
    installed = {Requirement(r).name.replace("-", "_") for r in requirements}
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)
    # ... and the examples of the documentation site, which points to this quick start
    # (the blocks run as scripts; a ``# file:`` block is a file for the commands after it)
    from test_docs import RUN_PAGES, _blocks, _file_name

    blocks += [
        b.code
        for page in RUN_PAGES
        for b in _blocks(page)
        if b.lang == "python" and b.run and _file_name(b) is None
    ]
    imported: set[str] = set()
    for code in blocks:
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"pyacl_rt"}
    assert "numpy" in third_party
    assert third_party <= installed, f"the quick start does not install {third_party - installed}"
    assert second in (README.parent / ".ci" / "run").read_text()


# ------------------------------------------------------------- the pytest example
def test_readme_pytest_example_passes(tmp_path: Path) -> None:
    """The README's test file (its ``py`` block, "Testing without hardware") passes
    under pytest with the pyacl_rt plugin (its leak check and ``npu_faults``), as a user
    runs it; ``-p no:pyacl_rt`` shows the plugin is what provides ``npu_faults``."""
    blocks = re.findall(r"^```py\n# file: (\S+)\n(.*?)^```", README.read_text(), re.S | re.M)
    assert len(blocks) == 1, blocks
    name, code = blocks[0]
    (tmp_path / name).write_text(f"# file: {name}\n{code}")
    env = _clean_env(PYACL_RT_BACKEND="mock", PYACL_RT_WARN_FALLBACK="0")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", name]
    proc = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^2 passed", proc.stdout, re.M), proc.stdout
    off = subprocess.run(
        [*args, "-p", "no:pyacl_rt"], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert off.returncode == 1 and "fixture 'npu_faults' not found" in off.stdout, off.stdout
