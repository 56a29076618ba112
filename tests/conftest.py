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
* ``mock_leak_check`` (autouse) -> after each test that used the mock in this process,
  checks with the mock's introspection that nothing the test created is left alive
  (see :func:`mock_leak_check`). Mark a test ``@pytest.mark.no_leak_check`` to opt out.
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


# ------------------------------------------------------------ leak checking
_DEVICE_STATS = (
    "contexts",
    "streams",
    "events",
    "allocations",
    "bytes",
    "default_contexts",
    "default_streams",
)
_HOST_STATS = ("host_allocations", "host_bytes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "no_leak_check: skip the autouse mock leak check (mock_leak_check)"
    )


def _mock_in_process() -> Any:
    """pyacl_rt.lowlevel if the library is loaded in this process and is the mock."""
    if "pyacl_rt.lowlevel" not in sys.modules:
        return None
    from pyacl_rt import lowlevel

    if not lowlevel.is_loaded() or not lowlevel.is_mock_library():
        return None
    return lowlevel


def _kept_companions() -> dict[int, int]:
    """device -> live companion streams of default and pooled streams (they live as
    long as those streams: until their context goes)."""
    from pyacl_rt import _stream as S

    out: dict[int, int] = {}
    for st in S._live.snapshot():
        side = st._state.side
        if st.kind != "owned" and side is not None and not side.closed:
            out[st._device] = out.get(st._device, 0) + 1
    return out


def _leak_snapshot() -> dict[object, dict[str, int]]:
    from pyacl_rt.mock import mock_control

    mc = mock_control()
    snap: dict[object, dict[str, int]] = {
        d: {k: mc.stat(k, d) for k in _DEVICE_STATS} for d in range(mc.device_count)
    }
    snap["host"] = {k: mc.stat(k) for k in _HOST_STATS}
    return snap


def _zero_snapshot() -> dict[object, dict[str, int]]:
    from pyacl_rt.mock import mock_control

    snap: dict[object, dict[str, int]] = {
        d: dict.fromkeys(_DEVICE_STATS, 0) for d in range(mock_control().device_count)
    }
    snap["host"] = dict.fromkeys(_HOST_STATS, 0)
    return snap


def _settle() -> None:
    """Drop what pyacl_rt legitimately keeps between tests: the thread's selection and
    current streams, pooled streams, keep-alive lists (released by a device
    synchronize) and pooled marker events."""
    import gc

    from pyacl_rt import _device as D
    from pyacl_rt import _releaser, _state
    from pyacl_rt import _runtime as runtime
    from pyacl_rt import _stream as S
    from pyacl_rt._memory import records as _memrecord

    if runtime.is_initialized():
        _state._select_device(_state._local.st, -1)
        _state._local.st.active = None
        _state._local.st.streams.clear()
        S._drain_pools()
        for d in list(D._primaries):
            D.synchronize(d)  # releases keep-alive lists of default streams
    gc.collect()
    # Releases deferred from report threads (pyacl_rt._releaser) run asynchronously.
    assert _releaser.flush(60), "the releaser thread is stuck"
    if runtime.is_initialized():
        _memrecord._process_deferred()
    S._markers.drop_all()
    if runtime.is_initialized():
        from pyacl_rt import _memory as memory

        memory.empty_cache()  # the caching allocator's segments, pinned blocks, events


@pytest.fixture(autouse=True)
def mock_leak_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, the mock's live counts (per device: contexts and streams created,
    events, allocations, bytes, default contexts and streams; host allocations/bytes)
    are back at their value before it.

    Allowed: the primary context and its default stream of a device the test used for
    the first time (pyacl_rt keeps them until finalize). A test that finalized the
    runtime is compared with an empty runtime plus the primaries of the current one.
    Does nothing when the loaded library is not the mock, or when the test never
    loaded a library in this process (subprocess-only tests). Before the test a
    finalized runtime is re-initialised, so tests start with a usable runtime.
    """
    if request.node.get_closest_marker("no_leak_check") is not None:
        yield
        return
    ll = _mock_in_process()
    before: dict[object, dict[str, int]] | None = None
    gen = -1
    primaries: set[int] = set()
    companions: dict[int, int] = {}
    if ll is not None:
        import gc

        from pyacl_rt import _device as D
        from pyacl_rt import _runtime as runtime

        if runtime.is_finalized():
            runtime.init()
        runtime.ensure_initialized()
        gc.collect()
        before = _leak_snapshot()
        gen = runtime.generation()
        primaries = set(D._primaries)
        companions = _kept_companions()
    yield
    if _mock_in_process() is None:
        return
    from pyacl_rt import _callbacks as CB
    from pyacl_rt import _device as D
    from pyacl_rt import _runtime as runtime
    from pyacl_rt._memory import records as R
    from pyacl_rt.mock import mock_control

    _settle()
    if before is None or runtime.generation() != gen:
        before, primaries = _zero_snapshot(), set()
    after = _leak_snapshot()
    new = set(D._primaries) - primaries
    expected = {key: dict(counts) for key, counts in before.items()}
    for d in new:
        expected[d]["default_contexts"] += 1
        expected[d]["default_streams"] += 1
    if runtime.generation() == gen:
        # awaiting a default / pooled stream's events gave it a companion stream, kept
        # with it (pyacl_rt._event, "companion streams"), like the stream itself
        for d, n in _kept_companions().items():
            if d in expected:
                expected[d]["streams"] += n - companions.get(d, 0)
    diff = {
        key: {k: f"{expected[key][k]} -> {v}" for k, v in counts.items() if v != expected[key][k]}
        for key, counts in after.items()
        if counts != expected[key]
    }
    assert not diff, (
        f"mock objects left alive by the test (expected -> live): {diff}\n"
        + mock_control().leak_report()
    )
    assert CB.pending_count() == 0, "host callbacks still pending after the test"
    assert not R._deferred, "deferred buffer releases left after the test"
