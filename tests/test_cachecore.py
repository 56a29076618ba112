"""pyacl_rt._cachecore: the caching allocator's block bookkeeping, without a runtime.

Segments are fake address ranges: the Core never touches memory or the runtime.
"""

from __future__ import annotations

import itertools
import random

import pytest

from pyacl_rt import _cachecore as C
from pyacl_rt._allocator import _host
from pyacl_rt._memory.torchstats import KINDS

MiB = 1 << 20


def stat(core: C.Core, kind: str, pool: int = 0, field: int = 0) -> int:
    return int(core.stats()[(KINDS.index(kind) * 3 + pool) * 4 + field])


class Fake:
    """Hands out address ranges for segments, like aclrtMalloc would."""

    def __init__(self) -> None:
        self.next = 1 << 40

    def segment(self, core: C.Core, stream: int, nbytes: int) -> None:
        size = C.allocation_size(nbytes)
        core.add_segment(stream, self.next, size, C.round_size(nbytes) <= C.SMALL_SIZE)
        self.next += size + (1 << 30)

    def alloc(self, core: C.Core, stream: int, nbytes: int) -> int:
        p = core.alloc(stream, nbytes)
        if not p:
            self.segment(core, stream, nbytes)
            p = core.alloc(stream, nbytes)
        assert p
        return int(p)


def test_rounding_and_segment_sizes() -> None:
    assert C.round_size(0) == C.round_size(1) == 512
    assert C.round_size(513) == 1024
    assert C.allocation_size(1) == 2 * MiB
    assert C.allocation_size(MiB) == 2 * MiB
    assert C.allocation_size(MiB + 1) == 20 * MiB
    assert C.allocation_size(10 * MiB) == 10 * MiB
    assert C.allocation_size(11 * MiB) == 12 * MiB


def test_miss_then_split_and_reuse() -> None:
    core, f = C.Core(), Fake()
    assert core.alloc(0, 1000) == 0  # empty cache: miss
    a = f.alloc(core, 0, 1000)
    b = f.alloc(core, 0, 1000)
    assert b == a + 1024  # split from the same 2 MiB segment
    assert stat(core, "segment") == 1 and stat(core, "reserved_bytes") == 2 * MiB
    assert stat(core, "allocated_bytes") == 2048 and stat(core, "requested_bytes") == 2000
    assert stat(core, "inactive_split") == 1  # the tail of the segment
    assert core.free(a) == 1024
    assert core.alloc(0, 900) == a  # best fit: the freed 1 KiB block
    assert core.free(a) and core.free(b)
    assert stat(core, "inactive_split") == 0  # merged back into one block
    assert stat(core, "allocated_bytes") == 0 and stat(core, "active") == 0
    assert core.release_cached() == [(1 << 40, 2 * MiB)]
    assert stat(core, "reserved_bytes") == 0 and stat(core, "segment", 0, 3) == 1


def test_blocks_stay_with_their_stream() -> None:
    core, f = C.Core(), Fake()
    a = f.alloc(core, 7, 4096)
    core.free(a)
    assert core.alloc(8, 4096) == 0  # another stream never gets stream 7's block
    assert core.alloc(7, 4096) == a


def test_pending_block_not_reused_until_complete() -> None:
    core, f = C.Core(), Fake()
    a = f.alloc(core, 0, 4096)
    assert core.free_pending(a) == 4096
    assert stat(core, "allocated_bytes") == 0 and stat(core, "active_bytes") == 4096
    b = f.alloc(core, 0, 4096)
    assert b != a
    assert core.free(a) == 0  # pending: not allocated any more
    assert core.complete(a) == 4096
    assert core.complete(a) == 0
    assert core.alloc(0, 4096) == a


def test_large_pool_split_threshold() -> None:
    core, f = C.Core(), Fake()
    a = f.alloc(core, 0, 3 * MiB)  # 20 MiB segment, split (rest > 1 MiB)
    assert stat(core, "allocated_bytes", 2) == 3 * MiB
    core.free(a)
    b = f.alloc(core, 0, 19 * MiB + 512 * 1024)  # rest 0.5 MiB: not split
    assert b == a and stat(core, "allocated_bytes", 2) == 20 * MiB
    core.free(b)


