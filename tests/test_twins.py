"""pyacl_rt._twins (``pyacl_rt.mock.register_kernel``): Python host twins of the kernels
of device binaries loaded on the mock."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_lowlevel_kernels import _device_elf  # a device ELF for another machine

import pyacl_rt as npu
from pyacl_rt import mock
from pyacl_rt.mock import In, InOut, Out, Value

VADD = (In("float32", "n"), In("float32", "n"), Out("float32", "n"), Value("uint32", "n"))


@pytest.fixture
def binary(mock_loaded: Any, tmp_path: Path) -> Iterator[npu.ObjectCode]:
    path = tmp_path / "kernels.o"
    path.write_bytes(_device_elf(["vector_add", "scale", "boom", "lengths"]))
    with npu.ObjectCode.from_file(path) as code:
        yield code
    for name in mock.registered_kernels():
        mock.unregister_kernel(name)


def _vector_add(block: int, blocks: int, x: Any, y: Any, z: Any, n: Any) -> None:
    per = (int(n) + blocks - 1) // blocks
    part = slice(block * per, min(int(n), (block + 1) * per))
    z[part] = x[part] + y[part]


def _dev(values: np.ndarray[Any, Any]) -> npu.DeviceBuffer:
    buf = npu.DeviceBuffer(values.nbytes)
    npu.copy(buf, values)
    return buf


@pytest.mark.parametrize("independent", [False, True])
def test_python_twin_vector_add_over_1mib(binary: npu.ObjectCode, independent: bool) -> None:
    calls: list[tuple[int, int, int]] = []

    def twin(block: int, blocks: int, *args: Any) -> None:
        calls.append((block, blocks, threading.get_ident()))
        _vector_add(block, blocks, *args)

    mock.register_kernel("vector_add", twin, VADD, independent_blocks=independent)
    assert "vector_add" in mock.registered_kernels()
    k = binary.get_kernel("vector_add")
    assert k.num_arguments == 4 and k.arguments_info[3].size == 4  # type: ignore[index]
    n = (1 << 20) // 4
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 2.0, dtype=np.float32)
    dx, dy, dz = _dev(x), _dev(y), npu.DeviceBuffer(x.nbytes)
    s = npu.Stream()
    npu.launch(s, npu.LaunchConfig(blocks=8), k, dx, dy, dz, np.uint32(n))
    s.synchronize()
    assert np.array_equal(np.frombuffer(dz.copy_to_host(), np.float32), x + y)
    assert sorted(c[0] for c in calls) == list(range(8)) and {c[1] for c in calls} == {8}
    if not independent:
        assert [c[0] for c in calls] == list(range(8))  # in order
    assert threading.get_ident() not in {c[2] for c in calls}  # on the stream's worker
    for b in (dx, dy, dz):
        b.close()
    s.close()


def test_views_modes_and_values(binary: npu.ObjectCode) -> None:
    seen: dict[str, Any] = {}

    def scale(block: int, blocks: int, src: Any, dst: Any, factor: Any, n: Any) -> None:
        seen["types"] = (src.dtype, dst.dtype, type(factor), type(n), len(src))
        seen["src_writable"] = src.flags.writeable
        dst[:] = dst * factor + src

    mock.register_kernel(
        "scale",
        scale,
        (In("int32", lambda f, n: n), InOut("int32", "n"), Value("float64"), Value("uint64", "n")),
        kernel_type="vector",
    )
    k = binary.get_kernel("scale")
    assert k.attributes.kernel_type == "vector"
    src = _dev(np.arange(6, dtype=np.int32))
    dst = _dev(np.ones(6, dtype=np.int32))
    s = npu.Stream()
    npu.launch(s, npu.LaunchConfig(), k, src, dst, np.float64(3.0), np.uint64(6))
    s.synchronize()
    assert np.array_equal(np.frombuffer(dst.copy_to_host(), np.int32), 3 + np.arange(6))
    assert seen["types"] == (np.int32, np.int32, np.float64, np.uint64, 6)
    assert seen["src_writable"] is False
    src.close()
    dst.close()
    s.close()


def test_twin_exception_faults_the_stream_and_is_chained(binary: npu.ObjectCode) -> None:
    def boom(block: int, blocks: int, x: Any) -> None:
        raise ZeroDivisionError("twin failed")

    mock.register_kernel("boom", boom, (In("uint8", 4),))
    k = binary.get_kernel("boom")
    buf = npu.DeviceBuffer(4)
    s = npu.Stream()
    npu.launch(s, npu.LaunchConfig(2), k, buf)
    with pytest.raises(npu.AclError) as ei:
        s.synchronize()
    assert ei.value.code == 507015
    assert isinstance(ei.value.__cause__, ZeroDivisionError)
    assert "Python twin of kernel 'boom' raised ZeroDivisionError" in ei.value.__notes__[0]
    s.synchronize()  # reported once; the stream works again
    buf.close()
    s.close()


def test_a_twin_must_not_wait_for_the_device(binary: npu.ObjectCode) -> None:
    def waits(block: int, blocks: int, x: Any) -> None:
        npu.synchronize()  # would wait for the stream running this very twin

    mock.register_kernel("boom", waits, (In("uint8", 4),))
    buf = npu.DeviceBuffer(4)
    s = npu.Stream()
    npu.launch(s, npu.LaunchConfig(), binary.get_kernel("boom"), buf)
    with pytest.raises(npu.AclError) as ei:
        s.synchronize()
    assert isinstance(ei.value.__cause__, npu.CallbackContextError)
    assert ei.value.__cause__.__traceback__ is not None  # frames cleared, not dropped
    buf.close()
    s.close()


def test_a_declared_length_past_the_allocation_faults(binary: npu.ObjectCode) -> None:
    touched: list[int] = []

    def lengths(block: int, blocks: int, x: Any) -> None:
        touched.append(len(x))

    # a fixed length is declared to the mock as the argument's extent: the launch
    # faults before the twin runs, naming the argument
    mock.register_kernel("lengths", lengths, (Out("float32", 1 << 20),))  # 4 MiB view
    k = binary.get_kernel("lengths")
    buf = npu.DeviceBuffer(64)
    s = npu.Stream()
    npu.launch(s, npu.LaunchConfig(), k, buf)
    with pytest.raises(npu.AclError) as ei:
        s.synchronize()
    text = f"{ei.value.recent_message} {ei.value}"
    assert "argument 0" in text and "declares an extent of 4194304 bytes" in text, text
    assert touched == []  # never called with a view beyond the buffer
    s.close()
    mock.unregister_kernel("lengths")
    # a computed length is the twin's own check
    mock.register_kernel("lengths", lengths, (Out("float32", lambda: 1 << 20),))
    k = binary.get_kernel("lengths")
    s = npu.Stream()
    npu.launch(s, npu.LaunchConfig(), k, buf)
    with pytest.raises(npu.AclError) as ei:
        s.synchronize()
    assert "past the end of its allocation" in str(ei.value.__cause__)
    assert touched == []
    buf.close()
    s.close()


def test_null_pointer_is_none(binary: npu.ObjectCode) -> None:
    got: list[object] = []
    mock.register_kernel("lengths", lambda b, n, x: got.append(x), (Out("float32", 4),))
    k = binary.get_kernel("lengths")
    s = npu.Stream()
    npu.launch(s, npu.LaunchConfig(), k, np.uint64(0))  # a raw NULL address
    s.synchronize()
    assert got == [None]
    s.close()


def test_unregistered_kernel_fails_at_the_launch(binary: npu.ObjectCode) -> None:
    k = binary.get_kernel("vector_add")
    a = npu.DeviceBuffer(64)
    s = npu.Stream()
    with pytest.raises(npu.FeatureNotSupportedError, match="vector_add"):
        npu.launch(s, npu.LaunchConfig(), k, a, a, a, np.uint32(4))
    mock.register_kernel("vector_add", _vector_add, VADD)
    npu.launch(s, npu.LaunchConfig(), k, a, a, a, np.uint32(4))
    mock.unregister_kernel("vector_add")
    s.synchronize()  # the queued launch kept its twin
    with pytest.raises(KeyError):
        mock.unregister_kernel("vector_add")
    a.close()
    s.close()


def test_register_argument_errors(mock_loaded: Any) -> None:
    with pytest.raises(ValueError, match="name"):
        mock.register_kernel("", _vector_add, VADD)
    with pytest.raises(TypeError, match="callable"):
        mock.register_kernel("k", 5, VADD)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="In/Out/InOut/Value"):
        mock.register_kernel("k", _vector_add, ("float32",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no Value parameter named 'm'"):
        mock.register_kernel("k", _vector_add, (In("float32", "m"),))
    with pytest.raises(TypeError, match="not a numpy dtype"):
        mock.register_kernel("k", _vector_add, (Value("nonsense-type"),))
    with pytest.raises(TypeError, match="length must be"):
        mock.register_kernel("k", _vector_add, (In("float32", 2.5),))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kernel_type"):
        mock.register_kernel("k", _vector_add, VADD, kernel_type="gpu")
    with pytest.raises(TypeError, match="independent_blocks"):
        mock.register_kernel("k", _vector_add, VADD, independent_blocks=1)  # type: ignore[arg-type]
    mock.register_kernel("k", _vector_add, VADD)
    with pytest.raises(ValueError, match="registered already"):
        mock.register_kernel("k", _vector_add, VADD)
    mock.unregister_kernel("k")
    with pytest.raises(TypeError):
        mock.unregister_kernel(5)  # type: ignore[arg-type]
    assert repr(In("float32", "n")) == "In('float32', 'n')" and "name='n'" in repr(VADD[3])


def test_finalize_unregisters_every_twin(run_python: Any, tmp_path: Path) -> None:
    path = tmp_path / "k.o"
    path.write_bytes(_device_elf(["vector_add"]))
    proc = run_python(
        f"""
        import numpy as np, pyacl_rt as npu
        from pyacl_rt import mock
        from pyacl_rt.mock import In, Out, Value
        from pyacl_rt import _twins
        mock.register_kernel("vector_add", lambda b, n, x, y, z, c: None,
                             (In("f4", "c"), In("f4", "c"), Out("f4", "c"), Value("u4", "c")))
        code = npu.ObjectCode.from_file({str(path)!r})
        k = code.get_kernel("vector_add")
        a = npu.DeviceBuffer(64)
        s = npu.Stream()
        for _ in range(10):
            npu.launch(s, npu.LaunchConfig(4), k, a, a, a, np.uint32(16))
        npu.finalize()
        ffi, lib = _twins._mock_api()
        assert mock.registered_kernels() == []
        assert lib.aclmockKernelIsRegistered(b"vector_add") == 0
        print("ok")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok" and proc.stderr == ""
