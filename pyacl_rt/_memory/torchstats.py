"""torch-compatible memory statistics: key layout, the native backend's numbers, and
the ``memory_summary`` table.

Keys are torch's ``memory_stats()`` keys: ``<kind>.<pool>.<field>`` for the kinds in
:data:`KINDS` (pool ``all`` / ``large_pool`` / ``small_pool``, field ``current`` /
``peak`` / ``allocated`` / ``freed``), ``oversize_allocations.<field>``,
``oversize_segments.<field>`` and the scalars in :data:`SCALARS`, sorted by key like
torch's flattened dict. Byte kinds end in ``_bytes``; the others count blocks/segments.

Layer 6 (part of :mod:`pyacl_rt._memory`): imports layers 1-5 and ``records``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import records as _memrecord

__all__ = ["KINDS", "POOLS", "SCALARS", "format_summary", "native_stats", "stats_dict"]

#: Counter kinds, in the order of pyacl_rt._cachecore's stats() tuple.
KINDS: tuple[str, ...] = (
    "allocation",
    "segment",
    "active",
    "inactive_split",
    "allocated_bytes",
    "reserved_bytes",
    "active_bytes",
    "inactive_split_bytes",
    "requested_bytes",
    "oversize_allocations",
    "oversize_segments",
)
POOLS: tuple[str, ...] = ("all", "small_pool", "large_pool")
FIELDS: tuple[str, ...] = ("current", "peak", "allocated", "freed")
#: Scalar counters (torch's names).
SCALARS: tuple[str, ...] = (
    "num_alloc_retries",
    "num_ooms",
    "num_sync_all_streams",
    "num_device_alloc",
    "num_device_free",
    "max_split_size",
)
_OVERSIZE = ("oversize_allocations", "oversize_segments")


def stats_dict(values: Sequence[int], scalars: Mapping[str, int]) -> dict[str, int]:
    """torch's flat ``memory_stats`` dict from ``values`` ([kind][pool][field], the
    layout of ``_cachecore.Core.stats()``) and the :data:`SCALARS`."""
    out: dict[str, int] = {}
    i = 0
    for kind in KINDS:
        for pool in POOLS:
            for field in FIELDS:
                if kind not in _OVERSIZE:
                    out[f"{kind}.{pool}.{field}"] = int(values[i])
                elif pool == "all":
                    out[f"{kind}.{field}"] = int(values[i])
                i += 1
    for name in SCALARS:
        out[name] = int(scalars.get(name, 0))
    return dict(sorted(out.items()))


def native_stats(index: int) -> dict[str, int]:
    """``memory_stats`` of the native backend: every buffer is one allocation and one
    segment (reserved == allocated, nothing cached, no pools: counted as large)."""
    c = _memrecord.counters(index)
    cur, peak, allocs, frees = c["allocated"], c["peak"], c["allocs"], c["frees"]
    n_cur = allocs - frees
    per_pool = [0] * (len(KINDS) * len(POOLS) * len(FIELDS))
    count = [n_cur, n_cur, allocs, frees]  # peak of the count is not tracked: current
    nbytes = [cur, peak, c["bytes_allocated"], c["bytes_freed"]]
    for kind in ("allocation", "segment", "active"):
        _fill(per_pool, kind, count)
    for kind in ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes"):
        _fill(per_pool, kind, nbytes)
    scalars = {"num_device_alloc": allocs, "num_device_free": frees, "max_split_size": -1}
    return stats_dict(per_pool, scalars)


def _fill(values: list[int], kind: str, fields: list[int]) -> None:
    k = KINDS.index(kind)
    for pool in (0, 2):  # all, large_pool
        base = (k * len(POOLS) + pool) * len(FIELDS)
        values[base : base + len(FIELDS)] = fields


def reset_native_accumulated(index: int) -> None:
    """Native backend: zero the bytes allocated / freed totals of device ``index``."""
    _memrecord.reset_totals(index)


# ------------------------------------------------------------------ summary
def _fmt_bytes(n: int) -> str:
    units = ("B  ", "KiB", "MiB", "GiB", "TiB", "PiB")
    v = float(n)
    unit = units[0]
    for u in units[1:]:
        if abs(v) < 1024 * 1024 * 0.75:
            break
        v /= 1024
        unit = u
    return f"{int(v):7d} {unit}" if unit == units[0] else f"{v:7.0f} {unit}"


def _fmt_count(n: int) -> str:
    return f"{n:11d}"


_ROWS: tuple[tuple[str, str, bool], ...] = (
    ("allocated_bytes", "Allocated memory", True),
    ("active_bytes", "Active memory", True),
    ("requested_bytes", "Requested memory", True),
    ("reserved_bytes", "NPU reserved memory", True),
    ("inactive_split_bytes", "Non-releasable memory", True),
    ("allocation", "Allocations", False),
    ("active", "Active allocs", False),
    ("segment", "NPU reserved segments", False),
    ("inactive_split", "Non-releasable allocs", False),
)


def format_summary(stats: Mapping[str, int], device: int, backend: str) -> str:
    """The ``memory_summary`` table of ``stats`` (a :func:`stats_dict`)."""
    header = (
        f"| {'Metric':<24}| {'Cur Usage':>11} | {'Peak Usage':>11} | "
        f"{'Tot Alloc':>11} | {'Tot Freed':>11} |"
    )
    width = len(header)
    rule = "|" + "=" * (width - 2) + "|"
    thin = "|" + "-" * (width - 2) + "|"

    def line(text: str) -> str:
        return "|" + text.center(width - 2) + "|"

    out = [rule, line(f"pyacl_rt NPU memory summary, device ID {device}"), thin]
    out.append(
        line(
            f"allocator: {backend}  |  NPU OOMs: {stats.get('num_ooms', 0)}  |  "
            f"aclrtMalloc retries: {stats.get('num_alloc_retries', 0)}"
        )
    )
    out.append(rule)
    out.append(header)
    for kind, title, is_bytes in _ROWS:
        out.append(thin)
        fmt = _fmt_bytes if is_bytes else _fmt_count
        for pool, label in (
            ("all", title),
            ("large_pool", "  from large pool"),
            ("small_pool", "  from small pool"),
        ):
            vals = [int(stats.get(f"{kind}.{pool}.{f}", 0)) for f in FIELDS]
            cells = " | ".join(f"{fmt(v):>11}" for v in vals)
            out.append(f"| {label:<24}| {cells} |")
    out.append(thin)
    for kind, title in (
        ("oversize_allocations", "Oversize allocations"),
        ("oversize_segments", "Oversize NPU segments"),
    ):
        vals = [int(stats.get(f"{kind}.{f}", 0)) for f in FIELDS]
        cells = " | ".join(f"{_fmt_count(v):>11}" for v in vals)
        out.append(f"| {title:<24}| {cells} |")
    out.append(rule)
    return "\n".join(out) + "\n"
