"""The memory registry (``pyacl_rt._memory.registry``): the memory layer's and the
allocator's process-wide state in one object, forgotten by one reset after fork."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import _clean_env

from pyacl_rt._memory import engine, keepalive, records
from pyacl_rt._memory.registry import MemoryRegistry, memory


def test_the_modules_share_the_one_registry() -> None:
    # nothing of the old per-module globals is left behind
    for mod, name in (
        (records, "_deferred"),
        (records, "_live_lock"),
        (engine, "_peers"),
        (keepalive, "_stranded"),
    ):
        assert not hasattr(mod, name), (mod.__name__, name)
    import pyacl_rt._allocator as A

    assert not hasattr(A, "_raw_owner")
    assert records.memory is memory and engine.memory is memory and A.memory is memory


def test_reset_forgets_everything_and_keeps_the_bound_list() -> None:
    reg = MemoryRegistry()
    deferred, lock = reg.deferred, reg.live_lock
    reg.deferred.append(object())  # type: ignore[arg-type]
    reg.peers.add((object(), 1))
    reg.stranded.append(object())
    reg.raw_owner[16] = object()
    reg.reset()
    assert reg.deferred is deferred  # the compiled _memcore holds this list
    assert not reg.deferred and not reg.peers and not reg.stranded and not reg.raw_owner
    assert reg.live_lock is not lock  # a lock another thread may have held at fork time


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_starts_with_an_empty_registry() -> None:
    code = """
        import os, sys
        import pyacl_rt
        from pyacl_rt._memory.registry import memory
        buf = pyacl_rt.DeviceBuffer(64)
        deferred, lock = memory.deferred, memory.live_lock
        memory.peers.add((object(), 7))
        memory.stranded.append(object())
        memory.raw_owner[12345] = object()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            print("child", memory.deferred is deferred, memory.live_lock is not lock,
                  len(memory.peers), len(memory.stranded), len(memory.raw_owner), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent", len(memory.peers), len(memory.stranded), len(memory.raw_owner),
              flush=True)
        memory.peers.clear(); memory.stranded.clear(); memory.raw_owner.clear()
        buf.close()
        """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_clean_env(PYACL_RT_BACKEND="mock"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "child True True 0 0 0" in lines
    assert "parent 1 1 1" in lines  # the parent keeps its own
