"""No stale references: the docstrings and comments of pyacl_rt, docs/*.md and the
READMEs name only modules, objects and files that exist.

Checked: Sphinx roles (``:mod:`X```, ``:func:`X``` ...) and backticked dotted names
(resolved as ``pyacl_rt.X``, relative to the module they appear in, or as an importable
module); names of the package's former modules (``device.X``, ``stream.py`` ...);
file names and repository paths (``_raw/_fastcall.c``, ``scripts/gen_acl.py``).
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pyacl_rt

PKG = Path(pyacl_rt.__file__).resolve().parent
REPO = PKG.parent
GENERATED = {"_abi_data.py", "_abi_runtime.py"}

#: Modules pyacl_rt used to have (before the private relayout): a dotted reference or a
#: file name starting with one of these is stale unless it resolves today.
FORMER_MODULES = {
    "device",
    "stream",
    "event",
    "context",
    "memory",
    "runtime",
    "state",
    "callbacks",
    "allocator",
    "_membackend",
    "_memstats",
    "_memory_engine",
}

#: References that look stale but are not, with the reason.
ALLOWED = {
    "memory._record_memory_history",  # README: torch_npu's names, compared with ours
    "memory._dump_snapshot",
    "lowlevel.NAME",  # a placeholder for any function name
    "runtime.state",  # cli: the key of the `pyacl-rt info` JSON
    "event.ipc_handle",  # README: `event` is an Event object there
}

_ROLE = re.compile(r":(?:mod|func|class|meth|data|attr|exc|obj):`~?([\w.]+?)(?:\(\))?`")
_TICKED = re.compile(r"(?<!`)``?~?([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)(?:\(\))?``?(?!`)")
_FILE = re.compile(r"(?<![\w/.<>-])((?:[\w-]+/)*[\w-]+\.(?:py|pyi|c|h|md|tsv|toml))\b")
_SKIP_DIRS = {".venv", "build", ".git", "node_modules", "__pycache__", ".pytest_cache"}


def _repo_files() -> tuple[set[str], set[str]]:
    paths: set[str] = set()
    names: set[str] = set()
    for p in REPO.rglob("*"):
        rel = p.relative_to(REPO)
        if set(rel.parts) & _SKIP_DIRS or not p.is_file():
            continue
        paths.add(rel.as_posix())
        names.add(p.name)
    return paths, names


PATHS, NAMES = _repo_files()


def _defined_names() -> set[str]:
    """Every name pyacl_rt's Python sources define (functions, classes, assignments,
    attributes, arguments, imports) and the C extensions' source words."""
    names: set[str] = set()
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
    names.update(p.stem for p in PKG.rglob("*.py"))
    names.update(p.name for p in PKG.rglob("*") if p.is_dir())
    for path in [*PKG.glob("*.c"), *PKG.glob("*/*.c"), *PKG.glob("*.h")]:
        names.update(re.findall(r"\b_\w+", path.read_text()))
    return names


DEFINED = _defined_names()
_PRIVATE_NAME = re.compile(r"(?:``|:\w+:`~?)(_[a-z]\w*)(?:\(\))?``?")


def _texts() -> Iterator[tuple[str, str, ModuleType | None]]:
    """(where, text, module) for each docstring / comment block / markdown file."""
    for path in sorted(PKG.rglob("*.py")):
        if path.name in GENERATED:
            continue
        rel = path.relative_to(REPO).as_posix()
        modname = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        mod: ModuleType | None = None
        if path.stem not in ("__main__", "_lowlevel_build"):  # these run when imported
            try:
                mod = importlib.import_module(modname)
            except Exception:
                mod = None
        src = path.read_text()
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield f"{rel}:{getattr(node, 'lineno', 1)}", doc, mod
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT:
                yield f"{rel}:{tok.start[0]}", tok.string, mod
    for md in [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]:
        yield md.relative_to(REPO).as_posix(), md.read_text(), None


