"""Shared pytest fixtures (kept small on purpose).

* ``clean_env(**extra)`` -> an environment for subprocesses without any ``PYACL_RT_*``,
  ``ASCEND_*`` or ``LD_LIBRARY_PATH`` setting inherited from the caller, with the
  checkout on ``PYTHONPATH``; ``extra`` is added on top.
* ``run_python(code, env=None, timeout=120, cwd=None)`` -> CompletedProcess of
  ``python -c code`` (dedented) in such an environment (``env`` defaults to
  ``clean_env(PYACL_RT_BACKEND="mock")``).
* ``build_shared_lib(path, c_source)`` -> compiles ``c_source`` into the shared
  library ``path`` with the system C compiler (session-wide cache by content).
* ``mock_loaded`` -> loads the library in *this* process via ``pyacl_rt.lowlevel`` and
  skips the test unless it is the mock.
* ``gate`` -> a :class:`Gate`: a blocking host callback that holds a stream until
  ``gate.release`` is set (released at teardown, so a failing test cannot hang).
* ``run_threads(n, target)`` -> runs ``target(i)`` on ``n`` new threads, joins them and
  returns the exceptions they raised.

The leak check after each test, fault injection (``npu_faults``), fresh runtimes
(``npu_runtime``) and mock configurations (``@pytest.mark.npu_mock``) come from the
pyacl_rt pytest plugin, :mod:`pyacl_rt.testing`, loaded through its entry point.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

# The test suite runs against the bundled mock unless told otherwise; keep the auto
# fallback warning out of every test's output (tests/test_loader.py checks it).
os.environ.setdefault("PYACL_RT_WARN_FALLBACK", "0")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYACL_RT_", "ASCEND_")) and k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")
    }
    if os.environ.get("ASCEND_MOCK_SANITIZE"):  # pytest --npu-sanitize: children too
        env["ASCEND_MOCK_SANITIZE"] = os.environ["ASCEND_MOCK_SANITIZE"]
    env["PYTHONPATH"] = str(REPO) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env.update(extra)
    return env


@pytest.fixture
def clean_env() -> Callable[..., dict[str, str]]:
    return _clean_env


@pytest.fixture
def run_python() -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(
        code: str,
        env: dict[str, str] | None = None,
        timeout: float = 120,
        cwd: str | os.PathLike[str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=env if env is not None else _clean_env(PYACL_RT_BACKEND="mock"),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
        )

    return run


_SO_CACHE: dict[str, Path] = {}


@pytest.fixture(scope="session")
def build_shared_lib(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path, str], Path]:
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc})")
    cache = tmp_path_factory.mktemp("so-cache")

    def build(path: Path, source: str) -> Path:
        key = hashlib.sha256(source.encode()).hexdigest()[:16]
        built = _SO_CACHE.get(key)
        if built is None:
            src = cache / f"{key}.c"
            src.write_text(source)
            built = cache / f"{key}.so"
            subprocess.run(
                [cc, "-shared", "-fPIC", "-o", str(built), str(src)],
                check=True,
                capture_output=True,
            )
            _SO_CACHE[key] = built
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, path)
        return path

    return build


@pytest.fixture
def mock_loaded() -> Any:
    from pyacl_rt import lowlevel

    lowlevel.load()
    if not lowlevel.is_mock_library():
        pytest.skip("the loaded libascendcl.so is not the mock")
    return lowlevel


class Gate:
    """A blocking host callback: holds a stream until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        self.entered.set()
        assert self.release.wait(60), "gate never released"

    def block(self, s: Any) -> None:
        """Launch the gate on stream ``s`` and wait until it holds the stream."""
        s.launch_host_func(self)
        assert self.entered.wait(60)


@pytest.fixture
def native_allocator() -> Iterator[None]:
    """Run the test with PYACL_RT_ALLOCATOR=native semantics (one aclrtMalloc per
    buffer, close() waits for the buffer's streams), whatever the default is."""
    from pyacl_rt import _memory as memory
    from pyacl_rt._memory import backend as _membackend

    prev = _membackend.select("native")
    try:
        yield
    finally:
        _membackend.select(prev.name)
        memory.empty_cache()


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.release.set()


def _run_threads(n: int, target: Callable[[int], object]) -> list[BaseException]:
    errs: list[BaseException] = []
    lock = threading.Lock()

    def wrap(i: int) -> None:
        try:
            target(i)
        except BaseException as exc:
            with lock:
                errs.append(exc)

    threads = [threading.Thread(target=wrap, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
        assert not t.is_alive(), "worker thread hung"
    return errs


@pytest.fixture
def run_threads() -> Callable[[int, Callable[[int], object]], list[BaseException]]:
    return _run_threads
