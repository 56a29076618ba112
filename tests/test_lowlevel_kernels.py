"""Kernels on the mock from Python: a device binary (a synthetic ELF for another machine)
loaded through ``pyacl_rt.lowlevel`` runs a host twin that is a Python function,
registered as a cffi callback with the mock's ``aclmockRegisterKernel``
(mock_libascendcl/README.md "Kernels and host twins"). This is the C side that
``pyacl_rt.mock.register_kernel`` will build on."""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cffi
import pytest

AICORE_EXCEPTION = 507015
FEATURE_NOT_SUPPORT = 207000
BLOCKS_INDEPENDENT = 0x1
N = 4096

_CDEF = """
typedef int32_t (*aclmockKernelFn)(void *args, uint32_t idx, uint32_t dim, void *user);
int aclmockRegisterKernel(const char *name, aclmockKernelFn fn, void *userData, uint32_t flags);
int aclmockUnregisterKernel(const char *name);
int32_t aclmockKernelIsRegistered(const char *name);
"""


def _device_elf(names: list[str]) -> bytes:
    """A minimal ELF64 relocatable object for a machine that is not this host, whose
    symbol table names one function per entry of ``names`` (16 bytes of code each)."""
    strtab = b"\0" + b"".join(n.encode() + b"\0" for n in names)
    shstr = b"\0.text\0.symtab\0.strtab\0.shstrtab\0"
    text = bytes(range(16 * len(names)))
    syms = bytes(24)  # the null symbol
    off = 1
    for i, n in enumerate(names):
        # name, info (GLOBAL FUNC), other, shndx 1, value, size
        syms += struct.pack("<IBBHQQ", off, 0x12, 0, 1, 16 * i, 16)
        off += len(n) + 1
    body = text + syms + strtab + shstr
    t_off = 64
    s_off = t_off + len(text)
    st_off = s_off + len(syms)
    sh_off_str = st_off + len(strtab)
    shoff = (64 + len(body) + 7) & ~7
    head = struct.pack(
        "<4sBBBBB7sHHIQQQIHHHHHH",
        b"\x7fELF",
        2,
        1,
        1,
        0,
        0,
        bytes(7),  # ELF64, little endian, version 1
        1,
        0x3A4C,
        1,
        0,
        0,
        shoff,
        0,
        64,
        0,
        0,
        64,
        5,
        4,  # ET_REL, foreign machine
    )
    sections = [
        (0, 0, 0, 0, 0, 0, 0),
        (1, 1, t_off, len(text), 0, 4, 0),  # .text
        (7, 2, s_off, len(syms), 3, 8, 24),  # .symtab -> .strtab
        (15, 3, st_off, len(strtab), 0, 1, 0),  # .strtab
        (23, 3, sh_off_str, len(shstr), 0, 1, 0),  # .shstrtab
    ]
    sh = b"".join(
        struct.pack("<IIQQQQIIQQ", name, typ, 0, 0, o, size, link, 0, align, ent)
        for name, typ, o, size, link, align, ent in sections
    )
    image = head + body
    return image + bytes(shoff - len(image)) + sh


@pytest.fixture()
def mock_api(mock_loaded: Any) -> Iterator[tuple[Any, Any]]:
    """cffi (ABI mode) access to the aclmock kernel registry of the loaded mock."""
    ffi = cffi.FFI()
    ffi.cdef(_CDEF)
    lib = ffi.dlopen(mock_loaded.loaded_libraries()["libascendcl.so"])
    yield ffi, lib


@pytest.fixture()
def device(mock_loaded: Any) -> Iterator[tuple[Any, int]]:
    ll = mock_loaded
    s = ll.scratch()
    assert ll.aclrtSetDevice(0) == 0
    assert ll.aclrtCreateStream(s.uptr) == 0
    stream = int(s.uptr[0])
    yield ll, stream
    assert ll.aclrtDestroyStream(stream) == 0
    assert ll.aclrtResetDevice(0) == 0


def _malloc(ll: Any, size: int) -> int:
    s = ll.scratch()
    assert ll.aclrtMalloc(s.uptr, size, 0) == 0
    return int(s.uptr[0])