def test_unknown_and_double_free() -> None:
    core, f = C.Core(), Fake()
    assert core.free(12345) == 0
    a = f.alloc(core, 0, 10)
    assert core.free(a) == 512
    assert core.free(a) == 0
    with pytest.raises(TypeError):
        core.alloc(0, "1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        core.free(True)


def test_randomized_consistency() -> None:
    """Random alloc/free/pending on 3 streams: allocated blocks never overlap, and the
    counters match what is live."""
    rng = random.Random(5)
    core, f = C.Core(), Fake()
    live: dict[int, tuple[int, int]] = {}  # ptr -> (size, requested)
    pending: list[int] = []
    for _ in range(4000):
        op = rng.random()
        if op < 0.55 or not live:
            n = rng.choice([1, 100, 512, 4000, 70000, MiB, 3 * MiB, 12 * MiB])
            n = rng.randint(1, n)
            p = f.alloc(core, rng.randrange(3), n)
            assert p not in live
            size, requested, _stream, state = core.block(p)
            assert size >= C.round_size(n) and requested == n and state == 1
            live[p] = (size, n)
        elif op < 0.85:
            p = rng.choice(list(live))
            assert core.free(p) == live.pop(p)[0]
        elif op < 0.95:
            p = rng.choice(list(live))
            assert core.free_pending(p) == live.pop(p)[0]
            pending.append(p)
        elif pending:
            assert core.complete(pending.pop(rng.randrange(len(pending))))
        spans = sorted((p, p + s) for p, (s, _) in live.items())
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
        core.check()  # links, tiling, free sets in order, counters = what blocks add up to
    assert stat(core, "allocation") == len(live)
    assert stat(core, "requested_bytes") == sum(r for _, r in live.values())
    total = 0
    for base, size, _stream, _small, blocks in core.segments():
        assert sum(b[1] for b in blocks) == size
        assert blocks[0][0] == base
        total += size
        for ptr, bsize, _req, state in blocks:
            if ptr in live:
                assert state == 1 and bsize >= live[ptr][0]
    assert stat(core, "reserved_bytes") == total
    for p in pending:
        core.complete(p)
    for p in list(live):
        core.free(p)
    core.release_cached()
    assert stat(core, "reserved_bytes") == 0 and stat(core, "active") == 0
    assert stat(core, "inactive_split") == 0


def test_clear_forgets_everything() -> None:
    core, f = C.Core(), Fake()
    f.alloc(core, 0, 10)
    f.alloc(core, 0, 5 * MiB)
    segs = core.clear()
    assert len(segs) == 2
    assert stat(core, "segment") == 0 and stat(core, "allocated_bytes") == 0
    assert core.segments() == []


def test_adopt_and_release_follow_ticks() -> None:
    """Wholly free segments move to another stream / are released only if they were
    free at the tick the caller's guard covers."""
    core, f = C.Core(), Fake()
    a = f.alloc(core, 1, 1000)
    core.free(a)
    t = core.tick()
    b = f.alloc(core, 1, 3 * MiB)  # a second segment, free only after tick t
    core.free(b)
    assert sorted(core.idle_streams()) == [1]
    assert core.adopt(1, 2, t) == 2 * MiB  # the small segment only
    assert core.alloc(2, 1000) == a
    assert core.release_cached(1, t) == []  # the large one became free after t
    assert core.release_cached(1, core.tick()) == [(b, 20 * MiB)]
    core.free(a)
    assert core.release_cached() == [(a, 2 * MiB)]


def test_free_reports_over_trim_budget() -> None:
    """free() returns -size while reserved > 1.25 x peak allocated and > peak + 20 MiB."""
    core, f = C.Core(), Fake()
    blocks = [f.alloc(core, k, 3 * MiB) for k in range(3)]  # three 20 MiB segments
    assert core.free(blocks[0]) == 3 * MiB  # no budget set
    core.set_trim(1250)
    assert core.free(blocks[1]) == -3 * MiB  # 60 MiB reserved, peak 9 MiB
    core.set_trim(0)
    assert core.free(blocks[2]) == 3 * MiB
    one = C.Core()
    one.set_trim(1250)
    p = Fake().alloc(one, 0, 1000)
    assert one.free(p) == 1024  # 2 MiB reserved: within peak + 20 MiB


def test_raw_handle_calls_back_on_miss_and_trim() -> None:
    core, f = C.Core(), Fake()
    calls: list[tuple[str, int]] = []

    def slow(stream: int, nbytes: int) -> int:
        calls.append(("slow", nbytes))
        return f.alloc(core, stream, nbytes)

    def trim() -> None:
        calls.append(("trim", 0))

    def traced_alloc(nbytes: int) -> int:
        calls.append(("traced_alloc", nbytes))
        return 7

    def traced_free(ptr: int) -> None:
        calls.append(("traced_free", ptr))

    h = C.Raw(core, 5, slow, trim, traced_alloc, traced_free)
    assert h.stream_key == 5
    p = h.alloc(1000)
    assert calls == [("slow", 1000)]
    h.free(p)
    assert h.alloc(1000) == p and len(calls) == 1  # a hit: no callback
    h.free(p)
    with pytest.raises(ValueError):
        h.free(p)
    C.set_tracing(True)
    try:
        assert h.alloc(10) == 7
        h.free(3)
    finally:
        C.set_tracing(False)
    assert calls[-2:] == [("traced_alloc", 10), ("traced_free", 3)]
    core.set_trim(1000)
    q = f.alloc(core, 9, 3 * MiB)  # enough cached to go over budget once freed
    r = f.alloc(core, 8, 3 * MiB)
    core.free(q)
    h2 = C.Raw(core, 8, slow, trim, traced_alloc, traced_free)
    h2.free(r)
    assert calls[-1] == ("trim", 0)
    with pytest.raises(TypeError):
        C.Raw(core)  # type: ignore[call-arg]


# ------------------------------------------------------- hostile sizes (issue 12)
HUGE = [2**64 - 1, 2**64 - 32, 2**64 - 64, 2**64 - 2 * MiB, 2**63 + 1, 2**63, 2**63 - 2 * MiB + 1]


def test_max_alloc_is_the_largest_segment_the_counters_hold() -> None:
    assert 2**63 - 2 * MiB == C.MAX_ALLOC
    assert C.round_size(C.MAX_ALLOC) == C.allocation_size(C.MAX_ALLOC) == C.MAX_ALLOC
    for n in HUGE:
        with pytest.raises(OverflowError, match=str(n)):
            C.round_size(n)
        with pytest.raises(OverflowError, match=str(n)):
            C.allocation_size(n)


@pytest.mark.parametrize("nbytes", HUGE)
def test_huge_request_is_never_served_from_the_cache(nbytes: int) -> None:
    """Issue 12: 2**64 - 1 rounded to 0 bytes and got a cached block (0-byte split)."""
    core, f = C.Core(), Fake()
    p = f.alloc(core, 0, 1000)
    core.free(p)
    f.segment(core, 0, 64 * MiB)
    before = core.stats()
    assert core.alloc(0, nbytes) == 0
    assert core.stats() == before
    calls: list[int] = []

    def slow(stream: int, n: int) -> int:
        calls.append(n)
        raise MemoryError("refused")

    h = C.Raw(core, 0, slow, lambda: None, lambda n: 0, lambda p: None)
    with pytest.raises(MemoryError):
        h.alloc(nbytes)
    assert calls == [nbytes] and core.stats() == before


def test_segments_that_overflow_are_refused() -> None:
    core = C.Core()
    with pytest.raises(OverflowError):
        core.add_segment(0, 1 << 40, 2**63, False)  # reserved bytes would go negative
    with pytest.raises(OverflowError):
        core.add_segment(0, 2**64 - MiB, 2 * MiB, True)  # wraps the address space
    core.add_segment(0, 1 << 40, C.MAX_ALLOC, False)
    with pytest.raises(OverflowError):
        core.add_segment(0, 1, C.MAX_ALLOC, False)  # reserved > INT64_MAX
    assert stat(core, "reserved_bytes") == C.MAX_ALLOC and stat(core, "segment") == 1
    p = core.alloc(0, C.MAX_ALLOC)
    assert p == 1 << 40 and stat(core, "allocated_bytes") == C.MAX_ALLOC
    assert core.free(p) == C.MAX_ALLOC and stat(core, "allocated_bytes") == 0


def test_trim_budget_is_exact_for_huge_counters() -> None:
    """reserved * 1000 overflowed 64 bits: 4 EiB reserved over a 2 EiB peak was not
    reported as over the 1.25x budget."""
    core = C.Core()
    core.set_trim(1250)
    core.add_segment(0, 1 << 40, 2**62, False)
    p = core.alloc(0, 2**61)
    assert core.free(p) == -(2**61)


def test_accumulated_totals_saturate() -> None:
    core = C.Core()
    core.add_segment(0, 1 << 40, 2**62, False)
    for _ in range(3):  # 3 * 2**62 bytes allocated in total: more than INT64_MAX
        core.free(core.alloc(0, 2**62))
    assert stat(core, "allocated_bytes", 0, 2) == stat(core, "allocated_bytes", 0, 3) == 2**63 - 1
    assert stat(core, "allocated_bytes") == 0 and stat(core, "allocation", 0, 2) == 3


# ------------------------------------------------------------- pinned HostCore
def test_pinned_block_sizes_match_the_python_rule() -> None:
    for n in [*range(0, 4100), *(2**k + d for k in range(10, 63) for d in (-1, 0, 1)), 2**63]:
        assert C.host_block_size(n) == _host.block_size(n), n
    assert C.host_block_size(2**63 + 1) == 0


def test_host_core_block_states_and_counters() -> None:
    h = C.HostCore()
    assert h.take(100) == 0  # nothing idle
    h.add(0x10000, 512)
    h.add(0x20000, 1024)
    with pytest.raises(ValueError, match="already known"):
        h.add(0x10000, 512)
    with pytest.raises(ValueError, match="power of two"):
        h.add(0x30000, 1000)
    st = h.stats()
    assert st["allocations.current"] == 2 and st["allocated_bytes.current"] == 1536
    assert st["reserved_bytes.current"] == 1536 and st["num_host_alloc"] == 2
    assert h.give(0x10000) == 512 and h.give(0x10000) == 0  # not allocated any more
    assert h.take(600) == 0  # a 1024-byte block is wanted
    assert h.take(300) == 0x10000  # the idle 512-byte block
    assert h.hold(0x20000) == 1024  # freed under pending work: not reusable
    assert h.take(1024) == 0 and h.make_idle(0x20000) == 1024 and h.make_idle(0x20000) == 0
    assert h.take(1000) == 0x20000 and h.size(0x20000) == 1024 and h.size(0x1) == 0
    assert h.blocks() == {0x10000: 512, 0x20000: 1024}
    st = h.stats()
    assert st["allocated_bytes.peak"] == 1536 and st["allocations.current"] == 2
    h.give(0x10000)
    h.give(0x20000)
    assert sorted(h.drain_idle()) == [(0x10000, 512), (0x20000, 1024)]
    st = h.stats()
    assert st["reserved_bytes.current"] == 0 and st["num_host_free"] == 2
    assert st["reserved_bytes.peak"] == 1536 and h.drain_idle() == []
    h.add(0x40000, 4096)
    assert h.clear() == [(0x40000, 4096)] and h.size(0x40000) == 0
    assert h.stats()["allocations.current"] == 0


def test_host_core_many_blocks() -> None:
    h = C.HostCore()
    rng = random.Random(3)
    live: dict[int, int] = {}
    idle: dict[int, int] = {}
    nxt = 1 << 30
    for _ in range(3000):
        if live and rng.random() < 0.5:
            ptr = rng.choice(list(live))
            assert h.give(ptr) == live[ptr]
            idle[ptr] = live.pop(ptr)
            continue
        n = rng.randint(1, 1 << 16)
        size = C.host_block_size(n)
        ptr = h.take(n)
        if ptr:
            assert idle.pop(ptr) == size
        else:
            ptr = nxt
            nxt += 1 << 20
            h.add(ptr, size)
        live[ptr] = size
    st = h.stats()
    assert st["allocations.current"] == len(live)
    assert st["allocated_bytes.current"] == sum(live.values())
    assert st["reserved_bytes.current"] == sum(live.values()) + sum(idle.values())
    assert sorted(h.drain_idle()) == sorted(idle.items())
