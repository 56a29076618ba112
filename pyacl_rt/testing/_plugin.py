"""The pytest hooks and fixtures of :mod:`pyacl_rt.testing` (see its docstring)."""

from __future__ import annotations

import json
import os
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from ._faults import NpuFaults
from ._isolate import ChildRun, MockConfig, current_config
from ._leaks import LeakCheck, mock_in_process

__all__ = [
    "npu_control",
    "npu_faults",
    "npu_leak_check",
    "npu_runtime",
    "pytest_addoption",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_runtest_protocol",
    "pytest_sessionfinish",
    "pytest_unconfigure",
]

_STATE = pytest.StashKey[dict[str, Any]]()
_MARKERS = (
    "npu_mock(devices=None, memory=None, soc=None): run the test with this mock "
    "configuration (device count, memory per device in bytes or '1GiB', SoC name); "
    "in a child pytest process when this process has another one (pyacl_rt.testing)",
    "npu_no_leak_check: skip pyacl_rt's automatic leak check for this test",
    "npu_races(reason): the test races on purpose (its device data do not matter); under "
    "--npu-sanitize the races the sanitizer reports during it do not fail it",
)


# ------------------------------------------------------------------ options
def pytest_addoption(parser: pytest.Parser) -> None:
    """``--npu-sanitize``, ``--npu-real``, ``--npu-leak-frames``, ``--npu-no-leak-check``."""
    group = parser.getgroup("pyacl_rt", "pyacl_rt NPU testing (pyacl_rt.testing)")
    group.addoption(
        "--npu-sanitize",
        action="store_true",
        default=False,
        help="run the mock with its race sanitizer on (ASCEND_MOCK_SANITIZE=1); a test "
        "during which it reports a race fails",
    )
    group.addoption(
        "--npu-real",
        action="store_true",
        default=False,
        help="run the tests on the real CANN runtime and cards (PYACL_RT_BACKEND=real); "
        "every test is skipped when there is no card; mock-only tests are skipped",
    )
    group.addoption(
        "--npu-leak-frames",
        type=int,
        default=0,
        metavar="N",
        help="record N frames of creation traceback per object for the leak report "
        "(tracemalloc: slows allocation-heavy tests several times) [0 = off]",
    )
    group.addoption(
        "--npu-no-leak-check",
        action="store_true",
        default=False,
        help="turn off the automatic leak check after each test",
    )
    group.addoption(
        "--npu-child-report",
        default=None,
        metavar="PATH",
        help="internal: the file a child process of an npu_mock group writes its reports to",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers; set the environment the options ask for before any
    library is loaded; start tracing creation sites."""
    for line in _MARKERS:
        config.addinivalue_line("markers", line)
    state: dict[str, Any] = {"children": {}, "groups": {}, "started_tracing": False}
    config.stash[_STATE] = state
    real = config.getoption("npu_real")
    if real and config.getoption("npu_sanitize"):
        raise pytest.UsageError("--npu-sanitize needs the mock; it cannot go with --npu-real")
    if real or config.getoption("npu_sanitize"):
        from .. import lowlevel

        if lowlevel.is_loaded():
            raise pytest.UsageError(
                "--npu-real / --npu-sanitize must be set before pyacl_rt loads its library, "
                "but a conftest or plugin already loaded it"
            )
    if real:
        os.environ["PYACL_RT_BACKEND"] = "real"
    if config.getoption("npu_sanitize"):
        os.environ["ASCEND_MOCK_SANITIZE"] = "1"
    frames = config.getoption("npu_leak_frames")
    if frames < 0:
        raise pytest.UsageError(f"--npu-leak-frames must be >= 0, got {frames}")
    path = config.getoption("npu_child_report")
    if path:
        writer = _ChildReportWriter(config, path)
        state["child_report"] = writer
        config.pluginmanager.register(writer, "pyacl_rt-child-report")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop tracing creation sites once the tests ran (the terminal summary of other
    plugins may import a lot)."""
    state = session.config.stash.get(_STATE, None)
    if state is not None and state.pop("started_tracing", False):
        tracemalloc.stop()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Close the child's report file."""
    state = config.stash.get(_STATE, None)
    if state is None:
        return
    if state.pop("started_tracing", False):
        tracemalloc.stop()
    report = state.pop("child_report", None)
    if report is not None:
        report.close()


# --------------------------------------------------------------- collection
def pytest_collection_finish(session: pytest.Session) -> None:
    """Start tracing creation sites (``--npu-leak-frames``) once the test modules
    are imported: imports allocate a lot and create no runtime object."""
    config = session.config
    frames = config.getoption("npu_leak_frames")
    if frames and not config.getoption("npu_no_leak_check") and not tracemalloc.is_tracing():
        tracemalloc.start(frames)
        config.stash[_STATE]["started_tracing"] = True


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: a child runs only what is selected
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Validate ``npu_mock`` markers and group the tests that need a child process;
    under ``--npu-real``, skip everything when there is no card."""
    state = config.stash[_STATE]
    child = state.get("child_report") is not None
    here = current_config()
    for item in items:
        mark = item.get_closest_marker("npu_mock")
        if mark is None:
            continue
        try:
            mock = MockConfig.from_marker(mark)
        except (TypeError, ValueError) as exc:
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        item.stash[_MOCK] = mock
        if child or config.getoption("npu_real") or mock.satisfied_by(here):
            continue
        state["groups"].setdefault(mock, []).append(item.nodeid)
    if config.getoption("npu_real"):
        reason = _no_card_reason()
        for item in items:
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=f"--npu-real: {reason}"))
            elif _MOCK in item.stash:
                item.add_marker(pytest.mark.skip(reason="npu_mock: needs the mock (--npu-real)"))


_MOCK = pytest.StashKey[MockConfig]()


def _no_card_reason() -> str | None:
    """Why the real runtime cannot run tests here, or None when it has a card."""
    from .. import errors, lowlevel

    try:
        lowlevel.load()
        if lowlevel.is_mock_library():
            return "the loaded libascendcl.so is the mock"
        from .. import device_count

        n = device_count()
    except (errors.AclError, OSError) as exc:
        return f"no usable CANN runtime ({type(exc).__name__}: {str(exc).splitlines()[0]})"
    return None if n > 0 else "no Ascend device on this machine"


# ------------------------------------------------------- running in a child
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """Run a test of another mock configuration in its group's child process and
    replay its reports here."""
    state = item.config.stash[_STATE]
    mock = item.stash.get(_MOCK, None)
    if mock is None or item.nodeid not in state["groups"].get(mock, ()):
        return None
    run = state["children"].get(mock)
    if run is None:
        run = state["children"][mock] = ChildRun(item.config, mock, state["groups"][mock])
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    datas = run.reports.get(item.nodeid, [])
    for data in datas:
        report = item.config.hook.pytest_report_from_serializable(config=item.config, data=data)
        ihook.pytest_runtest_logreport(report=report)
    if not datas:
        why = run.failure or f"the child pytest process for {mock} did not run this test"
        report = pytest.TestReport(item.nodeid, item.location, {}, "failed", why, "call", [], 0.0)
        ihook.pytest_runtest_logreport(report=report)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


class _ChildReportWriter:
    """In a child process: writes each report for the parent, one JSON line each."""

    def __init__(self, config: pytest.Config, path: str) -> None:
        self.config = config
        self.out = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed at unconfigure

    def write(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        hook = self.config.hook
        data = hook.pytest_report_to_serializable(config=self.config, report=report)
        self.out.write(json.dumps(data) + "\n")
        self.out.flush()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.write(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.write(report)

    def close(self) -> None:
        self.out.close()


# ------------------------------------------------------------------ fixtures
def _mock_control_or_skip(config: pytest.Config, what: str) -> Any:
    if config.getoption("npu_real"):
        pytest.skip(f"{what} needs the mock (--npu-real)")
    from .. import lowlevel

    lowlevel.load()
    if not lowlevel.is_mock_library():
        pytest.skip(f"{what} needs the mock; the loaded libascendcl.so is the real one")
    from ..mock import mock_control

    return mock_control()


@pytest.fixture
def npu_control(request: pytest.FixtureRequest) -> Any:
    """The mock's :class:`~pyacl_rt.mock.MockControl` (live counts, faults, device
    loss, leak report); skips the test when the loaded library is not the mock."""
    return _mock_control_or_skip(request.config, "npu_control")


@pytest.fixture
def npu_faults(request: pytest.FixtureRequest) -> Iterator[NpuFaults]:
    """:class:`~pyacl_rt.testing.NpuFaults` for this test: ``inject(func, code, nth=1)``,
    ``hits(func)``, ``lose_device(dev)``; everything is undone after the test."""
    faults = NpuFaults(_mock_control_or_skip(request.config, "npu_faults"))
    try:
        yield faults
    finally:
        faults.clear()


@pytest.fixture
def npu_runtime(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh runtime for this test: the runtime is finalized and started again
    (every device reset, no context or stream left from earlier tests), faults are
    cleared and lost devices revived (mock). Yields the ``pyacl_rt`` module."""
    import pyacl_rt

    from .. import _runtime as runtime

    if mock_in_process() is not None:
        from ..mock import mock_control

        mc = mock_control()
        mc.clear_faults()
        for device in range(mc.device_count):
            if mc.device_lost(device):
                mc.set_device_lost(device, 0)
    if runtime.is_initialized():
        runtime.finalize()
    runtime.init()
    yield pyacl_rt


