"""Every environment variable pyacl_rt honours, read in one place, typed and validated.

This module is the single source of truth for pyacl_rt's configuration:

* :data:`ENV_VARS` describes each variable (name, type, default, accepted values,
  description). The documentation's table (docs/guides/scripting.md) and
  ``pyacl-rt info --env`` are rendered from it.
* :func:`get_options` parses the environment once (cached) into a frozen
  :class:`Options`; :func:`reload_options` re-reads it (tests, or after changing
  ``os.environ`` on purpose).

A bad value raises :class:`pyacl_rt.errors.ConfigError` (a :class:`ValueError`)
naming the variable, the bad value and the accepted values. An empty value counts
as unset.

Layer 1: imports only the standard library and :mod:`pyacl_rt.errors`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .errors import ConfigError

__all__ = [
    "ALLOCATORS",
    "BACKENDS",
    "ENV_VARS",
    "SYNC_DEBUG_MODES",
    "EnvVar",
    "Options",
    "env_table",
    "get_options",
    "parse_options",
    "reload_options",
    "render_env_table_markdown",
]

#: Values accepted by ``PYACL_RT_BACKEND``.
BACKENDS: tuple[str, ...] = ("auto", "real", "mock")
#: Values accepted by ``PYACL_RT_ALLOCATOR``.
ALLOCATORS: tuple[str, ...] = ("caching", "native")
#: Values accepted by ``PYACL_RT_SYNC_DEBUG``, in mode-number order (also 0, 1, 2).
SYNC_DEBUG_MODES: tuple[str, ...] = ("default", "warn", "error")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_BOOL_ACCEPTED = "1/0 (also true/false, yes/no, on/off)"

_POLL_MIN_MS = 1
_POLL_MAX_MS = 60_000


# --------------------------------------------------------------------- parsers
def _parse_backend(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in BACKENDS:
        raise ConfigError.for_variable(name, raw, "one of " + ", ".join(BACKENDS))
    return value


def _parse_allocator(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in ALLOCATORS:
        raise ConfigError.for_variable(name, raw, "one of " + ", ".join(ALLOCATORS))
    return value


def _parse_sync_debug(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value in ("0", "1", "2"):
        return SYNC_DEBUG_MODES[int(value)]
    if value not in SYNC_DEBUG_MODES:
        raise ConfigError.for_variable(name, raw, "one of default, warn, error (or 0, 1, 2)")
    return value


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError.for_variable(name, raw, _BOOL_ACCEPTED)


def _parse_absolute_library(name: str, raw: str) -> str:
    value = raw.strip()
    if not os.path.isabs(value):
        raise ConfigError.for_variable(
            name,
            raw,
            "an absolute path to libascendcl.so (relative paths are refused so that "
            "the working directory can never inject a library)",
        )
    if os.path.isdir(value):
        raise ConfigError.for_variable(
            name, raw, "an absolute path to the libascendcl.so file itself, not a directory"
        )
    return os.path.normpath(value)


def _parse_acl_config(name: str, raw: str) -> str:
    value = raw.strip()
    if not os.path.isabs(value):
        value = os.path.abspath(value)
    if not os.path.isfile(value):
        raise ConfigError.for_variable(
            name, raw, "a path to an existing JSON file (passed to aclInit)"
        )
    return value


def _parse_poll_ms(name: str, raw: str) -> int:
    accepted = f"an integer number of milliseconds from {_POLL_MIN_MS} to {_POLL_MAX_MS}"
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        raise ConfigError.for_variable(name, raw, accepted) from None
    if not _POLL_MIN_MS <= value <= _POLL_MAX_MS:
        raise ConfigError.for_variable(name, raw, accepted)
    return value


def _passthrough(name: str, raw: str) -> str:
    del name
    return raw


# ------------------------------------------------------------------ the table
class EnvVar(NamedTuple):
    """One environment variable: the row of the documentation table and its parser."""

    name: str
    field: str
    type: str
    default: Any
    accepted: str
    description: str
    parse: Callable[[str, str], Any]
    passthrough: bool = False

    @property
    def default_text(self) -> str:
        """The default as shown in documentation."""
        return _show(self.default)


def _show(value: Any) -> str:
    """A parsed value as documented: ``unset`` for None, ``1``/``0`` for booleans."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


