"""The mock runtime bundled with pyacl_rt: build flags for C/C++ users and test controls.

Command line, in the spirit of ``pkg-config``::

    python -m pyacl_rt.mock --cflags        # -I<pkg>/_mock/include
    python -m pyacl_rt.mock --libs          # -L<lib> -Wl,-rpath,<lib> -lascendcl
    python -m pyacl_rt.mock --include-dir   # <pkg>/_mock/include
    python -m pyacl_rt.mock --lib-dir       # <pkg>/_mock/lib64
    python -m pyacl_rt.mock --cmake-prefix  # <pkg>/_mock (for CMAKE_PREFIX_PATH)

so that ``cc prog.c $(python -m pyacl_rt.mock --cflags --libs)`` builds a CANN program
against the mock and runs it without any environment setup. The prefix has the layout of a
CANN install (``set_env.sh``, ``lib64/`` with ``libacl_rt.so`` and the companion libraries,
``include/acl/``, version files; mock README "The install prefix"), so it also works as
``ASCEND_HOME_PATH`` / ``ASCEND_CANN_PACKAGE_PATH``.

:class:`MockControl` drives the mock's own ``aclmock*`` introspection API (see
``include/acl/acl_mock.h``) through ctypes on the library pyacl_rt has loaded: live object
counts per device, fault injection, device loss, and the leak report. It refuses to work
when the loaded library is the real CANN runtime.

:func:`register_kernel` makes a Python function the host twin of a kernel name: launches
of that kernel in device binaries loaded on the mock call it on the stream's worker with
numpy views of the device memory it touches (parameters declared with :class:`In`,
:class:`Out`, :class:`InOut` and :class:`Value`); :func:`unregister_kernel` removes it.

The race sanitizer (``ASCEND_MOCK_SANITIZE=1``): every task pyacl_rt enqueues carries the
user's line, reports become :class:`~pyacl_rt.errors.RaceWarning` or
:class:`~pyacl_rt.errors.RaceError` (:func:`set_race_action`), and
:func:`sanitizer_reports` lists them (docs/guides/testing.md "Race sanitizer").
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ._raw._loader import bundled_mock_dir
from ._twins import In, InOut, Out, Value, register_kernel, registered_kernels, unregister_kernel

__all__ = [
    "ALL_DEVICES",
    "REPORT_LAST_FINALIZE",
    "REPORT_NOW",
    "STATS",
    "In",
    "InOut",
    "MockControl",
    "Out",
    "Value",
    "cflags",
    "clear_sanitizer_reports",
    "env_exports",
    "get_race_action",
    "include_dir",
    "lib_dir",
    "libs",
    "main",
    "mock_control",
    "prefix",
    "register_kernel",
    "registered_kernels",
    "sanitizer_mode",
    "sanitizer_report_count",
    "sanitizer_reports",
    "set_race_action",
    "unregister_kernel",
]

if TYPE_CHECKING:
    from .errors import RaceReport

for _obj in (
    In,
    InOut,
    Out,
    Value,
    register_kernel,
    registered_kernels,
    unregister_kernel,
    In.__mro__[1],
):
    _obj.__module__ = __name__  # public name: pyacl_rt.mock.register_kernel
del _obj

#: aclmockStat values (acl_mock.h), by the names MockControl.stat() / counts() use.
#: ``contexts`` and ``streams`` are what the program created (explicit contexts,
#: ``aclrtCreateStream*`` / ``Stream()``): the mock's totals minus what the runtime keeps
#: on its own, reported apart as ``default_contexts`` (the context ``aclrtSetDevice``
#: keeps per device in use; pyacl_rt holds it until finalize) and ``default_streams``
#: (every context's default stream).
STATS: dict[str, int] = {
    "contexts": 0,
    "streams": 1,
    "events": 2,
    "allocations": 3,
    "bytes": 4,
    "host_allocations": 5,
    "host_bytes": 6,
    "default_contexts": 7,
    "default_streams": 8,
}
#: The runtime's own part of a total, subtracted by MockControl.stat().
_RUNTIME_PART = {"contexts": "default_contexts", "streams": "default_streams"}
ALL_DEVICES = -1
REPORT_NOW = 0
REPORT_LAST_FINALIZE = 1


# -------------------------------------------------------------- build flags
def _is_built_prefix(path: Path) -> bool:
    return (path / "include" / "acl" / "acl.h").is_file() and (
        path / "lib64" / "libascendcl.so"
    ).is_file()


def prefix() -> Path:
    """Install prefix of the bundled mock (``include/`` and ``lib64/`` below it).

    Normally this package's own ``_mock``. In a source checkout that was never built
    (run from inside the checkout after ``pip install .``, which installed a built copy
    elsewhere), the bundled mock of that installed copy: the build flags need no
    compiled extension."""
    own = bundled_mock_dir()
    if _is_built_prefix(own):
        return own
    from ._raw._shadow import other_installations

    for package_dir in other_installations():
        if _is_built_prefix(package_dir / "_mock"):
            return package_dir / "_mock"
    return own


def include_dir() -> Path:
    """Directory to put on the include path (``acl/acl.h`` below it)."""
    return prefix() / "include"


def lib_dir() -> Path:
    """Directory of ``libascendcl.so`` and the other mock libraries (``libacl_rt.so``,
    ``libmsprofiler.so``, ``libascend_dump.so``, the TDT libraries, ``libc_sec.so``)."""
    return prefix() / "lib64"


def cflags() -> list[str]:
    """Compiler flags: the include directory (``#include "acl/acl.h"``)."""
    return [f"-I{include_dir()}"]


def libs() -> list[str]:
    """Linker flags: ``-L``, an rpath (so the program runs without LD_LIBRARY_PATH) and
    ``-lascendcl``. Add ``-lmsprofiler`` / ``-lascend_dump`` yourself when needed."""
    d = lib_dir()
    return [f"-L{d}", f"-Wl,-rpath,{d}", "-lascendcl"]


def env_exports(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables the prefix's ``set_env.sh`` exports, computed for ``environ``
    (default ``os.environ``): ``ASCEND_HOME_PATH``, ``ASCEND_TOOLKIT_HOME`` (the prefix,
    symbolic links resolved), ``ASCEND_OPP_PATH``, ``ASCEND_AICPU_PATH``,
    ``TOOLCHAIN_HOME``, and ``LD_LIBRARY_PATH`` / ``PATH`` with ``<prefix>/lib64`` /
    ``<prefix>/bin`` first (unchanged when already on the list: applying it twice adds
    nothing twice). ``pyacl-rt mock env`` prints them as shell ``export`` lines."""
    env = os.environ if environ is None else environ
    home = str(prefix().resolve())

    def prepend(var: str, item: str) -> str:
        value = env.get(var, "")
        if item in value.split(":"):
            return value
        return f"{item}:{value}" if value else item

    return {
        "ASCEND_HOME_PATH": home,
        "ASCEND_TOOLKIT_HOME": home,
        "ASCEND_OPP_PATH": f"{home}/opp",
        "ASCEND_AICPU_PATH": home,
        "TOOLCHAIN_HOME": f"{home}/toolkit",
        "LD_LIBRARY_PATH": prepend("LD_LIBRARY_PATH", f"{home}/lib64"),
        "PATH": prepend("PATH", f"{home}/bin"),
    }


def _check_built() -> None:
    missing = [
        p
        for p in (include_dir() / "acl" / "acl.h", lib_dir() / "libascendcl.so")
        if not p.is_file()
    ]
    if missing:
        raise SystemExit(
            "pyacl_rt.mock: the bundled mock is not built (missing "
            + ", ".join(map(str, missing))
            + "); build this copy in place with `pip install -e .` in the checkout "
            "(or install pyacl_rt with `pip install .` and run from another directory)"
        )
    if prefix() != bundled_mock_dir():
        # Say which mock the flags point at: not the checkout's (never built).
        sys.stderr.write(
            f"pyacl_rt.mock: note: {bundled_mock_dir().parent} is an unbuilt source tree; "
            f"using the bundled mock of the pyacl_rt installed in {prefix().parent.parent}\n"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pyacl_rt.mock``: print the requested build flags and paths of the
    bundled mock on one line; returns the exit status (0, or 2 with the usage on stderr
    when nothing was requested)."""
    parser = argparse.ArgumentParser(
        prog="python -m pyacl_rt.mock",
        description="Print build flags and paths of the mock libascendcl bundled with pyacl_rt.",
    )
    parser.add_argument("--cflags", action="store_true", help="compiler flags (-I...)")
    parser.add_argument("--libs", action="store_true", help="linker flags (-L... -lascendcl)")
    parser.add_argument("--include-dir", action="store_true", help="the include directory")
    parser.add_argument("--lib-dir", action="store_true", help="the library directory")
    parser.add_argument(
        "--cmake-prefix", action="store_true", help="prefix to add to CMAKE_PREFIX_PATH"
    )
    args = parser.parse_args(argv)
    _check_built()
    out: list[str] = []
    if args.cflags:
        out += cflags()
    if args.libs:
        out += libs()
    if args.include_dir:
        out.append(str(include_dir()))
    if args.lib_dir:
        out.append(str(lib_dir()))
    if args.cmake_prefix:
        out.append(str(prefix()))
    if not out:
        parser.print_help(sys.stderr)
        return 2
    print(" ".join(out))
    return 0


# --------------------------------------------------------- race sanitizer
def sanitizer_mode() -> str:
    """The mock's race sanitizer mode, from ``ASCEND_MOCK_SANITIZE`` (read once per
    process, at the first ``aclInit``; this starts the runtime if needed): ``"off"``,
    ``"report"`` (``1``), ``"fail"`` or ``"abort"``. ``"off"`` on the real runtime."""
    from . import _runtime, _sanitize

    _runtime.ensure_initialized()
    return _sanitize.mode()


def set_race_action(action: str) -> str:
    """What a race report does in Python: ``"warn"`` (the default) issues a
    :class:`~pyacl_rt.errors.RaceWarning` once per kind of race (same calls, user lines
    and streams), attributed to the user's line that made the later access; ``"raise"``
    raises :class:`~pyacl_rt.errors.RaceError` from that call (after synchronizing its
    stream). Frees never raise (they also run in finalizers): they warn. Returns the
    previous action. ``warnings.simplefilter("error", pyacl_rt.RaceWarning)`` also turns
    the warnings into exceptions (raised like RaceError, after the same synchronize)."""
    from . import _sanitize

    return _sanitize.set_action(action)


def get_race_action() -> str:
    """The current race action: ``"warn"`` or ``"raise"`` (:func:`set_race_action`)."""
    from . import _sanitize

    return _sanitize.get_action()


def sanitizer_reports() -> list[RaceReport]:
    """The race sanitizer's reports in this process (the latest 1024, oldest first), as
    :class:`~pyacl_rt.errors.RaceReport`; empty while the sanitizer is off."""
    from . import _sanitize

    return _sanitize.reports()


def sanitizer_report_count() -> int:
    """How many reports the race sanitizer made in this process (0 while off)."""
    from . import _sanitize

    return _sanitize.report_count()


def clear_sanitizer_reports() -> None:
    """Forget the kept reports and the kinds of race already warned about (so the next
    occurrence warns again). The count goes on."""
    from . import _sanitize

    _sanitize.clear_reports()


# ------------------------------------------------------------ MockControl
class MockControl:
    """ctypes access to the ``aclmock*`` API of the mock library pyacl_rt has loaded.

    Obtain it with :func:`mock_control`. All methods are thread-safe (the C API is).
    """

    def __init__(self, path: str) -> None:
        # RTLD_NOLOAD-like: the library is already loaded by pyacl_rt.lowlevel, so this
        # returns the same handle (same state) rather than a second copy.
        self.path = path
        self._dll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        if not hasattr(self._dll, "aclmockGetStat"):
            raise RuntimeError(f"{path} is not mock_libascendcl (no aclmockGetStat symbol)")
        d = self._dll
        d.aclmockGetStat.restype = ctypes.c_int64
        d.aclmockGetStat.argtypes = (ctypes.c_int32, ctypes.c_int)
        d.aclmockGetLeakReport.restype = ctypes.c_int
        d.aclmockGetLeakReport.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
        d.aclmockInjectFault.restype = ctypes.c_int
        d.aclmockInjectFault.argtypes = (ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int)
        d.aclmockClearFaults.restype = None
        d.aclmockClearFaults.argtypes = ()
        d.aclmockGetFaultHits.restype = ctypes.c_uint32
        d.aclmockGetFaultHits.argtypes = (ctypes.c_char_p,)
        d.aclmockSetDeviceLost.restype = ctypes.c_int
        d.aclmockSetDeviceLost.argtypes = (ctypes.c_int32, ctypes.c_int)
        d.aclmockGetDeviceLost.restype = ctypes.c_int
        d.aclmockGetDeviceLost.argtypes = (ctypes.c_int32,)
        d.aclmockGetConfig.restype = ctypes.c_int64
        d.aclmockGetConfig.argtypes = (ctypes.c_int,)
        d.aclmockGetSocName.restype = ctypes.c_char_p
        d.aclmockGetSocName.argtypes = ()
        d.aclmockGetCannVersion.restype = ctypes.c_char_p
        d.aclmockGetCannVersion.argtypes = ()
        d.aclmockGetPhysicalDevice.restype = ctypes.c_int32
        d.aclmockGetPhysicalDevice.argtypes = (ctypes.c_int32,)

    # ---- counts
    def _raw_stat(self, which: str, device: int) -> int:
        v = int(self._dll.aclmockGetStat(device, STATS[which]))
        if v < 0:
            raise ValueError(f"invalid device id {device} for the mock")
        return v

    def stat(self, which: str, device: int = ALL_DEVICES) -> int:
        """Live count of ``which`` (a key of :data:`STATS`) on ``device`` (-1 = total).

        ``"contexts"`` and ``"streams"`` count what the program created; the runtime's
        own default contexts and streams are ``"default_contexts"`` and
        ``"default_streams"``."""
        if which not in STATS:
            raise ValueError(f"unknown stat {which!r}; expected one of {', '.join(STATS)}")
        part = _RUNTIME_PART.get(which)
        if part is None:
            return self._raw_stat(which, device)
        own = self._raw_stat(part, device)  # two reads: exact while nothing changes
        return self._raw_stat(which, device) - own

    def counts(self, device: int = ALL_DEVICES) -> dict[str, int]:
        """Every live count for ``device`` (-1 = all devices plus host-side objects):
        what the program created first, then ``default_contexts`` and
        ``default_streams``, what the runtime keeps on its own (see :data:`STATS`)."""
        return {name: self.stat(name, device) for name in STATS}

    @property
    def device_count(self) -> int:
        """Visible devices (after ASCEND_RT_VISIBLE_DEVICES)."""
        return int(self._dll.aclmockGetConfig(1))

    @property
    def soc_name(self) -> str:
        return (self._dll.aclmockGetSocName() or b"").decode()

    @property
    def cann_version(self) -> str:
        return (self._dll.aclmockGetCannVersion() or b"").decode()

    def config(self, key: int) -> int:
        """Raw ``aclmockGetConfig(key)`` (see acl_mock.h for the keys)."""
        return int(self._dll.aclmockGetConfig(key))

    # ---- faults
    def inject_fault(self, func: str, code: int, nth: int = 1) -> None:
        """Make the ``nth`` next call of ``func`` fail with ``code`` (nth=0: every call)."""
        if nth < 0:
            raise ValueError("nth must be >= 0")
        if code == 0:
            raise ValueError("code must be nonzero")
        rc = self._dll.aclmockInjectFault(func.encode(), nth, code)
        if rc != 0:
            raise ValueError(f"aclmockInjectFault({func!r}, {nth}, {code}) refused (rc={rc})")

    def clear_faults(self) -> None:
        self._dll.aclmockClearFaults()

    def fault_hits(self, func: str) -> int:
        return int(self._dll.aclmockGetFaultHits(func.encode()))

    # ---- device loss
    def set_device_lost(self, device: int, code: int = 507010) -> None:
        """Mark ``device`` lost: every later call on it fails with sticky ``code``
        (default ACL_ERROR_RT_LOST_HEARTBEAT); ``code=0`` revives it."""
        rc = self._dll.aclmockSetDeviceLost(device, code)
        if rc != 0:
            raise ValueError(f"aclmockSetDeviceLost({device}, {code}) refused (rc={rc})")

    def device_lost(self, device: int) -> int:
        """The sticky code of a lost device, 0 if healthy."""
        return int(self._dll.aclmockGetDeviceLost(device))

    def physical_device(self, device: int) -> int:
        return int(self._dll.aclmockGetPhysicalDevice(device))

    # ---- leaks
    def leak_report(self, when: int = REPORT_NOW) -> str:
        """Human-readable report of live objects (``REPORT_NOW``) or of those alive at the
        last ``aclFinalize`` (``REPORT_LAST_FINALIZE``)."""
        n = int(self._dll.aclmockGetLeakReport(None, 0, when))
        if n < 0:
            raise ValueError(f"invalid report kind {when}")
        buf = ctypes.create_string_buffer(n + 1)
        self._dll.aclmockGetLeakReport(buf, n + 1, when)
        return buf.value.decode(errors="replace")


_control: MockControl | None = None


def mock_control() -> MockControl:
    """The :class:`MockControl` of the loaded library (loads it if needed).

    Raises RuntimeError when the loaded library is not the mock.
    """
    global _control
    if _control is None:
        from . import lowlevel  # same layer as _loader; imported lazily

        lowlevel.load()
        if not lowlevel.is_mock_library():
            raise RuntimeError(
                f"the loaded library {lowlevel.selection().path} is not the mock: "
                "MockControl needs PYACL_RT_BACKEND=mock (or the auto fallback)"
            )
        _control = MockControl(lowlevel.selection().path)
    return _control


if __name__ == "__main__":  # pragma: no cover - exercised through subprocess tests
    raise SystemExit(main())
