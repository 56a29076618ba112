"""pyacl_rt.errors: code -> class mapping, messages, pickling (pure Python part).

Errors produced for real by the mock (fault injection, device lost, unsupported
functions) are tested in test_runtime.py / the mock-driven tests below.
"""

from __future__ import annotations

import pickle

import pytest

from pyacl_rt import _abi_data, errors
from pyacl_rt.errors import (
    DEVICE_LOST_CODES,
    AclDeviceLostError,
    AclError,
    AclInternalError,
    AclOutOfMemoryError,
    AclResourceError,
    AclServiceError,
    AclUsageError,
    ConfigError,
    FeatureNotSupportedError,
    ForkedProcessError,
    FunctionNotFoundError,
    LibraryNotFoundError,
    NotInitializedError,
    RuntimeFinalizedError,
    error_from_code,
)


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (100000, AclUsageError),
        (100001, NotInitializedError),
        (107002, AclUsageError),
        (145000, AclUsageError),
        (148049, AclUsageError),
        (200000, AclOutOfMemoryError),
        (207001, AclOutOfMemoryError),
        (207018, AclOutOfMemoryError),
        (207000, FeatureNotSupportedError),
        (200006, FeatureNotSupportedError),
        (207004, AclResourceError),
        (300000, AclServiceError),
        (345102, AclServiceError),
        (500000, AclInternalError),
        (507000, AclInternalError),
        (507046, AclInternalError),
        (507010, AclDeviceLostError),
        (507033, AclDeviceLostError),
        (507053, AclDeviceLostError),
        (507054, AclDeviceLostError),
        (507056, AclDeviceLostError),
        (507899, AclDeviceLostError),
        (507901, AclDeviceLostError),
        (999999, AclError),
        (-1, AclError),
    ],
)
def test_class_for_code(code: int, cls: type[AclError]) -> None:
    exc = error_from_code(code, function="aclrtFoo", recent_message="aclrtFoo: text")
    assert type(exc) is cls
    assert exc.code == code
    assert exc.function == "aclrtFoo"
    assert exc.recent_message == "aclrtFoo: text"


def test_family_hierarchy() -> None:
    assert issubclass(AclOutOfMemoryError, MemoryError)
    assert issubclass(AclOutOfMemoryError, AclResourceError)
    assert issubclass(AclDeviceLostError, AclInternalError)
    assert issubclass(NotInitializedError, AclUsageError)
    assert issubclass(RuntimeFinalizedError, NotInitializedError)
    assert issubclass(FunctionNotFoundError, FeatureNotSupportedError)
    assert issubclass(ConfigError, ValueError)
    assert issubclass(LibraryNotFoundError, OSError)
    assert issubclass(ForkedProcessError, RuntimeError)
    for cls in (
        AclUsageError,
        AclResourceError,
        AclServiceError,
        AclInternalError,
        FeatureNotSupportedError,
        FunctionNotFoundError,
        NotInitializedError,
        LibraryNotFoundError,
        ConfigError,
        ForkedProcessError,
    ):
        assert issubclass(cls, AclError)


def test_every_generated_error_code_maps_and_has_name() -> None:
    for name, code in _abi_data.ERROR_CODES.items():
        if code == 0:
            continue
        exc = error_from_code(code, function="f", recent_message=None)
        assert exc.name is not None
        assert exc.name in _abi_data.ERROR_CODES
        assert _abi_data.ERROR_CODES[exc.name] == code
        assert exc.explanation, name
        assert str(code) in str(exc)
        family = code // 100000
        expected = {
            1: AclUsageError,
            2: AclResourceError,
            3: AclServiceError,
            5: AclInternalError,
        }[family]
        assert isinstance(exc, expected), (name, type(exc))


def test_device_lost_codes_are_known_5xxxxx() -> None:
    known = set(_abi_data.ERROR_NAMES)
    for code in DEVICE_LOST_CODES:
        assert code in known
        assert code // 100000 == 5


def test_hand_written_explanations_for_common_codes() -> None:
    generic = {errors.explain(c) for c in (199999, 299999, 399999, 599999)}
    common = [100000, 100001, 100002, 100037, 107000, 107001, 107002, 107003, 107012, 107015]
    common += [107022, 207000, 207001, 207004, 507000, 507004, 507006, 507012, 507046, 507047]
    common += [507899, 507901, 507053, 507054, 507056, 507010, 507015, 207007, 207008, 200000]
    assert len(common) >= 30
    for code in common:
        text = errors.explain(code)
        assert text and text not in generic, code
        assert "\n" not in text


def test_str_is_one_line_plus_runtime_text() -> None:
    exc = error_from_code(
        207001, function="aclrtMalloc", recent_message="aclrtMalloc: out of device memory\n"
    )
    lines = str(exc).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("aclrtMalloc() failed: ACL_ERROR_RT_MEMORY_ALLOCATION (207001).")
    assert "out of memory" in lines[0].lower()
    assert lines[1].strip() == "runtime message: aclrtMalloc: out of device memory"
    no_text = error_from_code(107002, function="aclrtGetDevice", recent_message="")
    assert no_text.recent_message is None
    assert len(str(no_text).splitlines()) == 1
    assert "107002" in repr(no_text)


def _roundtrip(exc: AclError) -> AclError:
    out = pickle.loads(pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(out) is type(exc)
    assert out.__dict__ == exc.__dict__
    assert str(out) == str(exc)
    assert out.args == exc.args
    return out


@pytest.mark.parametrize(
    "code", [100000, 100001, 107002, 207000, 207001, 207004, 300000, 500000, 507054, 999999]
)
def test_pickle_from_code(code: int) -> None:
    exc = error_from_code(code, function="aclrtX", recent_message="aclrtX: why")
    out = _roundtrip(exc)
    assert out.code == code and out.function == "aclrtX" and out.recent_message == "aclrtX: why"
    assert out.name == exc.name and out.explanation == exc.explanation


def test_pickle_special_classes() -> None:
    fnf = FunctionNotFoundError("aclrtNewThing", "/opt/lib/libascendcl.so")
    out = _roundtrip(fnf)
    assert isinstance(out, FunctionNotFoundError)
    assert out.code is None and out.function == "aclrtNewThing"
    assert out.library == "/opt/lib/libascendcl.so"
    assert "aclrtNewThing" in str(out) and "/opt/lib/libascendcl.so" in str(out)

    lnf = LibraryNotFoundError("nothing found", searched=["/a", "/b"], backend="real")
    out2 = _roundtrip(lnf)
    assert isinstance(out2, LibraryNotFoundError)
    assert out2.searched == ("/a", "/b") and out2.backend == "real"
    assert "/a" in str(out2) and "/b" in str(out2)

    cfg = ConfigError.for_variable("PYACL_RT_BACKEND", "x", "one of auto, real, mock")
    out3 = _roundtrip(cfg)
    assert isinstance(out3, ConfigError)
    assert (out3.variable, out3.value, out3.accepted) == (
        "PYACL_RT_BACKEND",
        "x",
        "one of auto, real, mock",
    )

    fork = _roundtrip(ForkedProcessError())
    assert "spawn" in str(fork)

    fin = _roundtrip(RuntimeFinalizedError("used after finalize"))
    assert str(fin) == "used after finalize"


def test_oom_is_catchable_as_memory_error() -> None:
    with pytest.raises(MemoryError):
        raise error_from_code(207001, function="aclrtMalloc")


def test_function_not_found_message() -> None:
    exc = FunctionNotFoundError("aclrtFoo")
    assert exc.library is None
    assert "aclrtFoo" in str(exc) and "loaded library" in str(exc)
