"""pytest plugin for code using pyacl_rt: fresh runtimes, fault injection, mock
configurations, an automatic leak check, the race sanitizer and real cards.

Installing pyacl_rt is enough: the plugin is registered through the ``pytest11`` entry
point (disable it with ``-p no:pyacl_rt``). Until a test uses pyacl_rt nothing is
loaded; tests that never touch the runtime are not affected.

Fixtures:

* ``npu_runtime`` - a fresh runtime for the test (finalized and started again: every
  device reset, no context or stream from earlier tests; mock faults cleared); yields
  the ``pyacl_rt`` module;
* ``npu_faults`` - :class:`NpuFaults`: ``npu_faults.inject("aclrtMalloc", 207001,
  nth=2)`` makes the second next ``aclrtMalloc`` fail with 207001; ``lose_device(0)``;
  undone after the test (mock only; skipped under ``--npu-real``);
* ``npu_control`` - the mock's :class:`~pyacl_rt.mock.MockControl` (live counts, leak
  report);
* ``npu_leak_check`` (autouse) - after each test that used the mock in this process,
  the mock's live counts of contexts, streams, events, device and host allocations are
  back where they were; otherwise the test errors with a report naming what leaked and
  where each live object was created (creation tracebacks come from :mod:`tracemalloc`,
  started by the plugin: ``--npu-leak-frames N``, 0 = off). Opt out per test with
  ``@pytest.mark.npu_no_leak_check``, per run with ``--npu-no-leak-check``.

Marker ``@pytest.mark.npu_mock(devices=2, memory="1GiB", soc="Ascend310P3")``: the test
runs with that mock configuration. The mock reads its configuration once per process,
so tests whose configuration differs from this process's run in one child pytest
process per distinct configuration, their reports replayed here (one pytest start per
configuration, not per test; see :mod:`pyacl_rt.testing._isolate`).

Options: ``--npu-sanitize`` runs the mock with its race sanitizer
(``ASCEND_MOCK_SANITIZE=1``; a test during which it reports a race fails);
``--npu-real`` runs the same tests on the real CANN runtime (every test is skipped
when the machine has no card; tests needing the mock are skipped).

Example: ``examples/testing/test_example.py``.
"""

from __future__ import annotations

from ._faults import NpuFaults
from ._isolate import MockConfig
from ._plugin import (
    npu_control,
    npu_faults,
    npu_leak_check,
    npu_runtime,
    pytest_addoption,
    pytest_collection_finish,
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_runtest_protocol,
    pytest_sessionfinish,
    pytest_unconfigure,
)

__all__ = [
    "MockConfig",
    "NpuFaults",
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

NpuFaults.__module__ = __name__
MockConfig.__module__ = __name__
