"""pyacl_rt._ipc: DeviceBuffer / Event shared with spawned processes.

Each test spawns helper processes (``multiprocessing`` spawn context: the mock must not
be forked after ``aclInit``) that talk to this process through queues. Covered: a
buffer sent through a queue arrives as a zero-copy view (writes seen both ways), the
exporter keeps the memory until the importer is done (``close()`` refuses meanwhile,
``del`` is fine), explicit picklable handles (plain ``pickle``), the pid whitelist,
misuse (a handle opened in its own process, an exporter that exited, a loaded-twice
pickle), interprocess events (a wait in one process follows the other's record) and
the lazy registration of the reductions.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing as mp
import pickle
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

import pytest

import pyacl_rt as npu
from pyacl_rt import errors
from pyacl_rt._memory import backend

TIMEOUT_S = 120
MIB = 1 << 20


def _child(fn: Callable[..., None], out: Any, *args: Any) -> None:
    try:
        fn(*args)
        out.put(None)
    except BaseException:
        out.put(traceback.format_exc())


def _spawn(fn: Callable[..., None], *args: Any) -> tuple[Any, Any]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    p = ctx.Process(target=_child, args=(fn, out, *args))
    p.start()
    return p, out


def _join(p: Any, out: Any) -> None:
    try:
        err = out.get(timeout=TIMEOUT_S)
    finally:
        p.join(TIMEOUT_S)
        if p.is_alive():
            p.kill()
    assert err is None, err
    assert p.exitcode == 0


# ------------------------------------------------------------ queue: zero-copy
def _importer_rw(q: Any, back: Any) -> None:
    buf = q.get()
    assert isinstance(buf, npu.DeviceBuffer) and buf.nbytes == MIB
    assert set(buf.copy_to_host()) == {0x5A}  # the exporter's bytes
    buf[: MIB // 2].fill(0x33)  # seen by the exporter (zero-copy)
    back.put("written")
    assert q.get() == "rewritten"
    assert set(buf.copy_to_host()[MIB // 2 :]) == {0x44}  # the exporter's later write
    buf.close()
    back.put("closed")


def test_buffer_through_a_queue_is_the_same_memory() -> None:
    ctx = mp.get_context("spawn")
    q, back = ctx.Queue(), ctx.Queue()
    p, out = _spawn(_importer_rw, q, back)
    npu.DeviceBuffer(4096)  # so that `buf` is not at the start of its segment
    buf = npu.DeviceBuffer(MIB)
    buf.fill(0x5A)
    q.put(buf)
    assert back.get(timeout=TIMEOUT_S) == "written"
    data = buf.copy_to_host()
    assert set(data[: MIB // 2]) == {0x33} and set(data[MIB // 2 :]) == {0x5A}
    with pytest.raises(BufferError, match="shared with other processes"):
        buf.close()  # the importer still has it open
    assert not buf.closed
    buf[MIB // 2 :].fill(0x44)
    q.put("rewritten")
    assert back.get(timeout=TIMEOUT_S) == "closed"
    _join(p, out)
    buf.close()  # the importer closed: close() polls and succeeds
    assert buf.closed


def _importer_late(q: Any, back: Any) -> None:
    assert q.get() == "go"
    buf = q.get()
    assert set(buf.copy_to_host()) == {0x21}
    del buf
    gc.collect()
    back.put("dropped")


def test_exporter_keeps_memory_until_the_importer_is_done() -> None:
    ctx = mp.get_context("spawn")
    q, back = ctx.Queue(), ctx.Queue()
    p, out = _spawn(_importer_late, q, back)
    before = npu.memory_allocated()
    buf = npu.DeviceBuffer(3 * MIB)
    buf.fill(0x21)
    q.put("go")
    q.put(buf)
    del buf  # dropped by the exporter before the importer even received it
    gc.collect()
    npu.ipc_collect()
    assert npu.memory_allocated() == before + 3 * MIB  # still kept for the importer
    assert back.get(timeout=TIMEOUT_S) == "dropped"
    _join(p, out)
    assert npu.ipc_collect() >= 1
    assert npu.memory_allocated() == before


def _import_other_device(q: Any, back: Any) -> None:
    h = q.get()
    assert npu.current_device() == 0
    buf = npu.DeviceBuffer.from_ipc_handle(h)
    # the exporter's card (physical 1) is visible here: the memory is device 1's
    assert buf.device_index == 1 and h.device == 1
    assert set(buf.copy_to_host()) == {0x61}
    other = npu.DeviceBuffer(4096, device=0)
    npu.copy(other, buf)  # across devices, as with any device-1 buffer
    assert set(other.copy_to_host()) == {0x61}
    other.close()
    buf.close()
    back.put("ok")


def test_import_lands_on_the_exporters_device() -> None:
    ctx = mp.get_context("spawn")
    q, back = ctx.Queue(), ctx.Queue()
    p, out = _spawn(_import_other_device, q, back)
    buf = npu.DeviceBuffer(4096, device=1)
    buf.fill(0x61)
    q.put(buf.ipc_handle())
    assert back.get(timeout=TIMEOUT_S) == "ok"
    _join(p, out)
    npu.ipc_collect()
    buf.close()


def _forwarder(qa: Any, qb: Any, back: Any) -> None:
    buf = qa.get()
    qb.put(buf[4096:8192])  # a view of an imported buffer, shared further
    with pytest.raises(errors.IpcError, match="only as it was exported"):
        buf.ipc_handle(pids=[1234])
    assert back.get() == "C done"
    buf.close()


def _final_importer(qb: Any, back: Any) -> None:
    view = qb.get()
    assert view.nbytes == 4096 and set(view.copy_to_host()) == {0x77}
    view.close()
    back.put("C done")


def test_an_imported_buffer_can_be_sent_further() -> None:
    ctx = mp.get_context("spawn")
    qa, qb, back = ctx.Queue(), ctx.Queue(), ctx.Queue()
    pb, outb = _spawn(_forwarder, qa, qb, back)
    pc, outc = _spawn(_final_importer, qb, back)
    buf = npu.DeviceBuffer(3 * 4096)
    buf.fill(0)
    buf[4096:8192].fill(0x77)
    qa.put(buf)
    _join(pc, outc)
    _join(pb, outb)
    buf.close()  # both importers are done (the close polls)


def _many(q: Any, back: Any, n: int) -> None:
    bufs = [q.get() for _ in range(n)]
    assert [b[:1].copy_to_host()[0] for b in bufs] == [i % 256 for i in range(n)]
    for b in bufs[::2]:
        b.close()  # half closed, the other half left to the process exit
    back.put("half")
    assert q.get() == "exit"


def test_many_buffers_and_an_importer_that_exits_without_closing() -> None:
    n = 40
    ctx = mp.get_context("spawn")
    q, back = ctx.Queue(), ctx.Queue()
    p, out = _spawn(_many, q, back, n)
    bufs = [npu.DeviceBuffer(4096) for _ in range(n)]
    for i, b in enumerate(bufs):
        b.fill(i % 256)
        q.put(b)
    assert back.get(timeout=TIMEOUT_S) == "half"
    npu.ipc_collect()
    for b in bufs[::2]:
        b.close()  # their imports were closed
    with pytest.raises(BufferError):
        bufs[1].close()
    q.put("exit")
    _join(p, out)
    npu.ipc_collect()  # the importer's pid is gone: its slots count as released
    for b in bufs[1::2]:
        b.close()


# ------------------------------------------------------------ explicit handles
def _open_handle(data: bytes, back: Any) -> None:
    h = pickle.loads(data)
    assert isinstance(h, npu.IpcMemHandle)
    with npu.DeviceBuffer.from_ipc_handle(h) as buf:
        assert bytes(buf.copy_to_host()) == bytes(range(256)) * 16
        buf[:16].fill(1)
    back.put("done")


def test_explicit_handle_pickles_and_opens_in_another_process() -> None:
    buf = npu.DeviceBuffer(4096)
    buf.copy_from_host(bytes(range(256)) * 16)
    h = buf.ipc_handle()
    assert h.nbytes == 4096 and h.pid > 0 and h.size >= 4096
    ctx = mp.get_context("spawn")
    back = ctx.Queue()
    p, out = _spawn(_open_handle, pickle.dumps(h), back)
    assert back.get(timeout=TIMEOUT_S) == "done"
    _join(p, out)
    assert bytes(buf.copy_to_host()[:17]) == b"\x01" * 16 + b"\x10"
    with pytest.raises(BufferError, match="1 IpcMemHandle object"):
        buf.close()  # our own handle object keeps the export
    del h
    buf.close()


def test_native_allocations_are_exported_whole() -> None:
    prev = backend.select("native")  # one aclrtMalloc per buffer
    try:
        buf = npu.DeviceBuffer(MIB)
        buf.copy_from_host(bytes(range(256)) * 16 * 256)
        view = buf[MIB - 4096 :]
        h = view.ipc_handle()
        assert h.offset == MIB - 4096 and h.size >= MIB  # the allocation, and the offset
        ctx = mp.get_context("spawn")
        back = ctx.Queue()
        p, out = _spawn(_open_tail, pickle.dumps(h), back)
        assert back.get(timeout=TIMEOUT_S) == "done"
        _join(p, out)
        del h, view
        buf.close()
    finally:
        backend.select(prev.name)


def _open_tail(data: bytes, back: Any) -> None:
    with npu.DeviceBuffer.from_ipc_handle(pickle.loads(data)) as buf:
        assert bytes(buf.copy_to_host()) == bytes(range(256)) * 16
    back.put("done")


def test_plain_pickle_of_a_buffer_still_refuses() -> None:
    with npu.DeviceBuffer(512) as buf, pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(buf)


def test_open_in_the_exporting_process_raises() -> None:
    buf = npu.DeviceBuffer(4096)
    h = buf.ipc_handle()
    with pytest.raises(errors.IpcError, match="exported by this process"):
        npu.DeviceBuffer.from_ipc_handle(h)
    again = pickle.loads(pickle.dumps(h))  # back home: the slot is given back at once
    with pytest.raises(errors.IpcError, match="exported by this process"):
        npu.DeviceBuffer.from_ipc_handle(again)
    del h, again
    buf.close()


def test_bad_arguments_are_typed() -> None:
    buf = npu.DeviceBuffer(4096)
    with pytest.raises(TypeError, match="iterable of ints"):
        buf.ipc_handle(pids=3)
    with pytest.raises(ValueError, match="empty"):
        buf.ipc_handle(pids=[])
    with pytest.raises(TypeError, match="IpcMemHandle"):
        npu.DeviceBuffer.from_ipc_handle(b"key")
    with pytest.raises(ValueError, match="0 bytes"):
        npu.DeviceBuffer(0).ipc_handle()
    buf.close()
    with pytest.raises(errors.ObjectClosedError):
        buf.ipc_handle()


def _whitelisted(q: Any, back: Any) -> None:
    back.put(npu.ipc_pid())
    h = q.get()
    with pytest.raises(errors.IpcPermissionError, match="whitelist"):
        npu.DeviceBuffer.from_ipc_handle(h)  # not allowed yet
    back.put("refused")
    h2 = q.get()
    with npu.DeviceBuffer.from_ipc_handle(h2) as buf:
        assert set(buf.copy_to_host()) == {9}
    back.put("opened")


def test_pid_whitelist() -> None:
    ctx = mp.get_context("spawn")
    q, back = ctx.Queue(), ctx.Queue()
    p, out = _spawn(_whitelisted, q, back)
    child_pid = back.get(timeout=TIMEOUT_S)
    a = npu.DeviceBuffer(2 * MIB)
    a.fill(9)
    q.put(a.ipc_handle(pids=[npu.ipc_pid()]))  # only this process: the child is refused
    assert back.get(timeout=TIMEOUT_S) == "refused"
    q.put(a.ipc_handle(pids=[child_pid]))
    assert back.get(timeout=TIMEOUT_S) == "opened"
    _join(p, out)
    npu.ipc_collect()  # the child exited: its handles count as released
    a.close()


def _exporter_exits(conn: Any) -> None:
    buf = npu.DeviceBuffer(4096)
    conn.send(pickle.dumps(buf.ipc_handle()))
    assert conn.recv() == "exit"
    npu.finalize()


def test_handle_of_an_exited_exporter_raises() -> None:
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    p, out = _spawn(_exporter_exits, b)
    data = a.recv()
    a.send("exit")
    _join(p, out)
    h = pickle.loads(data)
    with pytest.raises(errors.IpcError, match="exited or finalized"):
        npu.DeviceBuffer.from_ipc_handle(h)


def _load_twice(data: bytes, back: Any) -> None:
    h1 = pickle.loads(data)
    h2 = pickle.loads(data)  # the same bytes again: the slot was claimed by h1
    with npu.DeviceBuffer.from_ipc_handle(h1) as buf:
        assert buf.nbytes == 512
    with pytest.raises(errors.IpcError, match="loaded twice"):
        npu.DeviceBuffer.from_ipc_handle(h2)
    back.put("ok")


def test_a_pickle_loaded_twice_is_refused_the_second_time() -> None:
    buf = npu.DeviceBuffer(512)
    data = pickle.dumps(buf.ipc_handle())
    ctx = mp.get_context("spawn")
    back = ctx.Queue()
    p, out = _spawn(_load_twice, data, back)
    assert back.get(timeout=TIMEOUT_S) == "ok"
    _join(p, out)
    npu.ipc_collect()
    buf.close()


# ------------------------------------------------------------------- events
def _event_waiter(q: Any, back: Any) -> None:
    ev = q.get()
    assert isinstance(ev, npu.Event) and ev.interprocess
    assert not ev.query()  # the exporter's record waits behind its gate
    back.put("pending")

    async def wait() -> None:
        await ev  # completes from the runtime once the exporter's record ran

    asyncio.run(asyncio.wait_for(wait(), TIMEOUT_S))
    assert ev.query()
    ev.synchronize()
    s = npu.Stream()
    ev.wait(s)  # a device-side wait on it works too
    s.synchronize()
    ev.close()
    back.put("done")


def test_interprocess_event_wait_follows_the_other_record() -> None:
    ctx = mp.get_context("spawn")
    q, back = ctx.Queue(), ctx.Queue()
    p, out = _spawn(_event_waiter, q, back)
    gate = threading.Event()
    s = npu.Stream()
    ev = npu.Event(interprocess=True)
    s.launch_host_func(gate.wait, 60)
    ev.record(s)
    q.put(ev)
    del ev  # kept alive until the importer opened it
    gc.collect()
    assert back.get(timeout=TIMEOUT_S) == "pending"
    gate.set()
    assert back.get(timeout=TIMEOUT_S) == "done"
    _join(p, out)
    s.synchronize()
    assert npu.ipc_collect() >= 0


def _open_destroyed_event(data: bytes, back: Any) -> None:
    with pytest.raises(errors.IpcError, match="aclrtIpcOpenEventHandle"):
        npu.Event.from_ipc_handle(pickle.loads(data))
    back.put("refused")


def test_opening_an_event_its_creator_destroyed_raises() -> None:
    ev = npu.Event(interprocess=True)
    data = pickle.dumps(ev.ipc_handle())
    ev.close()  # destroyed before the other process opened it (ACL: do not)
    ctx = mp.get_context("spawn")
    back = ctx.Queue()
    p, out = _spawn(_open_destroyed_event, data, back)
    assert back.get(timeout=TIMEOUT_S) == "refused"
    _join(p, out)
    assert npu.ipc_collect() >= 1  # the slot was given back by the failed open


def test_interprocess_event_rules() -> None:
    with pytest.raises(npu.EventTimingError, match="cannot measure time"):
        npu.Event(enable_timing=True, interprocess=True)
    with pytest.raises(errors.IpcError, match="interprocess"):
        npu.Event().ipc_handle()
    ev = npu.Event(interprocess=True)
    h = ev.ipc_handle()  # creates the ACL event on the current device
    assert ev.handle and len(h.data) == 64 and h.pid > 0
    with pytest.raises(errors.IpcError, match="exported by this process"):
        npu.Event.from_ipc_handle(h)
    with pytest.raises(TypeError, match="IpcEventHandle"):
        npu.Event.from_ipc_handle(b"x" * 64)
    ev.close()
    with pytest.raises(errors.ObjectClosedError):
        ev.ipc_handle()


# ------------------------------------------------------------- registration
def test_reductions_are_registered_lazily() -> None:
    code = (
        "import sys, pyacl_rt\n"
        "assert 'multiprocessing.reduction' not in sys.modules\n"
        "from multiprocessing.reduction import ForkingPickler\n"
        "assert pyacl_rt.DeviceBuffer in ForkingPickler._extra_reducers\n"
        "assert pyacl_rt.Event in ForkingPickler._extra_reducers\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
