"""The package's layers: the one table (:data:`LAYERS`) and the checks that hold it.

* every module of the package is in exactly one layer, and docs/architecture.md names
  every one of them;
* statically (AST of every ``.py`` file, function-level imports included): no module
  imports a module of a higher layer, and the import graph has no cycle. Imports under
  ``if TYPE_CHECKING:`` never run and are exempt (annotations may name a class of a
  higher layer, e.g. ``memcpy_async(dst: DeviceBuffer | HostBuffer, ...)``);
* dynamically: each module imported alone in a fresh interpreter (the package
  ``__init__`` files of its parents replaced by empty namespace stubs, so nothing else
  runs) loads only modules of its own layer or below;
* ``import pyacl_rt`` loads neither the big generated tables nor the loader's heavy
  dependencies (logging, dataclasses, ctypes, packaging): that is what keeps it under
  half of ``import numpy`` (scripts/bench_import.py measures it; no timing here).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import _clean_env

import pyacl_rt

PKG = Path(pyacl_rt.__file__).resolve().parent
REPO = PKG.parent
ARCHITECTURE = REPO / "docs" / "architecture.md"

#: The layers, lowest first. A module may import modules of its own layer or of lower
#: layers, never of a higher one (a lower layer that must call upwards owns a hook the
#: upper module registers into: a pyacl_rt._hooks.PriorityHooks list, or a slot of
#: pyacl_rt._hooks.factories).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "generated tables",
        ("pyacl_rt._raw", "pyacl_rt._raw._abi_runtime", "pyacl_rt._raw._abi_data"),
    ),
    (
        "options, errors, helpers",
        (
            "pyacl_rt.errors",
            "pyacl_rt._options",
            "pyacl_rt._hooks",
            "pyacl_rt._log",
            "pyacl_rt._args",
            "pyacl_rt._syncdebug",
        ),
    ),
    (
        "loader and cffi raw layer",
        (
            "pyacl_rt._raw._lowlevel_build",
            "pyacl_rt._raw._lowlevel_cffi",
            "pyacl_rt._raw._fastcall",
            "pyacl_rt._raw._shadow",
            "pyacl_rt._raw._extensions",
            "pyacl_rt._raw._loader",
            "pyacl_rt.lowlevel",
            "pyacl_rt._raw._backend",
            "pyacl_rt._sanitize",
        ),
    ),
    ("runtime lifecycle", ("pyacl_rt._runtime", "pyacl_rt._releaser")),
    (
        "devices and contexts",
        (
            "pyacl_rt._state",
            "pyacl_rt._capture",
            "pyacl_rt._device",
            "pyacl_rt._devinfo",
            "pyacl_rt._context",
        ),
    ),
    (
        "streams, callbacks, events",
        (
            "pyacl_rt._reportcore",
            "pyacl_rt._callbacks",
            "pyacl_rt._completion",
            "pyacl_rt._watch",
            "pyacl_rt._stream",
            "pyacl_rt._event",
        ),
    ),
    (
        "memory",
        (
            "pyacl_rt._memcore",
            "pyacl_rt._memory",
            "pyacl_rt._memory.registry",
            "pyacl_rt._memory.records",
            "pyacl_rt._memory.torchstats",
            "pyacl_rt._memory.backend",
            "pyacl_rt._memory.args",
            "pyacl_rt._memory.keepalive",
            "pyacl_rt._memory.engine",
            "pyacl_rt._memory.buffers",
            "pyacl_rt._memory.stats",
        ),
    ),
    (
        "higher tools",
        (
            "pyacl_rt._dlpack_c",
            "pyacl_rt._dlpack",
            "pyacl_rt._cachecore",
            "pyacl_rt._allocator._guards",
            "pyacl_rt._allocator._history",
            "pyacl_rt._allocator._device",
            "pyacl_rt._allocator._graphpool",
            "pyacl_rt._allocator._host",
            "pyacl_rt._allocator",
            "pyacl_rt._ipc.refs",
            "pyacl_rt._ipc.memory",
            "pyacl_rt._ipc.event",
            "pyacl_rt._ipc.mp",
            "pyacl_rt._ipc",
            "pyacl_rt._kernels.objectcode",
            "pyacl_rt._kernels.config",
            "pyacl_rt._kernels.launcher",
            "pyacl_rt._kernels.builtin",
            "pyacl_rt._kernels",
            "pyacl_rt._graph",
        ),
    ),
    (
        "public face and tools",
        (
            "pyacl_rt",
            "pyacl_rt.aio",
            "pyacl_rt._mockdiag",
            "pyacl_rt._cli_support",
            "pyacl_rt._cli_bench",
            "pyacl_rt._cli_doctor",
            "pyacl_rt._cli_logs",
            "pyacl_rt._trace",
            "pyacl_rt._cli_trace",
            "pyacl_rt.cli",
            "pyacl_rt._twins",
            "pyacl_rt.mock",
            "pyacl_rt.__main__",
            "pyacl_rt.testing._faults",
            "pyacl_rt.testing._leaks",
            "pyacl_rt.testing._isolate",
            "pyacl_rt.testing._plugin",
            "pyacl_rt.testing",
            "pyacl_rt.profiler",
            "pyacl_rt.dump",
        ),
    ),
)

LAYER_OF: dict[str, int] = {m: i for i, (_name, mods) in enumerate(LAYERS) for m in mods}
COMPILED = {
    "pyacl_rt._raw._lowlevel_cffi",
    "pyacl_rt._raw._fastcall",
    "pyacl_rt._dlpack_c",
    "pyacl_rt._cachecore",
    "pyacl_rt._memcore",
    "pyacl_rt._reportcore",
}
PACKAGES = {
    "pyacl_rt": PKG,
    "pyacl_rt._raw": PKG / "_raw",
    "pyacl_rt._memory": PKG / "_memory",
    "pyacl_rt._allocator": PKG / "_allocator",
    "pyacl_rt._ipc": PKG / "_ipc",
    "pyacl_rt._kernels": PKG / "_kernels",
    "pyacl_rt.testing": PKG / "testing",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _source_modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        if "_mock" in path.relative_to(PKG).parts:
            continue
        out[_module_name(path)] = path
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for child in node.body:
                    for sub in ast.walk(child):
                        if hasattr(sub, "lineno"):
                            lines.add(sub.lineno)
    return lines


def _imports(name: str, path: Path) -> set[str]:
    """The package modules ``name`` imports at run time (function-level included)."""
    tree = ast.parse(path.read_text(), str(path))
    exempt = _type_checking_lines(tree)
    is_pkg = path.name == "__init__.py"
    here = name if is_pkg else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in exempt:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "pyacl_rt":
                    found.add(_known(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = here.split(".")
                if node.level > 1:
                    base_parts = base_parts[: -(node.level - 1)]
                base = ".".join(base_parts)
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            if mod.split(".")[0] != "pyacl_rt":
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                found.add(sub if sub in LAYER_OF else _known(mod))
    found.discard(name)
    return found


def _known(mod: str) -> str:
    """The nearest enclosing module of ``mod`` that is in the table."""
    while mod not in LAYER_OF and "." in mod:
        mod = mod.rpartition(".")[0]
    return mod


def test_every_module_has_exactly_one_layer() -> None:
    listed = [m for _name, mods in LAYERS for m in mods]
    assert len(listed) == len(set(listed)), "a module is listed twice"
    sources = set(_source_modules())
    assert sources | COMPILED == set(listed), (
        f"not in LAYERS: {sorted((sources | COMPILED) - set(listed))}; "
        f"listed but missing: {sorted(set(listed) - sources - COMPILED)}"
    )


def test_no_module_imports_a_higher_layer() -> None:
    bad = []
    for name, path in _source_modules().items():
        for dep in sorted(_imports(name, path)):
            assert dep in LAYER_OF, f"{name} imports {dep}, which is not in LAYERS"
            if LAYER_OF[dep] > LAYER_OF[name]:
                bad.append(
                    f"{name} ({LAYERS[LAYER_OF[name]][0]}) imports {dep} "
                    f"({LAYERS[LAYER_OF[dep]][0]})"
                )
    assert not bad, "imports from a higher layer:\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    graph = {name: _imports(name, path) for name, path in _source_modules().items()}
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


ISOLATED = """
import importlib, json, sys, types
target, packages = sys.argv[1], json.loads(sys.argv[2])
# Stub the packages enclosing the target (their __init__ must not run: pyacl_rt's
# imports everything); the target and any other package it imports load for real.
stubs = sorted(n for n in packages if target.startswith(n + "."))
for name in stubs:
    stub = types.ModuleType(name)
    stub.__path__ = [packages[name]]
    stub.__package__ = name
    sys.modules[name] = stub
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, stub)
importlib.import_module(target)
loaded = [n for n in sys.modules if n.split(".")[0] == "pyacl_rt" and n not in stubs]
print(json.dumps(sorted(loaded)))
"""


@pytest.mark.parametrize("module", [m for _name, mods in LAYERS for m in mods])
def test_module_imports_alone_and_loads_no_higher_layer(module: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(ISOLATED),
            module,
            json.dumps({k: str(v) for k, v in PACKAGES.items()}),
        ],
        env=_clean_env(PYACL_RT_BACKEND="mock", PYACL_RT_WARN_FALLBACK="0"),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert module in loaded
    higher = [m for m in loaded if LAYER_OF.get(m, 0) > LAYER_OF[module]]
    assert not higher, f"importing {module} alone loaded higher layers: {higher}"


def test_import_pyacl_rt_defers_heavy_modules() -> None:
    code = """
        import json, sys
        before = set(sys.modules)
        import pyacl_rt
        print(json.dumps(sorted(set(sys.modules) - before)))
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    new = set(json.loads(proc.stdout))
    heavy = {
        "logging",
        "dataclasses",
        "ctypes",
        "packaging",
        "packaging.version",
        "pyacl_rt._raw._abi_data",
        "pyacl_rt._raw._loader",
        "pyacl_rt._raw._backend",
        "pyacl_rt.mock",
        "pyacl_rt.cli",
    }
    assert not new & heavy, sorted(new & heavy)
    assert "pyacl_rt._raw._abi_runtime" in new  # the small table is what import needs


