"""pyacl_rt._sanitize: the mock's race sanitizer from Python (issue 17).

The mock reads ASCEND_MOCK_SANITIZE once per process, so every case with the sanitizer
on runs in a subprocess. The seeded bugs themselves are tests/sanitizer_corpus/
(tests/test_sanitizer_corpus.py); here: tags, warn/raise, the off state.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import pyacl_rt as npu
from pyacl_rt import _sanitize, _state, mock
from pyacl_rt._raw._extensions import fast as fastcall

RACE = """
import warnings
import pyacl_rt as npu
from pyacl_rt import mock

s1, s2 = npu.Stream(), npu.Stream()
buf = npu.DeviceBuffer(4096)
out = npu.HostBuffer(4096)

def race():
    npu.memset(buf, 1, stream=s1, non_blocking=True)
    npu.copy(out, buf, stream=s2, non_blocking=True)
"""


def _run(code: str, clean_env: Any, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    env.setdefault("ASCEND_MOCK_SANITIZE", "1")
    return subprocess.run(
        [sys.executable, *args, "-c", textwrap.dedent(code)],
        env=clean_env(PYACL_RT_BACKEND="mock", **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _last_json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ off
@pytest.mark.skipif(
    os.environ.get("ASCEND_MOCK_SANITIZE", "0") not in ("", "0"), reason="pytest --npu-sanitize"
)
def test_off_installs_nothing() -> None:
    npu.init()
    assert mock.sanitizer_mode() == "off"
    assert not _sanitize.is_armed() and not _sanitize.armed
    assert mock.sanitizer_reports() == [] and mock.sanitizer_report_count() == 0
    # task calls are gated task wrappers, but with no hook they call straight through
    assert "memcpy_async" in _sanitize.TASK_CALLS
    assert repr(_state.fast.memcpy_async) == "<gated memcpy_async>"


def test_set_race_action_checks_its_argument() -> None:
    with pytest.raises(TypeError, match="must be a str"):
        mock.set_race_action(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'warn' or 'raise'"):
        mock.set_race_action("ignore")
    assert mock.get_race_action() == "warn"
    assert mock.set_race_action("raise") == "warn"
    assert mock.set_race_action("warn") == "raise"


def test_task_hook_rejects_a_non_callable() -> None:
    with pytest.raises(TypeError, match="callable or None"):
        fastcall.set_task_hook(42)
    fastcall.set_task_hook(None)  # off stays off


# ------------------------------------------------------------------- on
def test_every_kind_of_task_carries_the_user_line(clean_env: Any) -> None:
    proc = _run(
        """
        import json, numpy as np
        import pyacl_rt as npu
        from pyacl_rt import mock

        s1, s2 = npu.Stream(), npu.Stream()
        a, b = npu.DeviceBuffer(4096), npu.DeviceBuffer(4096)
        h = npu.HostBuffer(4096)
        npu.memset(a, 1, stream=s1, non_blocking=True)
        b.copy_from_host_async(h, stream=s2)
        npu.copy(b, a, stream=s2, non_blocking=True)
        npu.reduce_async(a, b, "sum", "float32", stream=s1)
        npu.synchronize()
        print(json.dumps([(r.current.name, r.current.tag, r.previous.name, r.previous.tag)
                          for r in mock.sanitizer_reports()]))
        """,
        clean_env,
    )
    found = _last_json(proc)
    assert ["aclrtMemcpyAsync", "<string>:11", "aclrtMemsetAsync", "<string>:9"] in found
    assert ["aclrtReduceAsync", "<string>:12", "aclrtMemcpyAsync", "<string>:11"] in found


def test_warns_once_per_kind_of_race_and_counts_all(clean_env: Any) -> None:
    proc = _run(
        RACE
        + """
import json
with warnings.catch_warnings(record=True) as log:
    warnings.simplefilter("always")
    for _ in range(5):
        race()
    npu.synchronize()
races = [w for w in log if issubclass(w.category, npu.RaceWarning)]
first = races[0].message
print(json.dumps([len(races), races[0].lineno, mock.sanitizer_report_count(),
                  first.report.kind, first.report.current.name, first.report.previous.tag,
                  len(mock.sanitizer_reports())]))
mock.clear_sanitizer_reports()
with warnings.catch_warnings(record=True) as log:
    warnings.simplefilter("always")
    race()
print(json.dumps(sum(issubclass(w.category, npu.RaceWarning) for w in log)))
""",
        clean_env,
    )
    lines = proc.stdout.strip().splitlines()
    # two kinds of race (the copy reads what the memset writes; from the second round the
    # memset also overwrites what the previous round's copy reads): 2 warnings, 9 reports
    assert json.loads(lines[-2]) == [2, 12, 9, "race", "aclrtMemcpyAsync", "<string>:11", 9]
    assert json.loads(lines[-1]) == 1  # cleared: warned again


def test_raise_action_raises_race_error_after_settling_the_stream(clean_env: Any) -> None:
    proc = _run(
        RACE
        + """