def test_python_twin_runs_a_device_binary(
    device: tuple[Any, int], mock_api: tuple[Any, Any], tmp_path: Path
) -> None:
    ll, stream = device
    ffi, api = mock_api
    ptr = ll.ffi
    s = ll.scratch()
    path = tmp_path / "kernels.o"
    path.write_bytes(_device_elf(["vector_add", "other"]))
    assert ll.aclrtBinaryLoadFromFile(str(path).encode(), ptr.NULL, s.uptr) == 0
    binary = int(s.uptr[0])
    assert ll.aclrtBinaryGetFunction(binary, b"vector_add", s.uptr) == 0
    func = int(s.uptr[0])

    x, y, z = (_malloc(ll, 4 * N) for _ in range(3))
    host = ptr.new("float[]", N)
    for i in range(N):
        host[i] = float(i)
    nbytes = 4 * N
    hp = int(ptr.cast("uintptr_t", host))
    assert ll.aclrtMemcpy(x, nbytes, hp, nbytes, 1) == 0
    assert ll.aclrtMemcpy(y, nbytes, hp, nbytes, 1) == 0

    # without a twin the launch fails at once, naming the kernel
    args = ptr.new("uint64_t[4]", [x, y, z, N])
    ap = int(ptr.cast("uintptr_t", args))
    rc = ll.aclrtLaunchKernelWithHostArgs(func, 4, stream, ptr.NULL, ap, 32, ptr.NULL, 0)
    assert rc == FEATURE_NOT_SUPPORT
    assert "vector_add" in (ll.recent_error_message() or "")

    calls: list[tuple[int, int, int]] = []

    @ffi.callback("int32_t(void *, uint32_t, uint32_t, void *)")
    def vector_add(block: Any, idx: int, dim: int, user: Any) -> int:
        a = ffi.cast("uint64_t *", block)
        n = int(a[3])
        xs, ys, zs = (ffi.cast("float *", a[k]) for k in range(3))
        per = (n + dim - 1) // dim
        for i in range(idx * per, min(n, (idx + 1) * per)):
            zs[i] = xs[i] + ys[i]
        calls.append((idx, dim, threading.get_ident()))
        return 0

    assert api.aclmockRegisterKernel(b"vector_add", vector_add, ffi.NULL, BLOCKS_INDEPENDENT) == 0
    try:
        assert api.aclmockKernelIsRegistered(b"vector_add") == 1
        rc = ll.aclrtLaunchKernelWithHostArgs(func, 4, stream, ptr.NULL, ap, 32, ptr.NULL, 0)
        assert rc == 0
        assert ll.aclrtSynchronizeStream(stream) == 0
    finally:
        assert api.aclmockUnregisterKernel(b"vector_add") == 0
    out = ptr.new("float[]", N)
    assert ll.aclrtMemcpy(int(ptr.cast("uintptr_t", out)), nbytes, z, nbytes, 2) == 0
    assert all(out[i] == 2.0 * i for i in range(N))
    assert sorted(c[0] for c in calls) == [0, 1, 2, 3] and {c[1] for c in calls} == {4}
    assert threading.get_ident() not in {c[2] for c in calls}  # on the stream's threads

    for p in (x, y, z):
        assert ll.aclrtFree(p) == 0
    assert ll.aclrtBinaryUnLoad(binary) == 0


def test_python_twin_that_raises_faults_the_stream(
    device: tuple[Any, int], mock_api: tuple[Any, Any], tmp_path: Path
) -> None:
    ll, stream = device
    ffi, api = mock_api
    s = ll.scratch()
    path = tmp_path / "kernels.o"
    path.write_bytes(_device_elf(["broken"]))
    assert ll.aclrtBinaryLoadFromFile(str(path).encode(), ll.ffi.NULL, s.uptr) == 0
    binary = int(s.uptr[0])
    assert ll.aclrtBinaryGetFunction(binary, b"broken", s.uptr) == 0
    func = int(s.uptr[0])

    def swallow(exc_type: Any, value: Any, tb: Any) -> int:
        return 1  # the twin's result: a fault (and no traceback on stderr)

    @ffi.callback("int32_t(void *, uint32_t, uint32_t, void *)", onerror=swallow)
    def broken(block: Any, idx: int, dim: int, user: Any) -> int:
        raise ValueError("the twin failed")

    assert api.aclmockRegisterKernel(b"broken", broken, ffi.NULL, 0) == 0
    try:
        rc = ll.aclrtLaunchKernelWithHostArgs(func, 2, stream, ll.ffi.NULL, 0, 0, ll.ffi.NULL, 0)
        assert rc == 0
        assert ll.aclrtSynchronizeStream(stream) == AICORE_EXCEPTION
        assert "kernel 'broken' faulted in block 0" in (ll.recent_error_message() or "")
        assert ll.aclrtGetLastError(0) == AICORE_EXCEPTION
        assert ll.aclrtSynchronizeStream(stream) == 0  # reported once (continue on failure)
    finally:
        assert api.aclmockUnregisterKernel(b"broken") == 0
    assert ll.aclrtBinaryUnLoad(binary) == 0
