"""Shared by the seeded ordering bugs of this folder (run by tests/test_sanitizer_corpus.py).

Each program imports this first: ``BUG`` is True for ``python NN_name.py bug`` (the
seeded bug) and False for ``python NN_name.py fixed`` (the same program with the
ordering it lacks). :func:`finish` waits for the device and prints one line
``CORPUS {json}`` with the sanitizer's reports and the RaceWarnings issued, which
tests/test_sanitizer_corpus.py checks against the program's ``EXPECT`` and its
``# <- current`` / ``# <- previous`` line markers.
"""

from __future__ import annotations

import json
import sys
import warnings

import pyacl_rt as npu
from pyacl_rt import mock

if len(sys.argv) != 2 or sys.argv[1] not in ("bug", "fixed"):
    raise SystemExit(f"usage: python {sys.argv[0]} bug|fixed")
BUG = sys.argv[1] == "bug"

_caught = warnings.catch_warnings(record=True)
_log = _caught.__enter__()
warnings.simplefilter("always", npu.RaceWarning)


def finish() -> None:
    """Wait for every stream, then print what the sanitizer reported."""
    npu.synchronize()
    out = {
        "mode": mock.sanitizer_mode(),
        "reports": [
            {
                "kind": r.kind,
                "size": r.size,
                "current": r.current._asdict(),
                "previous": r.previous._asdict(),
                "message": r.message,
            }
            for r in mock.sanitizer_reports()
        ],
        "warnings": [
            {"file": w.filename, "line": w.lineno, "message": str(w.message)}
            for w in _log
            if issubclass(w.category, npu.RaceWarning)
        ],
    }
    print("CORPUS " + json.dumps(out))