import json, traceback
mock.set_race_action("raise")
try:
    race()
except npu.RaceError as exc:
    tb = traceback.extract_tb(exc.__traceback__)
    r = exc.reports[0]
    print(json.dumps([isinstance(exc, npu.AclUsageError), r.kind, r.current.tag,
                      r.previous.tag, s2.query(), "[<string>:12]" in str(exc),
                      r.current.stream == s2.handle, r.previous.stream == s1.handle]))
else:
    print("no RaceError")
npu.synchronize()
npu.copy(out, buf)  # the racing copy may have run before or during the memset
print(json.dumps(bytes(out) == b"\\x01" * 4096))  # the memset ran and nothing broke
""",
        clean_env,
    )
    lines = proc.stdout.strip().splitlines()
    assert json.loads(lines[-2]) == [
        True,
        "race",
        "<string>:12",
        "<string>:11",
        True,
        True,
        True,
        True,
    ]
    assert json.loads(lines[-1]) is True


def test_warnings_filter_error_propagates_the_warning(clean_env: Any) -> None:
    proc = _run(
        RACE
        + """
warnings.simplefilter("error", npu.RaceWarning)
try:
    race()
except npu.RaceWarning as w:
    print("raised", w.report.kind, s2.query())
""",
        clean_env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "raised race True"


def test_host_reads_of_a_host_buffer_are_declared(clean_env: Any) -> None:
    proc = _run(
        """
        import json, warnings, numpy as np
        import pyacl_rt as npu
        from pyacl_rt import mock

        s = npu.Stream()
        dev = npu.DeviceBuffer(256)
        h = npu.HostBuffer(256)
        results = []
        for read in (lambda: memoryview(h).release(), lambda: np.asarray(h), h.tobytes,
                     lambda: h.numpy("float32"), lambda: npu.copy(bytearray(256), h)):
            mock.clear_sanitizer_reports()
            dev.copy_to_host_async(h, stream=s)
            with warnings.catch_warnings(record=True) as log:
                warnings.simplefilter("always")
                read()
            s.synchronize()
            results.append([w.message.report.kind for w in log
                            if issubclass(w.category, npu.RaceWarning)])
        mock.set_race_action("raise")
        dev.copy_to_host_async(h, stream=s)
        try:
            np.asarray(h)
        except npu.RaceError as exc:
            results.append(exc.reports[0].current.name)
        s.synchronize()
        results.append(len(np.asarray(h)))  # after the synchronize: clean
        print(json.dumps(results))
        """,
        clean_env,
    )
    # views, numpy and tobytes are declared reads; a host copy waits for the buffer's
    # streams first (so it is ordered, nothing to report)
    assert _last_json(proc) == [
        ["host_race"],
        ["host_race"],
        ["host_race"],
        ["host_race"],
        [],
        "host read",
        256,
    ]


def test_fail_mode_is_armed_too(clean_env: Any) -> None:
    proc = _run(
        """
        import pyacl_rt as npu
        from pyacl_rt import mock
        print(mock.sanitizer_mode(), npu._sanitize.is_armed())
        """,
        clean_env,
        ASCEND_MOCK_SANITIZE="fail",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["fail", "True"]


def test_clean_program_reports_nothing(clean_env: Any) -> None:
    proc = _run(
        """
        import json, warnings
        import numpy as np
        import pyacl_rt as npu
        from pyacl_rt import mock

        warnings.simplefilter("error", npu.RaceWarning)
        s1, s2 = npu.Stream(), npu.Stream()
        a = npu.DeviceBuffer(1 << 20)
        h = npu.HostBuffer(1 << 20)
        np.asarray(h)[:] = 3
        for _ in range(3):
            a.copy_from_host_async(h, stream=s1)
            e = s1.record_event()
            s2.wait_event(e)
            npu.reduce_async(a, a, "sum", "float32", stream=s2)
            s1.wait_stream(s2)
            a.copy_to_host_async(h, stream=s1)
            s1.synchronize()
            np.asarray(h).sum()
        a.close(); h.close()
        print(json.dumps(mock.sanitizer_report_count()))
        """,
        clean_env,
    )
    assert _last_json(proc) == 0, proc.stderr
    assert "race sanitizer" not in proc.stderr


def test_a_report_is_shown_once(clean_env: Any) -> None:
    """The RaceWarning is the report: the mock does not print it on stderr as well."""
    proc = _run(RACE + "race()\nnpu.synchronize()\n", clean_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("race between two streams") == 1, proc.stderr
    assert "RaceWarning" in proc.stderr
    assert "mock_libascendcl: race sanitizer" not in proc.stderr


def test_region_hooks_take_both_addresses_or_none() -> None:
    from pyacl_rt import _cachecore

    with pytest.raises(ValueError, match="both addresses"):
        _cachecore.set_region_hooks(1, 0)
    with pytest.raises(TypeError):
        _cachecore.set_region_hooks(1)  # type: ignore[call-arg]