ENV_VARS: tuple[EnvVar, ...] = (
    EnvVar(
        name="PYACL_RT_BACKEND",
        field="backend",
        type="str",
        default="auto",
        accepted="auto, real, mock",
        description=(
            "Which libascendcl.so to load: 'real' = the CANN library only (fail with the list "
            "of places searched), 'mock' = the bundled mock, 'auto' = real if found, else the "
            "mock with one warning."
        ),
        parse=_parse_backend,
    ),
    EnvVar(
        name="PYACL_RT_LIBRARY",
        field="library",
        type="path",
        default=None,
        accepted="absolute path to libascendcl.so",
        description=("Explicit real library to load; searched first. Relative paths are refused."),
        parse=_parse_absolute_library,
    ),
    EnvVar(
        name="PYACL_RT_ACL_CONFIG",
        field="acl_config",
        type="path",
        default=None,
        accepted="path to an existing JSON file",
        description="JSON configuration passed to aclInit (default: none, i.e. aclInit(NULL)).",
        parse=_parse_acl_config,
    ),
    EnvVar(
        name="PYACL_RT_LAZY_INIT",
        field="lazy_init",
        type="bool",
        default=True,
        accepted=_BOOL_ACCEPTED,
        description=(
            "1: the runtime (aclInit) starts on first use. 0: first use without an explicit "
            "pyacl_rt.init() raises NotInitializedError."
        ),
        parse=_parse_bool,
    ),
    EnvVar(
        name="PYACL_RT_CALLBACK_POLL_MS",
        field="callback_poll_ms",
        type="int",
        default=100,
        accepted=f"integer {_POLL_MIN_MS}..{_POLL_MAX_MS}",
        description="Timeout in ms of each aclrtProcessReport poll in the host-callback thread.",
        parse=_parse_poll_ms,
    ),
    EnvVar(
        name="PYACL_RT_ALLOCATOR",
        field="allocator",
        type="str",
        default="caching",
        accepted="caching, native",
        description=(
            "Where DeviceBuffer/HostBuffer memory comes from: 'caching' = the stream-ordered "
            "caching allocator and pinned host pool, 'native' = one aclrtMalloc / "
            "aclrtMallocHost per buffer."
        ),
        parse=_parse_allocator,
    ),
    EnvVar(
        name="PYACL_RT_WARN_FALLBACK",
        field="warn_fallback",
        type="bool",
        default=True,
        accepted=_BOOL_ACCEPTED,
        description="With backend 'auto': warn once when falling back to the bundled mock.",
        parse=_parse_bool,
    ),
    EnvVar(
        name="PYACL_RT_SYNC_DEBUG",
        field="sync_debug",
        type="str",
        default="default",
        accepted="default, warn, error (or 0, 1, 2)",
        description=(
            "Initial sync-debug mode of every thread and task (pyacl_rt.set_sync_debug_mode): "
            "'warn' / 'error' report each call that makes the host wait for the device."
        ),
        parse=_parse_sync_debug,
    ),
    EnvVar(
        name="ASCEND_RT_VISIBLE_DEVICES",
        field="visible_devices",
        type="str",
        default=None,
        accepted="comma-separated device ids (read by the runtime)",
        description="Read-only passthrough: devices the runtime exposes, renumbered from 0.",
        parse=_passthrough,
        passthrough=True,
    ),
    EnvVar(
        name="ASCEND_HOME_PATH",
        field="ascend_home_path",
        type="path",
        default=None,
        accepted="CANN install directory (set by set_env.sh)",
        description="Read-only passthrough: used by the loader ($ASCEND_HOME_PATH/lib64).",
        parse=_passthrough,
        passthrough=True,
    ),
    EnvVar(
        name="ASCEND_TOOLKIT_HOME",
        field="ascend_toolkit_home",
        type="path",
        default=None,
        accepted="CANN toolkit directory (set by set_env.sh)",
        description="Read-only passthrough: used by the loader ($ASCEND_TOOLKIT_HOME/lib64).",
        parse=_passthrough,
        passthrough=True,
    ),
)


