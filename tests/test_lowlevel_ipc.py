"""pyacl_rt.lowlevel: the raw IPC calls between two ``multiprocessing`` spawn processes.

An exporter and an importer (both spawned; this process never loads the library) share
device memory by key (pid whitelist, zero-copy in both directions), an IPC event (the
importer waits for the exporter's record), a notify (the importer records, the exporter
waits) and VMM physical memory by shareable handle, with the raw ``lowlevel`` calls a
later Pythonic layer (``DeviceBuffer.from_ipc_handle``, picklable handles) builds on.
The C tests (``mock_libascendcl/tests/c/test_ipc_*.c``) cover the rules in depth.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from multiprocessing.connection import Connection
from typing import Any

import pytest

from pyacl_rt._raw._abi_runtime import CONSTANTS

MIB = 1 << 20
GRAN = 2 * MIB
TIMEOUT_S = 120


def _ok(ll: Any, rc: int, what: str) -> None:
    if rc != 0:
        ll.check(rc, what)  # raises the typed error with the recent message


def _exporter(conn: Connection, results: Any) -> None:
    try:
        from pyacl_rt import lowlevel as ll

        ffi, s = ll.ffi, ll.scratch()
        _ok(ll, ll.aclrtSetDevice(0), "aclrtSetDevice")
        _ok(ll, ll.aclrtCreateStream(s.uptr), "aclrtCreateStream")
        stream = int(s.uptr[0])

        # device memory: exported with the default flag (pid whitelist)
        _ok(ll, ll.aclrtMalloc(s.uptr, MIB, 0), "aclrtMalloc")
        dev = int(s.uptr[0])
        _ok(ll, ll.aclrtMemset(dev, MIB, 0x5A, MIB), "aclrtMemset")
        key = ffi.new("char[65]")
        _ok(ll, ll.aclrtIpcMemGetExportKey(dev, MIB, key, 65, 0), "aclrtIpcMemGetExportKey")
        conn.send(("mem", ffi.string(key).decode()))
        importer_pid = conn.recv()
        pids = ffi.new("int32_t[1]", [importer_pid])
        _ok(ll, ll.aclrtIpcMemSetImportPid(key, pids, 1), "aclrtIpcMemSetImportPid")

        # an IPC event and a notify
        _ok(ll, ll.aclrtCreateEventExWithFlag(s.uptr, CONSTANTS["ACL_EVENT_IPC"]), "create event")
        event = int(s.uptr[0])
        handle = ffi.new("aclrtIpcEventHandle *")
        _ok(ll, ll.aclrtIpcGetEventHandle(event, handle), "aclrtIpcGetEventHandle")
        _ok(ll, ll.aclrtCreateNotify(s.uptr, 0), "aclrtCreateNotify")
        notify = int(s.uptr[0])
        nkey = ffi.new("char[65]")
        flag = CONSTANTS["ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION"]
        _ok(ll, ll.aclrtNotifyGetExportKey(notify, nkey, 65, flag), "aclrtNotifyGetExportKey")

        # VMM physical memory, by shareable handle
        prop = ffi.new("aclrtPhysicalMemProp *")
        prop.handleType = CONSTANTS["ACL_MEM_HANDLE_TYPE_NONE"]
        prop.allocationType = CONSTANTS["ACL_MEM_ALLOCATION_TYPE_PINNED"]
        prop.memAttr = CONSTANTS["ACL_HBM_MEM_HUGE"]
        prop.location.type = CONSTANTS["ACL_MEM_LOCATION_TYPE_DEVICE"]
        prop.location.id = 0
        _ok(ll, ll.aclrtMallocPhysical(s.uptr, GRAN, prop, 0), "aclrtMallocPhysical")
        phys = int(s.uptr[0])
        _ok(ll, ll.aclrtReserveMemAddress(s.uptr, GRAN, 0, 0, 0), "aclrtReserveMemAddress")
        va = int(s.uptr[0])
        _ok(ll, ll.aclrtMapMem(va, GRAN, 0, phys, 0), "aclrtMapMem")
        _ok(ll, ll.aclrtMemset(va, GRAN, 0x3C, GRAN), "aclrtMemset vmm")
        shareable = ffi.new("uint64_t *")
        flag = CONSTANTS["ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION"]
        _ok(ll, ll.aclrtMemExportToShareableHandle(phys, 0, flag, shareable), "export vmm")
        conn.send(
            ("objects", bytes(ffi.buffer(handle)), ffi.string(nkey).decode(), int(shareable[0]))
        )

        # the importer wrote into our memory: seen here, zero-copy
        assert conn.recv() == "written"
        out = ffi.new("unsigned char[4096]")
        out_addr = int(ffi.cast("uintptr_t", out))
        d2h = CONSTANTS["ACL_MEMCPY_DEVICE_TO_HOST"]
        _ok(ll, ll.aclrtMemcpy(out_addr, 4096, dev, 4096, d2h), "aclrtMemcpy")
        assert bytes(ffi.buffer(out, 4096)) == b"\x33" * 4096
        _ok(ll, ll.aclrtMemcpy(out_addr, 4096, va, 4096, d2h), "aclrtMemcpy vmm")
        assert bytes(ffi.buffer(out, 4096)) == b"\x4d" * 4096

        # the importer's notify record wakes our wait; our event record its wait
        _ok(ll, ll.aclrtWaitAndResetNotify(notify, stream, 60), "aclrtWaitAndResetNotify")
        _ok(ll, ll.aclrtSynchronizeStream(stream), "synchronize after the notify wait")
        _ok(ll, ll.aclrtRecordEvent(event, stream), "aclrtRecordEvent")
        conn.send("recorded")

        assert conn.recv() == "closed"  # the importer closed first (the documented order)
        _ok(ll, ll.aclrtIpcMemClose(key), "aclrtIpcMemClose")
        _ok(ll, ll.aclrtFree(dev), "aclrtFree")
        _ok(ll, ll.aclrtUnmapMem(va), "aclrtUnmapMem")
        _ok(ll, ll.aclrtReleaseMemAddress(va), "aclrtReleaseMemAddress")
        _ok(ll, ll.aclrtFreePhysical(phys), "aclrtFreePhysical")
        _ok(ll, ll.aclrtDestroyNotify(notify), "aclrtDestroyNotify")
        _ok(ll, ll.aclrtDestroyEvent(event), "aclrtDestroyEvent")
        _ok(ll, ll.aclrtDestroyStream(stream), "aclrtDestroyStream")
        _ok(ll, ll.aclrtResetDevice(0), "aclrtResetDevice")
        results.put(("exporter", None))
    except BaseException:
        results.put(("exporter", traceback.format_exc()))


def _importer(conn: Connection, results: Any) -> None:
    try:
        from pyacl_rt import errors
        from pyacl_rt import lowlevel as ll

        ffi, s = ll.ffi, ll.scratch()
        _ok(ll, ll.aclrtSetDevice(0), "aclrtSetDevice")
        _ok(ll, ll.aclrtCreateStream(s.uptr), "aclrtCreateStream")
        stream = int(s.uptr[0])
        kind, key = conn.recv()
        assert kind == "mem"
        bkey = key.encode()
        # not whitelisted yet: a typed error naming the whitelist
        rc = ll.aclrtIpcMemImportByKey(s.uptr, bkey, 0)
        assert rc == CONSTANTS["ACL_ERROR_RT_NO_PERMISSION"], rc
        with pytest.raises(errors.AclError, match="whitelist"):
            ll.check(rc, "aclrtIpcMemImportByKey")
        _ok(ll, ll.aclrtDeviceGetBareTgid(s.i32), "aclrtDeviceGetBareTgid")
        conn.send(int(s.i32[0]))
        _, ev_handle, nkey, shareable = conn.recv()
        _ok(ll, ll.aclrtIpcMemImportByKey(s.uptr, bkey, 0), "aclrtIpcMemImportByKey")
        mem = int(s.uptr[0])
        out = ffi.new("unsigned char[4096]")
        out_addr = int(ffi.cast("uintptr_t", out))
        d2h = CONSTANTS["ACL_MEMCPY_DEVICE_TO_HOST"]
        _ok(ll, ll.aclrtMemcpy(out_addr, 4096, mem, 4096, d2h), "aclrtMemcpy")
        assert bytes(ffi.buffer(out, 4096)) == b"\x5a" * 4096  # the exporter's bytes
        _ok(ll, ll.aclrtMemset(mem, 4096, 0x33, 4096), "aclrtMemset imported")

        handle = ffi.new("aclrtIpcEventHandle *")
        ffi.memmove(handle, ev_handle, len(ev_handle))
        _ok(ll, ll.aclrtIpcOpenEventHandle(handle[0], s.uptr), "aclrtIpcOpenEventHandle")
        event = int(s.uptr[0])
        _ok(ll, ll.aclrtNotifyImportByKey(s.uptr, nkey.encode(), 0), "aclrtNotifyImportByKey")
        notify = int(s.uptr[0])
        _ok(ll, ll.aclrtMemImportFromShareableHandle(shareable, 0, s.uptr), "import vmm")
        phys = int(s.uptr[0])
        _ok(ll, ll.aclrtReserveMemAddress(s.uptr, GRAN, 0, 0, 0), "aclrtReserveMemAddress")
        va = int(s.uptr[0])
        _ok(ll, ll.aclrtMapMem(va, GRAN, 0, phys, 0), "aclrtMapMem")
        _ok(ll, ll.aclrtMemcpy(out_addr, 4096, va, 4096, d2h), "aclrtMemcpy vmm")
        assert bytes(ffi.buffer(out, 4096)) == b"\x3c" * 4096
        _ok(ll, ll.aclrtMemset(va, GRAN, 0x4D, GRAN), "aclrtMemset vmm")
        conn.send("written")

        _ok(ll, ll.aclrtRecordNotify(notify, stream), "aclrtRecordNotify")
        assert conn.recv() == "recorded"
        _ok(ll, ll.aclrtStreamWaitEvent(stream, event), "aclrtStreamWaitEvent")
        _ok(ll, ll.aclrtSynchronizeStream(stream), "synchronize after the event wait")
        _ok(ll, ll.aclrtSynchronizeEvent(event), "aclrtSynchronizeEvent")

        _ok(ll, ll.aclrtIpcMemClose(bkey), "aclrtIpcMemClose")
        _ok(ll, ll.aclrtUnmapMem(va), "aclrtUnmapMem")
        _ok(ll, ll.aclrtReleaseMemAddress(va), "aclrtReleaseMemAddress")
        _ok(ll, ll.aclrtFreePhysical(phys), "aclrtFreePhysical")
        _ok(ll, ll.aclrtDestroyNotify(notify), "aclrtDestroyNotify")
        _ok(ll, ll.aclrtDestroyEvent(event), "aclrtDestroyEvent")
        conn.send("closed")
        _ok(ll, ll.aclrtDestroyStream(stream), "aclrtDestroyStream")
        _ok(ll, ll.aclrtResetDevice(0), "aclrtResetDevice")
        results.put(("importer", None))
    except BaseException:
        results.put(("importer", traceback.format_exc()))


def test_ipc_between_two_spawned_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYACL_RT_BACKEND", "mock")
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_exporter, args=(a, results)),
        ctx.Process(target=_importer, args=(b, results)),
    ]
    for p in procs:
        p.start()
    try:
        reports = dict(results.get(timeout=TIMEOUT_S) for _ in procs)
    finally:
        for p in procs:
            p.join(TIMEOUT_S)
            if p.is_alive():
                p.kill()
    assert reports == {"exporter": None, "importer": None}, "\n".join(
        f"--- {who}:\n{tb}" for who, tb in reports.items() if tb
    )
    assert [p.exitcode for p in procs] == [0, 0]
