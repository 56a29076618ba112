"""pyacl_rt's loggers, created on first use: ``import pyacl_rt`` does not import logging.

``_log = get_logger("pyacl_rt")`` at module level gives an object that forwards every
attribute (``debug``, ``warning``, ``exception`` ...) to ``logging.getLogger(name)``,
importing :mod:`logging` the first time something is logged. Handlers and levels set
on ``logging.getLogger("pyacl_rt")`` apply as usual (it is the same logger).

Layer 1: standard library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import logging

__all__ = ["get_logger"]


class _LazyLogger:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        import logging

        return getattr(logging.getLogger(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy logger {self._name!r}>"


def get_logger(name: str) -> logging.Logger:
    """The logger ``name`` (``logging.getLogger(name)`` on first use)."""
    return cast("logging.Logger", _LazyLogger(name))
