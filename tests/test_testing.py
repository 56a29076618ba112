"""The pytest plugin :mod:`pyacl_rt.testing`, driven with pytester.

Each case writes a small test file and runs pytest on it in a subprocess (the mock's
state is process-wide, and a leaking inner test must not leak into this process):

* the plugin is registered through the ``pytest11`` entry point, with its options and
  markers;
* ``npu_runtime`` gives each test a fresh runtime; ``npu_faults`` injects faults for
  one test only; ``npu_control`` is the mock's control;
* the automatic leak check fails a leaking test with a report naming what leaked and,
  with ``--npu-leak-frames``, the line that created it; ``npu_no_leak_check`` and
  ``--npu-no-leak-check`` turn it off;
* ``npu_mock`` runs tests of another configuration in one child pytest per distinct
  configuration (its results, failures included, reported here); bad arguments are a
  usage error;
* ``--npu-real`` skips every test cleanly on a machine without cards;
  ``--npu-sanitize`` sets the mock's sanitizer on;
* the example test file runs green.
"""

from __future__ import annotations

import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
# Every case starts a pytest subprocess (some also a child per mock configuration).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """``run(source, *args)`` -> RunResult of pytest on ``source`` in a subprocess."""
    for var in ("ASCEND_RT_VISIBLE_DEVICES", "ASCEND_MOCK_DEVICE_COUNT", "ASCEND_MOCK_SOC_NAME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("ASCEND_MOCK_MEM_PER_DEVICE", raising=False)
    monkeypatch.setenv("PYACL_RT_BACKEND", "mock")

    def run(source: str, *args: str) -> pytest.RunResult:
        pytester.makepyfile(test_it=textwrap.dedent(source))
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)

    return run


def test_registered_through_the_pytest11_entry_point(run) -> None:  # type: ignore[no-untyped-def]
    eps = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert eps.get("pyacl_rt") == "pyacl_rt.testing"
    result = run("def test_nothing():\n    pass\n", "--help")
    for option in ("--npu-sanitize", "--npu-real", "--npu-leak-frames", "--npu-no-leak-check"):
        result.stdout.fnmatch_lines([f"*{option}*"])
    result = run("def test_nothing():\n    pass\n", "--markers")
    result.stdout.fnmatch_lines(["*npu_mock(devices=None, memory=None, soc=None)*"])
    result.stdout.fnmatch_lines(["*npu_no_leak_check*"])


def test_npu_runtime_is_fresh_and_npu_control_counts(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import pyacl_rt as npu

        def test_uses_devices():
            npu.set_device(1)
            npu.synchronize()

        def test_fresh(npu_runtime, npu_control):
            assert npu_runtime is npu
            # the runtime was finalized and started again: no device is in use
            assert npu_control.stat("default_contexts") == 0
            assert npu_control.counts()["streams"] == 0
            s = npu.Stream()
            assert npu_control.stat("streams") == 1
            s.close()
        """,
        "-v",
    )
    result.assert_outcomes(passed=2)


def test_npu_faults_inject_scoped_to_one_test(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import pytest
        import pyacl_rt as npu
        from pyacl_rt.testing import NpuFaults

        def test_inject(npu_faults):
            assert isinstance(npu_faults, NpuFaults)
            npu_faults.inject("aclrtCreateContext", 207001, nth=2)
            npu.Context(0).close()
            with pytest.raises(npu.AclError) as exc:
                npu.Context(0)
            assert exc.value.code == 207001
            assert npu_faults.hits("aclrtCreateContext") == 1

        def test_every_call_and_device_loss(npu_faults):
            npu_faults.inject("aclrtCreateContext", 207001, nth=0)
            npu_faults.lose_device(1)
            with pytest.raises(npu.AclError):
                npu.Context(0)
            with pytest.raises(npu.AclDeviceLostError):
                npu.Context(1)

        def test_undone_after_the_test():
            npu.Context(0).close()
            npu.Context(1).close()

        def test_bad_arguments(npu_faults):
            with pytest.raises(TypeError, match="code must be an int"):
                npu_faults.inject("aclrtMalloc", "207001")
            with pytest.raises(ValueError, match="nth must be"):
                npu_faults.inject("aclrtMalloc", 207001, nth=-1)
            with pytest.raises(TypeError, match="func must be"):
                npu_faults.inject("", 207001)
        """,
    )
    result.assert_outcomes(passed=4)


LEAKY = """
    import pytest
    import pyacl_rt as npu

    KEEP = []

    def test_leaks_a_stream_and_a_buffer():
        KEEP.append(npu.Stream())
        KEEP.append(npu.HostBuffer(4096))

    def test_clean():
        with npu.Stream() as s:
            npu.DeviceBuffer(64, stream=s).close()

    @pytest.mark.npu_no_leak_check
    def test_opted_out():
        KEEP.append(npu.Event())
        KEEP[-1].record()
"""