def test_architecture_doc_names_every_layer_and_module() -> None:
    text = ARCHITECTURE.read_text()
    for layer, modules in LAYERS:
        assert layer in text, f"docs/architecture.md does not name the layer {layer!r}"
        for module in modules:
            short = module.removeprefix("pyacl_rt.") if module != "pyacl_rt" else module
            assert f"`{short}`" in text or f"`{module}`" in text, (
                f"docs/architecture.md does not mention {module}"
            )


# ------------------------------------------------- private names across modules
#: Issue 13 item 1: inside the package, names one module imports from another and private
#: attributes read on objects other than ``self``/``cls`` are an explicit allow-list, keyed
#: by (module, name), each with its reason. A new use fails (give the name no underscore, or
#: use the object's internal interface: ``ctx_ref``, ``raw_handle``, ``dev_index``,
#: ``stream_state``, ``mem`` ...), and so does an entry nothing uses any more (remove it).
#: The reasons:
#: the module that defines it reads it on another instance of its own class (or on its
#: own module-level object): private to that module all the same.
OWN_CLASS = "read by the module that defines it (another instance of its class)"
#: Python's own underscore API (``sys._getframe``, ``namedtuple._fields``).
PYTHON_API = "Python's underscore API"
#: a name of a compiled module (``_fastcall``'s gate, ``_cachecore``'s capsule) or one a
#: compiled module looks up by name: renaming it means changing the C source in step.
C_NAME = "compiled-module name (C looks it up / defines it)"
#: a package-internal helper or attribute shared by a few modules that still has its
#: underscore: to be renamed (issue 13 item 1, not done yet).
PENDING = "package-internal, rename pending (issue 13 item 1)"

