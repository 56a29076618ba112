"""Argument checks shared by the public API: typed errors that name the parameter.

Integers (sizes and offsets in bytes, device indices, counts, flags, priorities,
timeouts in ms) accept anything with ``__index__`` - ``int``, ``numpy.int64``,
``numpy.uint32``, ... - through :func:`operator.index`, exactly like Python's own
sequence indices. ``bool`` is refused (``TypeError``), although it is an ``int``
subclass: ``True`` as a size, an offset or a device is a bug far more often than it
is meant (``numpy.bool_`` has no ``__index__`` and is refused too). Floats are refused
(no silent truncation), except where a parameter documents float milliseconds.

Flags (``non_blocking``, ``block``, ``enable_timing``, ...) take ``bool`` (also
``numpy.bool_`` and the integers 0 and 1); anything else is a ``TypeError``, not
silently truthy (``non_blocking="no"`` would otherwise mean True).

Layer 1: imports nothing from pyacl_rt.
"""

from __future__ import annotations

import operator
from typing import Final

__all__ = ["SIZE_MAX", "bool_arg", "index_arg", "size_arg", "timeout_ms_arg", "type_name"]

#: Largest size / offset that fits a C ``size_t`` (64-bit).
SIZE_MAX: Final = 2**64 - 1


def type_name(value: object) -> str:
    """``type(value).__name__``, for messages."""
    return type(value).__name__


def index_arg(value: object, name: str, what: str = "an int") -> int:
    """``value`` as an ``int`` through ``__index__`` (``bool`` refused).

    Raises ``TypeError`` naming ``name`` (``what`` describes the expected value,
    e.g. ``"an int (bytes)"``).
    """
    if value.__class__ is int:
        return value
    if isinstance(value, bool):
        raise TypeError(f"{name} must be {what}, not bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be {what}, not {type_name(value)}") from None


def size_arg(value: object, name: str) -> int:
    """A size or offset in bytes: :func:`index_arg`, then ``0 <= value <= 2**64 - 1``
    (``ValueError`` naming ``name`` otherwise)."""
    n = index_arg(value, name)
    if n < 0:
        raise ValueError(f"{name} must be >= 0, got {n}")
    if n > SIZE_MAX:
        raise ValueError(f"{name} is too large ({n} > 2**64 - 1)")
    return n


def bool_arg(value: object, name: str) -> bool:
    """A flag: ``bool``, ``numpy.bool_`` or an ``__index__`` integer 0 / 1.

    Raises ``TypeError`` naming ``name`` for anything else.
    """
    if value is True or value is False:
        return value
    if getattr(getattr(value, "dtype", None), "kind", None) == "b":  # numpy.bool_
        return bool(value)
    if hasattr(type(value), "__index__"):
        i = operator.index(value)  # type: ignore[arg-type]
        if i in (0, 1):
            return bool(i)
    raise TypeError(f"{name} must be a bool, not {type_name(value)} ({value!r})")


def timeout_ms_arg(timeout: object) -> int:
    """A ``timeout`` in milliseconds (int, float or ``__index__`` integer; ``> 0``) as
    the int32 milliseconds ACL takes: rounded up, ``inf`` and anything longer than
    ACL's maximum (``2**31 - 1`` ms, ~24.8 days) become that maximum."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        if not hasattr(type(timeout), "__index__"):
            raise TypeError(
                f"timeout must be a number of milliseconds or None, not {type_name(timeout)}"
            )
        timeout = index_arg(timeout, "timeout")
    assert isinstance(timeout, (int, float))
    if not timeout > 0:
        raise ValueError(
            f"timeout must be > 0 milliseconds (or None to wait forever), got {timeout}"
        )
    if timeout >= 2**31 - 1:  # also inf: the longest wait ACL takes (~24.8 days)
        return 2**31 - 1
    return int(-(-timeout // 1))