def _resolve(name: str, mod: ModuleType | None) -> bool:
    """True if dotted ``name`` names something that exists."""
    if name in ALLOWED:
        return True
    if name.startswith(".") and mod is not None:  # relative to the module's package
        pkg = mod.__name__ if hasattr(mod, "__path__") else mod.__name__.rpartition(".")[0]
        name = f"{pkg}{name}"
    parts = name.split(".")
    if mod is not None and len(parts) == 1:
        # a method / attribute named in a docstring of its class: any class of the module
        classes = [c for c in vars(mod).values() if isinstance(c, type)]
        if any(_walk(c, parts) for c in classes):
            return True
    candidates: list[tuple[object, list[str]]] = []
    if mod is not None:
        candidates.append((mod, parts))
        # a method named through its class in the same module's sibling names
    candidates.append((pyacl_rt, parts[1:] if parts[0] == "pyacl_rt" else parts))
    for start, rest in candidates:
        if _walk(start, rest):
            return True
    # an importable module (standard library, numpy ...) or a builtin
    for i in range(len(parts), 0, -1):
        try:
            top = importlib.import_module(".".join(parts[:i]))
        except Exception:
            continue
        return _walk(top, parts[i:])
    return hasattr(builtins, parts[0]) and _walk(getattr(builtins, parts[0]), parts[1:])


def _walk(obj: object, rest: list[str]) -> bool:
    for i, part in enumerate(rest):
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        if isinstance(obj, ModuleType):
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
                continue
            except Exception:
                pass
        # instance attributes set in __init__ (slots, dataclass fields) of a class
        if isinstance(obj, type) and i == len(rest) - 1:
            slots = {s for k in obj.__mro__ for s in getattr(k, "__slots__", ())}
            fields = set(getattr(obj, "__dataclass_fields__", {})) | set(
                getattr(obj, "__annotations__", {})
            )
            return part in slots or part in fields or f"self.{part}" in _source(obj)
        return False
    return True


@functools.cache
def _source(cls: type) -> str:
    try:
        import inspect

        return inspect.getsource(cls)
    except Exception:
        return ""


def _stale_in(text: str, mod: ModuleType | None) -> list[str]:
    bad: list[str] = []
    for m in _ROLE.finditer(text):
        if not _resolve(m[1], mod):
            bad.append(m[0])
    for m in _TICKED.finditer(text):
        name = m[1]
        first = name.split(".")[0]
        if name.rsplit(".", 1)[1] in ("py", "pyi", "c", "h", "md", "so", "tsv", "toml"):
            continue  # a file name (checked below)
        is_pkg_name = first == "pyacl_rt" or (
            first.startswith("_") and ((PKG / first).exists() or (PKG / f"{first}.py").exists())
        )
        if (is_pkg_name or first in FORMER_MODULES) and not _resolve(name, mod):
            bad.append(m[0])
    for m in _PRIVATE_NAME.finditer(text):
        if m[1] not in DEFINED and m[0] not in bad:
            bad.append(m[0])
    for m in _FILE.finditer(text):
        ref = m[1]
        if "/" in ref:
            ok = (
                ref in PATHS
                or f"pyacl_rt/{ref}" in PATHS
                or any(p.endswith("/" + ref) for p in PATHS)
            )
        else:
            ok = ref in NAMES
        stem = ref.rsplit("/", 1)[-1].split(".")[0]
        if not ok and (stem in FORMER_MODULES or "/" in ref or stem.startswith("_")):
            bad.append(ref)
    return bad


def test_no_references_to_names_that_do_not_exist() -> None:
    stale = [f"{where}: {ref}" for where, text, mod in _texts() for ref in _stale_in(text, mod)]
    assert not stale, "references to modules/objects/files that do not exist:\n" + "\n".join(stale)


def test_the_checker_catches_stale_names() -> None:
    from pyacl_rt import _stream

    text = (
        "after ``device._ensure_current`` (see stream.py and :func:`_set_event_class`; "
        "``_memory.engine._set_staging_buffer``, ``_deferred_calls``, "
        "pyacl_rt/_memory/nowhere.py)"
    )
    assert _stale_in(text, _stream) == [
        ":func:`_set_event_class`",
        "``device._ensure_current``",
        "``_memory.engine._set_staging_buffer``",
        "``_deferred_calls``",
        "stream.py",
        "pyacl_rt/_memory/nowhere.py",
    ]
    fine = ":class:`Stream`, ``_memory.engine.copy``, :mod:`threading`, _raw/_fastcall.c"
    assert _stale_in(fine, _stream) == []
