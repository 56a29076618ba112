"""The documentation site (``mkdocs.yml``, ``docs/``): it builds with
``mkdocs build --strict`` (broken internal links, anchors and pages missing from the nav
fail it), its API reference covers every public class and function, and every code
block of the guides, porting pages and mock reference runs, with its shown output
checked.

How a page's blocks run (in order, in one temporary directory per page, against the
mock with its defaults):

* a ``python`` block whose first line is ``# file: NAME`` (or a ``c`` block starting
  ``// file: NAME``) is written to ``NAME`` for the blocks after it;
* any other ``python`` block runs as a script; ``print(...)  # prints: OUTPUT`` lines
  are compared as in the README (``tests/test_public_api.py``: ``...`` stands for what
  varies);
* a ``sh`` block runs in ``bash -e``; when a ``text`` block follows it, that is what the
  commands print (stdout then stderr, ``...`` for what varies);
* a block right after ``<!-- not run: REASON -->`` is not run (installs, servers that
  run until stopped); the reason is required.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import _clean_env
from test_public_api import _PRINT_DUMP, _PRINT_RECORDER, _PRINTS, _shown_output_matches

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
#: Pages whose code blocks are run (the architecture page shows diagrams, not code).
RUN_PAGES = [
    "index.md",
    "guides/scripting.md",
    "guides/memory.md",
    "guides/kernels-graphs.md",
    "guides/service.md",
    "guides/testing.md",
    "guides/diagnostics.md",
    "guides/cli.md",
    "porting/torch_npu.md",
    "porting/pyacl.md",
    "mock/reference.md",
]
_NOT_RUN = re.compile(r"<!-- not run: (?P<reason>[^>]*\S) -->\s*$")
_BLOCK = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```", re.S | re.M)


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    run: bool

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def _blocks(page: str) -> list[Block]:
    text = (DOCS / page).read_text()
    out = []
    for m in _BLOCK.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        line = text.count("\n", 0, m.start()) + 1
        out.append(Block(page, line, m["lang"], m["code"], _NOT_RUN.search(before) is None))
    return out


def _env() -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    env = _clean_env(PYACL_RT_BACKEND="mock", PYACL_RT_WARN_FALLBACK="0")
    env["PATH"] = bindir + ":" + env.get("PATH", "")
    return env


def _run_python(block: Block, cwd: Path) -> None:
    record = cwd / ".prints.json"
    proc = subprocess.run(
        [sys.executable, "-c", _PRINT_RECORDER + block.code + _PRINT_DUMP],
        env={**_env(), "PYACL_RT_README_PRINTS": str(record)},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    assert proc.returncode == 0, f"{block.where}:\n{block.code}\n--- stderr:\n{proc.stderr}"
    assert proc.stderr == "", f"{block.where} wrote to stderr:\n{proc.stderr}"
    offset = _PRINT_RECORDER.count("\n")
    printed: dict[int, str] = {}
    for at, text in json.loads(record.read_text()):
        printed[at - offset] = printed.get(at - offset, "") + text
    for k, text in enumerate(block.code.splitlines(), start=1):
        m = _PRINTS.match(text)
        if m is None:
            continue
        where = f"docs/{block.page}:{block.line + k}"
        assert k in printed, f"{where}: the line printed nothing"
        assert _shown_output_matches(m["expected"], printed[k]), (
            f"{where} shows\n  {m['expected']}\nbut printed\n  {printed[k]}"
        )


def _run_sh(block: Block, cwd: Path, shown: str | None) -> None:
    env = _env()
    if "pyacl-rt doctor" in block.code:  # it lists the environment: not pytest --npu-sanitize's
        env.pop("ASCEND_MOCK_SANITIZE", None)
    proc = subprocess.run(
        ["bash", "-e", "-c", block.code],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{block.where}:\n{block.code}\n--- output:\n{out}"
    if shown is not None:
        assert _shown_output_matches(shown.rstrip("\n"), out), (
            f"{block.where} shows\n{shown}\nbut printed\n{out}"
        )


def _file_name(block: Block) -> str | None:
    first = block.code.split("\n", 1)[0]
    m = re.fullmatch(r"(?:#|//) file: (\S+)", first.strip())
    return m[1] if m and block.lang in ("python", "c", "toml", "ini", "cmake") else None


@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_code_blocks_run(page: str, tmp_path: Path) -> None:
    blocks = _blocks(page)
    ran = 0
    for i, block in enumerate(blocks):
        if not block.run:
            continue
        name = _file_name(block)
        if name is not None:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(block.code)
        elif block.lang == "python":
            _run_python(block, tmp_path)
            ran += 1
        elif block.lang == "sh":
            after = blocks[i + 1] if i + 1 < len(blocks) else None
            shown = after.code if after is not None and after.lang == "text" else None
            _run_sh(block, tmp_path, shown)
            ran += 1
        elif block.lang == "text":
            continue  # the output of the sh block before it
        else:
            raise AssertionError(f"{block.where}: a {block.lang!r} block is neither run nor a file")
    assert ran >= 1 or page == "index.md", f"docs/{page} runs no code block"


def test_every_code_block_is_run_or_says_why_not() -> None:
    """Blocks not run are few and give a reason; every page with code is in RUN_PAGES."""
    not_run = 0
    for page in sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")):
        blocks = _blocks(page)
        if page == "architecture.md" or page.startswith("api/"):
            continue
        assert page in RUN_PAGES or not blocks, f"docs/{page} has code but is not run"
        not_run += sum(not b.run for b in blocks)
    assert not_run <= 12, not_run


def test_guides_print_comments_are_checked() -> None:
    """``# prints:`` only on one-line print calls (as in the README). The README's
    feature sections moved here, with their shown outputs (there were 38 in the README)."""
    shown = 0
    for page in RUN_PAGES:
        for block in _blocks(page):
            for k, text in enumerate(block.code.splitlines(), start=1):
                if "# prints:" in text:
                    assert _PRINTS.match(text), f"docs/{page}:{block.line + k}: {text}"
                    shown += 1
    assert shown >= 60, shown


def test_architecture_page_is_in_the_site() -> None:
    """docs/architecture.md (checked by tests/test_layers.py) is the site's
    architecture page."""
    assert re.search(r"^\s*- Architecture: architecture\.md$", _mkdocs_yml(), re.M)


def _mkdocs_yml() -> str:
    return (REPO / "mkdocs.yml").read_text()


# ------------------------------------------------------------------ the build
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if any(importlib.util.find_spec(m) is None for m in ("mkdocs", "mkdocstrings", "material")):
        pytest.skip("the docs extra is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        env={**_clean_env(), "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_mkdocs_build_strict(site: Path) -> None:
    """``mkdocs build --strict`` succeeds: every internal link and anchor resolves,
    every page is in the nav, and mkdocstrings renders every ``:::`` block."""
    for page in ["index.html", "architecture/index.html", "guides/scripting/index.html"]:
        assert (site / page).is_file(), page


#: API pages and the modules they document.
API_PAGES = {
    "pyacl_rt": "pyacl_rt",
    "aio": "pyacl_rt.aio",
    "errors": "pyacl_rt.errors",
    "lowlevel": "pyacl_rt.lowlevel",
    "mock": "pyacl_rt.mock",
    "cli": "pyacl_rt.cli",
    "profiler": "pyacl_rt.profiler",
    "dump": "pyacl_rt.dump",
}


def test_api_reference_covers_every_public_class_and_function(site: Path) -> None:
    """Each class and function of a public module's ``__all__`` has its entry, generated
    from its docstring, on that module's page (or on the page of the public module it
    belongs to: pyacl_rt re-exports the errors)."""
    ids: dict[str, set[str]] = {}
    for page, module in API_PAGES.items():
        html = (site / "api" / page / "index.html").read_text()
        ids[module] = set(re.findall(r'id="([\w.]+)"', html))
    missing = []
    for module in API_PAGES.values():
        mod = importlib.import_module(module)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not (isinstance(obj, type) or callable(obj)) or name == "fast":
                continue
            home = obj.__module__ if obj.__module__ in ids else module
            own = f"{home}.{obj.__qualname__}"
            if f"{module}.{name}" not in ids[module] and own not in ids[home]:
                missing.append(f"{module}.{name}")
    assert not missing, missing


def test_site_loads_nothing_from_other_hosts_and_links_out_only_to_its_tools(site: Path) -> None:
    """Internal links are checked by the strict build. The pages load no script, style or
    font from another host (the site reads offline), and their only links out are the
    theme's credits (the project's own files are named as paths, never linked)."""
    for html in site.rglob("*.html"):
        text = html.read_text()
        loads = re.findall(r'<(?:script|link|img)\b[^>]*(?:src|href)="(https?://[^"]+)"', text)
        assert not loads, (html, loads)
        for href in re.findall(r'<a\b[^>]*href="(https?://[^"]+)"', text):
            assert re.match(r"https://(squidfunk\.github\.io|www\.mkdocs\.org)/", href), (
                html,
                href,
            )


def test_docs_extra_matches_the_test_extra() -> None:
    """CI installs '.[test]' (the README's command); it carries the docs tools, so
    the strict build above runs in CI and never skips there."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(extras["docs"]) <= set(extras["test"]), extras["docs"]


def test_every_backticked_api_name_in_the_guides_exists() -> None:
    """What the prose names (``npu.copy``, ``Stream.from_handle``,
    ``pyacl_rt.mock.mock_control()`` ...) exists, as the README's names do
    (tests/test_readme.py)."""
    from test_readme import _api_refs, _backticked, _resolve

    refs = []
    for page in RUN_PAGES:
        prose = _BLOCK.sub("", (DOCS / page).read_text())
        refs += [(page, ref) for ref in _api_refs(_backticked(prose))]
    assert len(refs) >= 15, refs
    missing = [(page, ref) for page, ref in refs if not _resolve(ref)]
    assert not missing, missing
