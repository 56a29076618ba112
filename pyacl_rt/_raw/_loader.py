"""Find the ``libascendcl.so`` that pyacl_rt drives: the real CANN library or the bundled mock.

Backend (``PYACL_RT_BACKEND``, read through :mod:`pyacl_rt._options`):

* ``auto`` (default): the real library if the search below finds one, else the bundled
  mock, with one short :class:`~pyacl_rt.BackendFallbackWarning` per process, attributed
  to the user's line that first needed the library (``PYACL_RT_WARN_FALLBACK=0`` silences
  it; ``pyacl-rt info`` and ``backend_info().attempts`` list every place searched).
* ``real``: the real library only; :class:`~pyacl_rt.errors.LibraryNotFoundError` lists
  every place that was tried and why each was rejected.
* ``mock``: the mock bundled in the package (``pyacl_rt/_mock/lib64``);
  ``PYACL_RT_LIBRARY`` is ignored.

With ``auto``, a real library that is found but fails to load (e.g. CANN toolkit without
the driver libraries) also falls back to the mock, with the ``dlopen`` error in the
warning.

Real-library search, in this order (first acceptable hit wins):

1. ``PYACL_RT_LIBRARY`` - an explicit absolute path (a bad explicit path is an error,
   never silently skipped, even with ``auto``);
2. a ``libascendcl.so`` already mapped into this process (e.g. loaded by torch_npu),
   read from ``/proc/self/maps`` and asked of the dynamic linker with
   ``dlopen(..., RTLD_NOLOAD)`` (which never loads anything);
3. the dynamic linker's search order, walked by pyacl_rt itself *without loading
   anything*: the ``LD_LIBRARY_PATH`` entries, then ``/etc/ld.so.cache``, then the
   system directories (:data:`SYSTEM_DIRS`), like ``dlopen("libascendcl.so")`` in
   torch_npu. (Not emulated: ``glibc-hwcaps`` subdirectories, the executable's
   ``RPATH``/``RUNPATH``, ``$ORIGIN``-style tokens - such entries are skipped.)
4. ``$ASCEND_HOME_PATH/lib64``, then ``$ASCEND_TOOLKIT_HOME/lib64``;
5. the standard install directories :data:`STANDARD_DIRS`.

Never accepted: link-time stub libraries (a path with a ``stub``, ``stubs`` or
``devlib`` directory component, before or after resolving symlinks), relative paths,
and libraries in the current working directory found through the linker search
(a relative or empty ``LD_LIBRARY_PATH`` entry, or one naming the working directory).
Every refusal happens *before* anything is loaded: the search only looks at files,
so a planted library's constructor never runs. Only the accepted path is
loaded (by :mod:`pyacl_rt.lowlevel`, through its absolute path).

The result is cached for the process: the library is loaded once and never unloaded.
Imported by :func:`pyacl_rt.lowlevel.load` on first use (not by ``import pyacl_rt``:
ctypes, packaging and dataclasses cost import time). Layer 2: imports only layer-1
modules. What the loaded library turned out to be is :mod:`pyacl_rt._raw._backend`.
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
import sys
import sysconfig
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.version import InvalidVersion, Version

from .._options import Options, get_options
from ..errors import BackendFallbackWarning, LibraryNotFoundError

__all__ = [
    "LD_SO_CACHE",
    "STANDARD_DIRS",
    "SYSTEM_DIRS",
    "Attempt",
    "BackendFallbackWarning",
    "LibrarySelection",
    "bundled_mock_dir",
    "bundled_mock_library",
    "fallback_after_load_failure",
    "find_real_library",
    "is_refused_path",
    "parse_cann_version",
    "select_library",
]

LIBRARY_NAME = "libascendcl.so"

#: Standard CANN install directories searched last (new "cann" layout first, then the
#: <= 8.3 "ascend-toolkit" layout). Tests replace this tuple to point at fake trees.
STANDARD_DIRS: tuple[str, ...] = (
    "/usr/local/Ascend/cann/lib64",
    "/usr/local/Ascend/ascend-toolkit/latest/lib64",
    "/usr/local/Ascend/ascend-toolkit/latest/runtime/lib64",
)

_REFUSED_COMPONENTS = frozenset({"stub", "stubs", "devlib"})

#: The dynamic linker's default directories, searched after ``/etc/ld.so.cache``
#: (multiarch first on Debian-style systems).
SYSTEM_DIRS: tuple[str, ...] = tuple(
    d
    for d in (
        f"/lib/{sysconfig.get_config_var('MULTIARCH') or ''}",
        f"/usr/lib/{sysconfig.get_config_var('MULTIARCH') or ''}",
        "/lib64",
        "/usr/lib64",
        "/lib",
        "/usr/lib",
    )
    if not d.endswith("/")
)
#: The dynamic linker's cache (read, never executed).
LD_SO_CACHE = "/etc/ld.so.cache"


@dataclass(frozen=True)
class Attempt:
    """One place the real-library search looked at."""

    step: str
    """Search step, e.g. ``"PYACL_RT_LIBRARY"``, ``"dynamic linker"``."""
    location: str
    """The path (or name) tried."""
    accepted: bool
    reason: str
    """Why it was rejected (``"accepted"`` when it was chosen)."""

    def __str__(self) -> str:
        verdict = "accepted" if self.accepted else f"rejected: {self.reason}"
        return f"[{self.step}] {self.location} - {verdict}"


@dataclass(frozen=True)
class LibrarySelection:
    """Which library the loader chose and how."""

    backend: Literal["real", "mock"]
    """``"mock"`` for the bundled mock; ``"real"`` for anything found by the search."""
    path: str
    found_via: str
    attempts: tuple[Attempt, ...] = ()
    requested_backend: str = "auto"


# --------------------------------------------------------------------- checks
def is_refused_path(path: str) -> str | None:
    """The reason ``path`` may never be loaded, or ``None`` if it is acceptable."""
    if not os.path.isabs(path):
        return "relative path (refused: only absolute paths are loaded)"
    for candidate in (path, os.path.realpath(path)):
        parts = Path(candidate).parts[:-1]
        bad = [p for p in parts if p.lower() in _REFUSED_COMPONENTS]
        if bad:
            return f"link-time stub library (path contains /{bad[0]}/), never loaded at run time"
    return None


def _check_file(path: str) -> str | None:
    refused = is_refused_path(path)
    if refused:
        return refused
    if not os.path.exists(path):
        return "not found"
    if not os.path.isfile(path):
        return "not a regular file"
    if not os.access(path, os.R_OK):
        return "not readable"
    return None


# ---------------------------------------------------------------- the search
def _already_loaded() -> list[str]:
    """Paths of libascendcl.so* mapped into this process (from /proc/self/maps)."""
    found: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split(None, 5)
                if len(parts) < 6:
                    continue
                p = parts[5].strip()
                base = os.path.basename(p)
                if (base == LIBRARY_NAME or base.startswith(LIBRARY_NAME + ".")) and p not in found:
                    found.append(p)
    except OSError:
        pass
    return found


def _libdl() -> ctypes.CDLL:
    """The library providing dlopen/dlinfo (libc on glibc >= 2.34, else libdl.so.2)."""
    libc = ctypes.CDLL(None)
    if hasattr(libc, "dlinfo"):
        return libc
    return ctypes.CDLL("libdl.so.2")


class _LinkMap(ctypes.Structure):
    _fields_ = (("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p))


_RTLD_DI_LINKMAP = 2
_RTLD_LAZY = 1
_RTLD_NOLOAD = 4


def _loaded_path(name: str) -> str | None:
    """Path of ``name`` if the dynamic linker already has it loaded in this process.

    ``dlopen(name, RTLD_NOLOAD)`` never loads (no constructor runs): it only returns
    a handle to an object that is already there. The handle is closed again.
    """
    try:
        libc = _libdl()
        dlopen = libc.dlopen
        dlopen.restype = ctypes.c_void_p
        dlopen.argtypes = (ctypes.c_char_p, ctypes.c_int)
        handle = dlopen(name.encode(), _RTLD_LAZY | _RTLD_NOLOAD)
        if not handle:
            libc.dlerror()  # clear it
            return None
        dlinfo = libc.dlinfo
        dlinfo.restype = ctypes.c_int
        dlinfo.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
        lm = ctypes.POINTER(_LinkMap)()
        path: str | None = None
        if dlinfo(handle, _RTLD_DI_LINKMAP, ctypes.byref(lm)) == 0 and lm and lm.contents.l_name:
            path = lm.contents.l_name.decode(errors="replace")
        libc.dlclose.argtypes = (ctypes.c_void_p,)
        libc.dlclose(handle)  # only drops the reference RTLD_NOLOAD took
        return path or None
    except (OSError, AttributeError):  # pragma: no cover - no libdl
        return None


_CACHE_MAGIC = b"glibc-ld.so.cache1.1"
_CACHE_HEADER = struct.Struct("<20sIIB3xI12x")  # magic, nlibs, len_strings, flags, ext
_CACHE_ENTRY = struct.Struct("<iIIIQ")  # flags, key, value, osversion, hwcap


def _ld_cache_entries(cache: str | None = None) -> list[tuple[str, int, str]]:
    """``(name, flags, path)`` entries of the dynamic linker's cache, in its order
    (``/etc/ld.so.cache``, glibc's "new" format, alone or after the old one). Only
    reads the file; ``[]`` when it is missing or not understood."""
    try:
        with open(cache or LD_SO_CACHE, "rb") as fh:
            data = fh.read()
    except OSError:
        return []
    base = data.find(_CACHE_MAGIC)
    if base < 0 or len(data) < base + _CACHE_HEADER.size:
        return []
    _magic, nlibs, _len_strings, _flags, _ext = _CACHE_HEADER.unpack_from(data, base)

    def string(off: int) -> str:
        start = base + off
        end = data.find(b"\0", start)
        return data[start : end if end >= 0 else len(data)].decode(errors="replace")

    out: list[tuple[str, int, str]] = []
    pos = base + _CACHE_HEADER.size
    for _ in range(nlibs):
        if pos + _CACHE_ENTRY.size > len(data):
            break
        flags, key, value, _osv, _hwcap = _CACHE_ENTRY.unpack_from(data, pos)
        pos += _CACHE_ENTRY.size
        if key >= len(data) - base or value >= len(data) - base:
            continue
        out.append((string(key), flags, string(value)))
    return out


def _ld_cache_lookup(name: str, cache: str | None = None) -> list[str]:
    """Paths the cache lists for ``name``, those of this process's architecture
    first (the flags of its ``libc.so.6`` entry)."""
    entries = _ld_cache_entries(cache)
    native = next((f for n, f, _p in entries if n == "libc.so.6"), None)
    hits = [(f != native, p) for n, f, p in entries if n == name]
    return [p for _other, p in sorted(hits, key=lambda h: h[0])]


def _linker_candidates(name: str, env: Mapping[str, str]) -> list[tuple[str, str, str | None]]:
    """The dynamic linker's search order for ``name``, walked without loading:
    ``(location, path, reason refused before looking at the file or None)``."""
    out: list[tuple[str, str, str | None]] = []
    ld_path = env.get("LD_LIBRARY_PATH")
    if ld_path is not None:
        for entry in re.split("[:;]", ld_path):
            cand = os.path.join(entry, name)
            if not entry or not os.path.isabs(entry):
                out.append(
                    (
                        f"LD_LIBRARY_PATH entry {entry!r}",
                        cand,
                        "a relative or empty LD_LIBRARY_PATH entry is the current working "
                        "directory (refused, never searched)",
                    )
                )
            elif "$" in entry:
                out.append(
                    (
                        f"LD_LIBRARY_PATH entry {entry!r}",
                        cand,
                        "dynamic string tokens ($ORIGIN, $LIB, $PLATFORM) are not searched",
                    )
                )
            else:
                out.append((f"LD_LIBRARY_PATH entry {entry!r}", cand, None))
    for path in _ld_cache_lookup(name):
        out.append((LD_SO_CACHE, path, None))
    for d in SYSTEM_DIRS:
        out.append(("system directory", os.path.join(d, name), None))
    return out


def _in_cwd(path: str) -> bool:
    try:
        return os.path.dirname(os.path.realpath(path)) == os.path.realpath(os.getcwd())
    except OSError:
        return False


def find_real_library(
    options: Options | None = None, environ: Mapping[str, str] | None = None
) -> tuple[str | None, str, tuple[Attempt, ...]]:
    """Run the real-library search without loading anything for good.

    Returns ``(path or None, found_via, attempts)``; ``attempts`` records every place
    tried, in order, with the reason each was rejected.
    Raises :class:`LibraryNotFoundError` when ``PYACL_RT_LIBRARY`` is set but unusable.
    """
    opts = options if options is not None else get_options()
    env = os.environ if environ is None else environ
    attempts: list[Attempt] = []

    # 1. explicit path
    if opts.library:
        reason = _check_file(opts.library)
        attempts.append(Attempt("PYACL_RT_LIBRARY", opts.library, reason is None, reason or ""))
        if reason is None:
            return opts.library, "PYACL_RT_LIBRARY", tuple(attempts)
        raise LibraryNotFoundError(
            f"PYACL_RT_LIBRARY={opts.library} cannot be used: {reason}",
            searched=[str(a) for a in attempts],
            backend=opts.backend,
        )
    attempts.append(Attempt("PYACL_RT_LIBRARY", "$PYACL_RT_LIBRARY", False, "not set"))

    # 2. already loaded in this process (never loads anything)
    loaded = _already_loaded()
    probed = _loaded_path(LIBRARY_NAME)
    if probed is not None and probed not in loaded:
        loaded.append(probed)
    if not loaded:
        attempts.append(Attempt("already loaded", "/proc/self/maps", False, "no libascendcl.so"))
    for p in loaded:
        reason = _check_file(p)
        attempts.append(Attempt("already loaded", p, reason is None, reason or ""))
        if reason is None:
            return p, "already loaded in the process", tuple(attempts)

    # 3. the dynamic linker's search order, walked here: refusals happen before any
    # dlopen, so a planted library (working directory, stub dir) never runs code
    found_any = False
    for where, cand, refused in _linker_candidates(LIBRARY_NAME, env):
        if refused is not None:
            attempts.append(Attempt("dynamic linker", f"{cand} ({where})", False, refused))
            continue
        if not os.path.exists(cand):
            continue  # the linker would move on silently; so do we (not listed)
        found_any = True
        if _in_cwd(cand):
            reason = (
                "in the current working directory (refused: a library found there through "
                "the linker search may have been planted)"
            )
        else:
            reason = _check_file(cand)
        attempts.append(
            Attempt("dynamic linker", f"{cand} ({where})", reason is None, reason or "")
        )
        if reason is None:
            return (
                cand,
                "dynamic linker search (LD_LIBRARY_PATH / ld.so.cache / system dirs)",
                tuple(attempts),
            )
    if not found_any:
        attempts.append(
            Attempt(
                "dynamic linker",
                f"{LIBRARY_NAME} (LD_LIBRARY_PATH, {LD_SO_CACHE}, system directories)",
                False,
                "not found",
            )
        )

    # 4. CANN environment variables
    for var in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"):
        home = env.get(var, "").strip()
        if not home:
            attempts.append(Attempt(var, f"${var}/lib64", False, "variable not set"))
            continue
        cand = os.path.join(home, "lib64", LIBRARY_NAME)
        reason = (
            f"{var} is a relative path (refused)" if not os.path.isabs(home) else _check_file(cand)
        )
        attempts.append(Attempt(var, cand, reason is None, reason or ""))
        if reason is None:
            return cand, f"${var}/lib64", tuple(attempts)

    # 5. standard install directories
    for d in STANDARD_DIRS:
        cand = os.path.join(d, LIBRARY_NAME)
        reason = _check_file(cand)
        attempts.append(Attempt("standard install dir", cand, reason is None, reason or ""))
        if reason is None:
            return cand, f"standard install directory {d}", tuple(attempts)

    return None, "", tuple(attempts)


# ------------------------------------------------------------------ the mock
def bundled_mock_dir() -> Path:
    """Install prefix of the mock bundled in the package, laid out like a CANN install
    (``lib64/libascendcl.so``, ``include/acl/``): it also works as ``ASCEND_HOME_PATH``."""
    return Path(__file__).resolve().parent.parent / "_mock"


def bundled_mock_library() -> str:
    """Absolute path of the bundled mock ``libascendcl.so``.

    Raises :class:`LibraryNotFoundError` when the package was not built (run
    ``pip install -e .`` from the repository to build it in place).
    """
    p = bundled_mock_dir() / "lib64" / LIBRARY_NAME
    if not p.is_file():
        raise LibraryNotFoundError(
            f"the bundled mock library {p} is missing: pyacl_rt was not built "
            "(install it with `pip install .`, or `pip install -e .` in a checkout)",
            searched=[str(p)],
            backend="mock",
        )
    return str(p)


# ------------------------------------------------------------------ selection
_select_lock = threading.Lock()
_selection: LibrarySelection | None = None
_warned = False


def _user_stacklevel() -> int:
    """The ``stacklevel`` that attributes a warning issued by this module's caller to
    the first frame outside the pyacl_rt package: the user's line that first needed
    the library (``device_count()``, ``Stream()``, ``init()``, a ``lowlevel`` call ...),
    however deep inside pyacl_rt the load happened."""
    pkg = os.path.dirname(os.path.dirname(__file__)) + os.sep
    frame = sys._getframe(1)  # the function calling warnings.warn: stacklevel 1
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(pkg):
        frame = frame.f_back
        level += 1
    return level


def _warn_fallback(attempts: tuple[Attempt, ...], why: str | None = None) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    reason = why or f"no real libascendcl.so found ({len(attempts)} places searched)"
    warnings.warn(
        f"pyacl_rt: {reason}; falling back to the bundled mock. Set PYACL_RT_BACKEND=mock "
        "to silence this; `pyacl-rt info` lists the places searched.",
        BackendFallbackWarning,
        stacklevel=_user_stacklevel(),
    )


def fallback_after_load_failure(failed: LibrarySelection, error: str) -> LibrarySelection | None:
    """With ``PYACL_RT_BACKEND=auto``, a real library that was *found* by the search but
    cannot be loaded (e.g. the CANN toolkit is installed without the driver) falls back
    to the bundled mock with the one warning, naming the error. Returns the new
    (cached) selection, or ``None`` when no fallback applies (backend ``real``, an
    explicit ``PYACL_RT_LIBRARY`` / ``load(path)``, or the mock itself failed)."""
    global _selection
    if failed.backend != "real" or failed.requested_backend != "auto":
        return None
    if failed.found_via == "PYACL_RT_LIBRARY":
        return None
    opts = get_options()
    attempts = (*failed.attempts, Attempt("load", failed.path, False, error))
    mock = bundled_mock_library()
    if opts.warn_fallback:
        _warn_fallback(attempts, f"{failed.path} was found but failed to load: {error}")
    sel = LibrarySelection(
        "mock", mock, "bundled mock (PYACL_RT_BACKEND=auto fallback)", attempts, "auto"
    )
    with _select_lock:
        _selection = sel
    return sel


def _select_uncached(opts: Options) -> LibrarySelection:
    backend = opts.backend
    if backend == "mock":
        return LibrarySelection("mock", bundled_mock_library(), "PYACL_RT_BACKEND=mock", (), "mock")
    path, via, attempts = find_real_library(opts)
    if path is not None:
        return LibrarySelection("real", path, via, attempts, backend)
    if backend == "real":
        raise LibraryNotFoundError(
            "PYACL_RT_BACKEND=real: no usable libascendcl.so was found "
            f"({len(attempts)} places tried)",
            searched=[str(a) for a in attempts],
            backend="real",
        )
    mock = bundled_mock_library()
    if opts.warn_fallback:
        _warn_fallback(attempts)
    return LibrarySelection(
        "mock", mock, "bundled mock (PYACL_RT_BACKEND=auto fallback)", attempts, backend
    )


def select_library(path: str | None = None) -> LibrarySelection:
    """Choose the library (cached for the process).

    ``path`` (absolute) overrides the search, like ``PYACL_RT_LIBRARY``, and replaces a
    cached choice (:func:`pyacl_rt.lowlevel.load` refuses to switch once a library is
    actually loaded).
    """
    global _selection
    with _select_lock:
        if _selection is not None and path is None:
            return _selection
        if path is not None:
            reason = _check_file(path)
            if reason is not None:
                raise LibraryNotFoundError(
                    f"cannot load {path}: {reason}", searched=[path], backend="explicit"
                )
            mock = bundled_mock_dir() / "lib64" / LIBRARY_NAME
            same = mock.exists() and os.path.samefile(path, mock)
            sel = LibrarySelection(
                "mock" if same else "real", path, "load(path) argument", (), "explicit"
            )
        else:
            sel = _select_uncached(get_options())
        _selection = sel
        return sel


# ------------------------------------------------------------- CANN versions
_OLD_SCHEME = re.compile(
    r"^(?P<rel>\d+(?:\.\d+)*?)\.(?P<kind>RC|T)(?P<n>\d+)"
    r"(?:\.(?P<pre>alpha|beta|rc|B)(?P<pn>\d+))?(?:\.(?P<post>\d+))?$",
    re.IGNORECASE,
)
_NEW_SCHEME = re.compile(
    r"^(?P<rel>\d+(?:\.\d+)*)(?:[.-](?P<pre>alpha|beta|rc|a|b)[.-]?(?P<pn>\d+)?)?$",
    re.IGNORECASE,
)
_DRIVER_BUILD = re.compile(r"^(?P<rel>\d+(?:\.\d+)*)\.b(?P<n>\d+)$", re.IGNORECASE)
_PRE = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "rc": "rc"}


def parse_cann_version(text: str) -> Version:
    """Map a CANN (or driver) version string to a PEP 440 :class:`Version`.

    * old scheme (CANN < 8.5): ``8.0.RC3`` -> ``8.0rc3``; ``8.0.RC3.alpha002`` ->
      ``8.0rc3.dev2`` (an alpha of RC3 sorts before RC3); ``8.0.T13`` -> ``8.0.dev13``
      (test builds sort before any RC); ``8.0.RC2.1`` -> ``8.0rc2.post1``;
    * new scheme (CANN >= 8.5): ``8.5.0``; ``9.1.0-beta.3`` -> ``9.1.0b3``;
      ``9.1.0-alpha`` -> ``9.1.0a0``; ``9.1.0.rc1`` / ``9.1.0-rc.1`` -> ``9.1.0rc1``;
    * driver ``26.1.0.b083`` -> ``26.1.0.dev83``.

    Hence ``8.0.RC3 < 8.0.0 < 8.1.RC1 < 8.5.0 < 9.1.0-beta.3 < 9.1.0``.
    Raises :class:`ValueError` for text that fits none of these.
    """
    s = text.strip()
    m = _OLD_SCHEME.match(s)
    if m:
        rel, kind, n = m["rel"], m["kind"].upper(), int(m["n"])
        if kind == "T":
            return Version(f"{rel}.dev{n}")
        v = f"{rel}rc{n}"
        if m["pre"]:
            v += f".dev{int(m['pn'])}"
        elif m["post"]:
            v += f".post{int(m['post'])}"
        return Version(v)
    m = _DRIVER_BUILD.match(s)
    if m:
        return Version(f"{m['rel']}.dev{int(m['n'])}")
    m = _NEW_SCHEME.match(s)
    if m:
        v = m["rel"]
        if m["pre"]:
            v += _PRE[m["pre"].lower()] + str(int(m["pn"]) if m["pn"] else 0)
        return Version(v)
    try:
        return Version(s)
    except InvalidVersion:
        raise ValueError(f"unrecognised CANN version string {text!r}") from None
