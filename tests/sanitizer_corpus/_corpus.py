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
import os
import subprocess
import sys
import tempfile
import warnings

import pyacl_rt as npu
from pyacl_rt import mock

if len(sys.argv) != 2 or sys.argv[1] not in ("bug", "fixed"):
    raise SystemExit(f"usage: python {sys.argv[0]} bug|fixed")
BUG = sys.argv[1] == "bug"

_caught = warnings.catch_warnings(record=True)
_log = _caught.__enter__()
warnings.simplefilter("always", npu.RaceWarning)


_TWINS = r"""
#include "acl/acl_mock_kernel.h"
/* A kernel that writes / reads its buffer; no extent declared: the mock checks what the
 * launch says (the window of the buffer passed) or the caching allocator's block. */
ACLMOCK_KERNEL(corpus_write, 0, ACLMOCK_PTR_OUT)
{ (void)args; (void)blockIdx; (void)blockDim; (void)userData; return 0; }
ACLMOCK_KERNEL(corpus_read, 0, ACLMOCK_PTR_IN)
{ (void)args; (void)blockIdx; (void)blockDim; (void)userData; return 0; }
"""


def kernels() -> tuple[npu.Kernel, npu.Kernel]:
    """The kernels ``corpus_write`` (writes its buffer) and ``corpus_read`` (reads it),
    host twins built with the C compiler (``CC``, default ``cc``)."""
    d = tempfile.mkdtemp(prefix="corpus_twins_")
    src, so = os.path.join(d, "twins.c"), os.path.join(d, "twins.so")
    with open(src, "w") as f:
        f.write(_TWINS)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-shared", "-fPIC", *mock.cflags(), src, "-o", so], check=True)
    code = npu.ObjectCode.from_file(so)
    return code.get_kernel("corpus_write"), code.get_kernel("corpus_read")


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