PRIVATE_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {
    ("_allocator.__init__", "_C_API"): C_NAME,
}
PRIVATE_ATTRIBUTES_ALLOWED: dict[tuple[str, str], str] = {
    ("_event", "_at"): OWN_CLASS,
    ("_event", "_bind"): OWN_CLASS,
    ("_graph", "_device"): OWN_CLASS,
    ("_device", "_fallback_device"): C_NAME,
    ("_ipc.memory", "_fields"): PYTHON_API,
    ("_options", "_fields"): PYTHON_API,
    ("_context", "_finalizer"): OWN_CLASS,
    ("_event", "_finalizer"): OWN_CLASS,
    ("_event", "_ipc"): OWN_CLASS,
    ("_runtime", "_gate_after_fork"): C_NAME,
    ("_state", "_gate_api"): C_NAME,
    ("_runtime", "_gate_close"): C_NAME,
    ("_state", "_gate_enter"): C_NAME,
    ("_state", "_gate_exit"): C_NAME,
    ("_runtime", "_gate_open"): C_NAME,
    ("_runtime", "_gate_release"): C_NAME,
    ("_runtime", "_gate_state"): C_NAME,
    ("_state", "_gate_try_enter"): C_NAME,
    ("_state", "_gated"): C_NAME,
    ("_state", "_wait_device"): C_NAME,
    ("_state", "_wait_event"): C_NAME,
    ("_state", "_wait_stream"): C_NAME,
    ("_allocator._history", "_getframe"): PYTHON_API,
    ("_raw._loader", "_getframe"): PYTHON_API,
    ("_sanitize", "_getframe"): PYTHON_API,
    ("_syncdebug", "_getframe"): PYTHON_API,
    ("_callbacks", "_graveyard"): OWN_CLASS,
    ("_ipc.memory", "_hold"): OWN_CLASS,
    ("_device", "_index"): OWN_CLASS,
    ("_device", "_instances"): OWN_CLASS,
    ("_stream", "_kind"): OWN_CLASS,
    ("_hooks", "_lock"): OWN_CLASS,
    ("_watch", "_lock"): OWN_CLASS,
    ("_kernels.objectcode", "_make"): OWN_CLASS,
    ("_memory.buffers", "_not_host"): OWN_CLASS,
    ("_event", "_owner"): OWN_CLASS,
    ("_kernels.objectcode", "_params"): OWN_CLASS,
    ("_stream", "_poll_watch"): OWN_CLASS,
    ("_graph", "_pool_for"): OWN_CLASS,
    ("_event", "_recorded"): OWN_CLASS,
    ("_context", "_ref"): OWN_CLASS,
    ("_stream", "_setup"): OWN_CLASS,
    ("_graph", "_st"): OWN_CLASS,
    ("_event", "_timing"): OWN_CLASS,
    ("_ipc.event", "_use"): OWN_CLASS,
    ("_ipc.memory", "_use"): OWN_CLASS,
    ("_device", "_values"): OWN_CLASS,
    ("_kernels.config", "_values"): OWN_CLASS,
    ("_event", "_wait_on"): OWN_CLASS,
    ("_stream", "_wrap"): OWN_CLASS,
}