class Options(NamedTuple):
    """The parsed configuration (immutable). Field names match :attr:`EnvVar.field`.

    A NamedTuple rather than a dataclass: ``import pyacl_rt`` does not import
    :mod:`dataclasses`."""

    backend: str = "auto"
    library: str | None = None
    acl_config: str | None = None
    lazy_init: bool = True
    callback_poll_ms: int = 100
    allocator: str = "caching"
    warn_fallback: bool = True
    sync_debug: str = "default"
    visible_devices: str | None = None
    ascend_home_path: str | None = None
    ascend_toolkit_home: str | None = None


def _check_table_matches_options() -> None:
    names = set(Options._fields)
    table = {v.field for v in ENV_VARS}
    if names != table:  # pragma: no cover - programming error caught at import
        raise RuntimeError(f"_options table and Options disagree: {sorted(names ^ table)}")


_check_table_matches_options()


def parse_options(environ: Mapping[str, str] | None = None) -> Options:
    """Parse ``environ`` (default: ``os.environ``) into :class:`Options`, uncached.

    Raises :class:`~pyacl_rt.errors.ConfigError` for the first bad variable.
    """
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for var in ENV_VARS:
        raw = env.get(var.name)
        if raw is None or raw.strip() == "":
            values[var.field] = var.default
        else:
            values[var.field] = var.parse(var.name, raw)
    return Options(**values)


_lock = threading.Lock()
_cached: Options | None = None


def get_options() -> Options:
    """The process configuration, parsed from the environment on first call and cached."""
    cached = _cached
    if cached is not None:
        return cached
    return reload_options()


def reload_options() -> Options:
    """Re-read the environment, replace the cached :class:`Options` and return it.

    On a bad value the previous cache is left untouched and ConfigError is raised.
    """
    global _cached
    with _lock:
        opts = parse_options()
        _cached = opts
        return opts


def env_table(options: Options | None = None) -> list[dict[str, str]]:
    """Rows describing every variable, with its current raw value and effective value.

    ``options`` is the effective configuration to report (default: :func:`get_options`
    if it parses; if the environment is invalid the ``effective`` column says so).
    """
    effective: Options | None = options
    error: str | None = None
    if effective is None:
        try:
            effective = get_options()
        except ConfigError as exc:
            error = "invalid (" + exc.message + ")"
    rows: list[dict[str, str]] = []
    for var in ENV_VARS:
        raw = os.environ.get(var.name)
        shown = _show(getattr(effective, var.field)) if effective is not None else (error or "?")
        rows.append(
            {
                "name": var.name,
                "type": var.type,
                "default": var.default_text,
                "accepted": var.accepted,
                "description": var.description,
                "passthrough": "yes" if var.passthrough else "no",
                "value": "unset" if raw is None else raw,
                "effective": shown,
            }
        )
    return rows


def render_env_table_markdown() -> str:
    """The documentation table (name, type, default, accepted values, description)."""
    lines = [
        "| Variable | Type | Default | Accepted | Description |",
        "|---|---|---|---|---|",
    ]
    for var in ENV_VARS:
        desc = var.description
        if var.passthrough:
            desc = desc + " (not set by pyacl_rt)"
        lines.append(
            f"| `{var.name}` | {var.type} | `{var.default_text}` | {var.accepted} | {desc} |"
        )
    return "\n".join(lines) + "\n"