def test_leak_check_names_what_leaked(run) -> None:  # type: ignore[no-untyped-def]
    result = run(LEAKY, "-p", "no:randomly")
    result.assert_outcomes(passed=3, errors=1)
    out = result.stdout.str()
    assert "ERROR at teardown of test_leaks_a_stream_and_a_buffer" in out
    result.stdout.fnmatch_lines(
        [
            "*pyacl_rt objects left alive by the test*",
            "*device 0: streams 0 -> 1*",
            "*host: host_allocations 0 -> 1, host_bytes 0 -> 4096*",
            "*mock leak report:*",
            "*<Stream owned 0x* on device 0> created at:*",
            "*(creation site not recorded: rerun with --npu-leak-frames 12)*",
        ]
    )
    assert "test_opted_out" not in out.split("short test summary")[1]


ARMED = """
import os

import pyacl_rt as npu
from pyacl_rt import _reportcore

KEEP = []


def test_leaves_an_await_armed():
    npu.set_device(0)
    inbox = _reportcore.Inbox(os.eventfd(0, os.EFD_CLOEXEC))
    KEEP.append(inbox)
    KEEP.append(inbox.arm(1, 0))  # a record whose completion never runs


def test_clean():
    npu.set_device(0)
"""


def test_leak_check_reports_awaits_left_armed(run) -> None:  # type: ignore[no-untyped-def]
    result = run(ARMED, "-p", "no:randomly")
    result.assert_outcomes(passed=2, errors=1)
    out = result.stdout.str()
    assert "ERROR at teardown of test_leaves_an_await_armed" in out
    result.stdout.fnmatch_lines(["*1 await(s) still armed after the devices were synchronized*"])


def test_leak_report_shows_where_objects_were_created(run) -> None:  # type: ignore[no-untyped-def]
    result = run(LEAKY, "--npu-leak-frames", "8", "-k", "leaks")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*<Stream owned 0x* on device 0> created at:*",
            '*File "*test_it.py", line 7',
            "*KEEP.append(npu.Stream())",
            "*<HostBuffer 4096 bytes* created at:*",
            '*File "*test_it.py", line 8',
            "*KEEP.append(npu.HostBuffer(4096))",
        ]
    )
    assert "_pytest" not in result.stdout.str().split("created at:")[1]


def test_no_leak_check_option(run) -> None:  # type: ignore[no-untyped-def]
    result = run(LEAKY, "--npu-no-leak-check")
    result.assert_outcomes(passed=3)


MARKED = """
    import pytest
    import pyacl_rt as npu
    from pyacl_rt.mock import mock_control

    def test_default_config():
        assert npu.device_count() == 8

    @pytest.mark.npu_mock(devices=2, memory="1GiB", soc="Ascend310P3")
    def test_small(request):
        assert npu.device_count() == 2
        assert mock_control().soc_name == "Ascend310P3"
        free, total = npu.mem_get_info(0)
        assert total == 1 << 30

    @pytest.mark.npu_mock(devices=2, memory=1 << 30, soc="Ascend310P3")
    @pytest.mark.parametrize("n", [1, 2])
    def test_same_config_same_child(n):
        import os
        assert npu.device_count() == 2
        print("child pid", os.getpid())

    @pytest.mark.npu_mock(devices=3)
    def test_other_config_fails():
        assert npu.device_count() == 4, "three devices"

    @pytest.mark.npu_mock(devices=8)
    def test_this_process_config_runs_here():
        import os
        assert os.environ.get("ASCEND_MOCK_DEVICE_COUNT") is None
"""


def test_npu_mock_marker_runs_a_child_per_configuration(run) -> None:  # type: ignore[no-untyped-def]
    result = run(MARKED, "-v", "-rA")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_default_config PASSED*",
            "*test_small PASSED*",
            "*test_same_config_same_child?1? PASSED*",
            "*test_same_config_same_child?2? PASSED*",
            "*test_other_config_fails FAILED*",
            "*test_this_process_config_runs_here PASSED*",
            "*AssertionError: three devices*",
        ]
    )
    pids = {line.split()[-1] for line in result.outlines if line.startswith("child pid")}
    assert len(pids) == 1, result.outlines  # both parametrized cases ran in one child


def test_npu_mock_marker_deselection_exitfirst_and_junit(run, pytester: pytest.Pytester) -> None:  # type: ignore[no-untyped-def]
    result = run(MARKED, "-x", "-k", "default or other or this", "--junitxml", "out.xml")
    result.assert_outcomes(passed=1, failed=1)  # -x stopped before test_this_process...
    assert "this_process_config" not in result.stdout.str()
    xml = (pytester.path / "out.xml").read_text()
    assert "three devices" in xml


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("devices=-1", "devices must be in 0..64"),
        ("devices='2'", "devices must be an int"),
        ("memory='lots'", "is not a size"),
        ("soc='Ascend 910'", "soc must be 1..63 printable"),
        ("cores=3", "unknown argument"),
        ("2", "keyword arguments only"),
    ],
)
def test_npu_mock_bad_arguments_are_usage_errors(run, args: str, message: str) -> None:  # type: ignore[no-untyped-def]
    result = run(f"import pytest\n@pytest.mark.npu_mock({args})\ndef test_x():\n    pass\n")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()
    assert "test_it.py::test_x" in result.stderr.str()