def _private_uses() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(module, name) of every cross-module underscore import and every read of a private
    attribute of an object other than ``self``/``cls`` in the package."""
    modules = {p.stem for p in PKG.rglob("*.py")} | {p.name for p in PKG.iterdir() if p.is_dir()}
    modules |= {"_lowlevel_cffi", "_fastcall", "_memcore", "_cachecore", "_dlpack_c", "_reportcore"}
    imports: set[tuple[str, str]] = set()
    attrs: set[tuple[str, str]] = set()
    for path in PKG.rglob("*.py"):
        if path.name in ("_abi_data.py", "_abi_runtime.py"):
            continue
        mod = str(path.relative_to(PKG).with_suffix("")).replace("/", ".")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (
                node.level > 0 or (node.module or "").startswith("pyacl_rt")
            ):
                for alias in node.names:
                    name = alias.name
                    if name.startswith("_") and not name.startswith("__") and name not in modules:
                        imports.add((mod, name))
            elif (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                attrs.add((mod, node.attr))
    return imports, attrs


def test_private_names_across_modules_are_the_allowed_ones() -> None:
    imports, attrs = _private_uses()
    new_imports = sorted(imports - PRIVATE_IMPORTS_ALLOWED.keys())
    assert not new_imports, (
        f"imports of underscore names from other pyacl_rt modules (module, name): "
        f"{new_imports}; give package-internal names no underscore"
    )
    new_attrs = sorted(attrs - PRIVATE_ATTRIBUTES_ALLOWED.keys())
    assert not new_attrs, (
        f"reads of private attributes of other objects (module, attribute): {new_attrs}; "
        f"use the object's internal interface"
    )
    stale = sorted(PRIVATE_IMPORTS_ALLOWED.keys() - imports) + sorted(
        PRIVATE_ATTRIBUTES_ALLOWED.keys() - attrs
    )
    assert not stale, f"allow-list entries nothing uses any more (remove them): {stale}"
    reasons = {OWN_CLASS, PYTHON_API, C_NAME, PENDING}
    allowed = {**PRIVATE_IMPORTS_ALLOWED, **PRIVATE_ATTRIBUTES_ALLOWED}
    assert set(allowed.values()) <= reasons