@pytest.fixture(autouse=True)
def npu_leak_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test that used the mock in this process: the mock's live counts are
    back where they were before it (the primary context and default stream of a
    device used for the first time excepted); otherwise the test errors with a report
    naming what leaked and where each live object was created. With
    ``--npu-sanitize``, a race the sanitizer reported during the test fails it too
    (not for a test marked ``npu_races``: it races on purpose). Off for tests marked
    ``npu_no_leak_check`` or under ``--npu-no-leak-check``."""
    config = request.config
    sanitize = (
        config.getoption("npu_sanitize") and request.node.get_closest_marker("npu_races") is None
    )
    check = not (
        config.getoption("npu_no_leak_check")
        or request.node.get_closest_marker("npu_no_leak_check") is not None
    )
    leaks = LeakCheck()
    if check:
        leaks.start()
    races = _race_count() if sanitize else 0
    yield
    problems: list[str] = []
    if check:
        report = leaks.finish()
        if report is not None:
            problems.append(report)
    if sanitize:
        new = _race_count() - races
        if new > 0:
            problems.append(
                f"the mock's race sanitizer reported {new} race(s) during the test:\n  "
                + "\n  ".join(_race_messages(new))
            )
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def _race_count() -> int:
    """Reports of the mock's race sanitizer so far (0 while the mock is not loaded or
    not initialised yet)."""
    if mock_in_process() is None:
        return 0
    from .. import _runtime, _sanitize

    if not _sanitize.is_armed():
        if not _runtime.is_initialized():
            return 0
        import ctypes

        from ..mock import mock_control

        if not hasattr(ctypes.CDLL(mock_control().path), "aclmockSanitizerGetReportCount"):
            pytest.fail(
                "--npu-sanitize: this mock has no race sanitizer "
                "(aclmockSanitizerGetReportCount is missing); rebuild pyacl_rt",
                pytrace=False,
            )
        return 0
    return _sanitize.report_count()


def _race_messages(new: int) -> list[str]:
    """The texts of the last ``new`` reports (each names both tasks, their streams and
    the user's lines)."""
    from .. import _sanitize

    return [r.message for r in _sanitize.reports()[-new:]]
