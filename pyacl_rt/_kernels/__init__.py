"""Kernels: loaded binaries, kernels looked up by name, launch configurations, launches,
and the runtime's built-in tasks (reduce, random numbers).

* :mod:`.objectcode` - :class:`ObjectCode` (owns an ``aclrtBinHandle``), :class:`Kernel`;
* :mod:`.config` - :class:`LaunchConfig` (blocks and launch attributes);
* :mod:`.launcher` - :func:`launch` (argument packing plans, the C launch path);
* :mod:`.builtin` - :func:`reduce_async`, :func:`random_async`, :class:`RandomGenerator`.

Layer 7 (higher tools), above memory: kernels take buffers as arguments.
"""

from __future__ import annotations

from .builtin import RandomGenerator, random_async, reduce_async
from .config import LaunchConfig
from .launcher import launch
from .objectcode import Kernel, KernelAttributes, ObjectCode, ParamInfo

__all__ = [
    "Kernel",
    "KernelAttributes",
    "LaunchConfig",
    "ObjectCode",
    "ParamInfo",
    "RandomGenerator",
    "launch",
    "random_async",
    "reduce_async",
]