def test_npu_real_without_cards_skips_cleanly(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import pytest
        import pyacl_rt as npu

        def test_on_a_card():
            assert npu.device_count() > 0

        def test_faults(npu_faults):
            pass
        """,
        "--npu-real",
        "-rs",
    )
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*--npu-real: no usable CANN runtime (LibraryNotFoundError*"])


def test_npu_sanitize_turns_the_sanitizer_on(run) -> None:  # type: ignore[no-untyped-def]
    from pyacl_rt import lowlevel

    lowlevel.load()
    import ctypes

    has_sanitizer = hasattr(
        ctypes.CDLL(lowlevel.selection().path), "aclmockSanitizerGetReportCount"
    )
    result = run(
        """
        import os
        import pyacl_rt as npu

        def test_env():
            assert os.environ["ASCEND_MOCK_SANITIZE"] == "1"
            npu.Stream().close()
        """,
        "--npu-sanitize",
    )
    if has_sanitizer:
        result.assert_outcomes(passed=1)
    else:  # a mock without the race sanitizer says so instead of passing silently
        result.assert_outcomes(passed=1, errors=1)
        result.stdout.fnmatch_lines(["*this mock has no race sanitizer*"])
    bad = run("def test_x():\n    pass\n", "--npu-sanitize", "--npu-real")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR


def test_npu_sanitize_fails_a_racing_test_and_passes_a_clean_one(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import numpy as np
        import pyacl_rt as npu

        def test_race():
            s1, s2 = npu.Stream(), npu.Stream()
            buf = npu.DeviceBuffer(4096)
            out = npu.HostBuffer(4096)
            npu.memset(buf, 1, stream=s1, non_blocking=True)
            npu.copy(out, buf, stream=s2, non_blocking=True)
            npu.synchronize()
            s1.close(); s2.close(); buf.close(); out.close()

        def test_host_read_before_sync():
            s = npu.Stream()
            buf = npu.DeviceBuffer(256)
            out = npu.HostBuffer(256)
            buf.copy_to_host_async(out, stream=s)
            assert np.asarray(out).size == 256
            s.synchronize()
            s.close(); buf.close(); out.close()

        def test_clean():
            s1, s2 = npu.Stream(), npu.Stream()
            buf = npu.DeviceBuffer(4096)
            out = npu.HostBuffer(4096)
            npu.memset(buf, 1, stream=s1, non_blocking=True)
            s2.wait_stream(s1)
            npu.copy(out, buf, stream=s2, non_blocking=True)
            s2.synchronize()
            assert bytes(out) == b"\\x01" * 4096
            s1.close(); s2.close(); buf.close(); out.close()
        """,
        "--npu-sanitize",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_race*",
            "*race sanitizer reported 1 race(s) during the test:*",
            '*race between two streams*"aclrtMemcpyAsync" on stream*[[]test_it.py:9[]]*'
            '"aclrtMemsetAsync" on stream*[[]test_it.py:8[]]*',
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_host_read_before_sync*",
            '*host access while a task is pending*"host read" on the host [[]test_it.py:18[]]*',
        ]
    )
    # the same tests without the option: no sanitizer, no failure
    plain = run(
        """
        import pyacl_rt as npu

        def test_race():
            s1, s2 = npu.Stream(), npu.Stream()
            buf = npu.DeviceBuffer(4096)
            out = npu.HostBuffer(4096)
            npu.memset(buf, 1, stream=s1, non_blocking=True)
            npu.copy(out, buf, stream=s2, non_blocking=True)
            npu.synchronize()
            s1.close(); s2.close(); buf.close(); out.close()
        """
    )
    plain.assert_outcomes(passed=1)


def test_example_test_file_passes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYACL_RT_BACKEND", "mock")
    example = REPO / "examples" / "testing" / "test_example.py"
    pytester.makepyfile(test_example=example.read_text())
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=_count_tests(example))


def _count_tests(path: Path) -> int:
    import ast

    tree = ast.parse(path.read_text())
    return sum(isinstance(n, ast.FunctionDef) and n.name.startswith("test_") for n in tree.body)


def test_npu_races_marks_a_test_that_races_on_purpose(run) -> None:  # type: ignore[no-untyped-def]
    result = run(
        """
        import pytest
        import pyacl_rt as npu

        @pytest.mark.npu_races("a stress test: the bytes do not matter")
        def test_races_on_purpose():
            s1, s2 = npu.Stream(), npu.Stream()
            buf = npu.DeviceBuffer(4096)
            npu.memset(buf, 1, stream=s1, non_blocking=True)
            npu.memset(buf, 2, stream=s2, non_blocking=True)
            npu.synchronize()
            s1.close(); s2.close(); buf.close()

        KEPT = []

        def test_leaks_all_the_same():
            KEPT.append(npu.Stream())
        """,
        "--npu-sanitize",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=2, errors=1)  # the leak check still runs
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_leaks_all_the_same*"])
    assert "race sanitizer reported" not in result.stdout.str()
    markers = run("def test_nothing():\n    pass\n", "--markers")
    markers.stdout.fnmatch_lines(["*npu_races(reason)*"])
