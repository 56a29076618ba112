"""Argument checks shared by the public API: typed errors that name the parameter.

Integers (sizes and offsets in bytes, device indices, counts, flags, priorities,
timeouts in ms) accept anything with ``__index__`` - ``int``, ``numpy.int64``,
``numpy.uint32``, ... - through :func:`operator.index`, exactly like Python's own
sequence indices. ``bool`` is refused (``TypeError``), although it is an ``int``
subclass: ``True`` as a size, an offset or a device is a bug far more often than it
is meant (``numpy.bool_`` has no ``__index__`` and is refused too). Floats are refused
(no silent truncation), except where a parameter documents float milliseconds.

Floor 1: imports nothing from pyacl_rt.
"""

from __future__ import annotations

import operator
from typing import Final

__all__ = ["SIZE_MAX", "index_arg", "size_arg", "type_name"]

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
