"""The caching allocator (pyacl_rt._allocator) driven by Hypothesis (issue 12).

A rule-based state machine allocates device buffers (on two owned streams and the
default stream), raw addresses (``caching_allocator(s)``) and pinned host buffers, uses
them on other streams (memsets, host-to-device copies), queues host callbacks that hold
the streams for a moment, and frees from the main thread, from other threads, by
garbage collection and from inside a host callback (the releaser thread). It also asks
for hostile sizes (0, 1, 2**63 +- k, 2**64 - k, more than the device). After every step
it checks that:

* no two live blocks overlap (device blocks by their cached block size, pinned blocks by
  their power-of-two block) and the C bookkeeping is consistent (``Core.check()``);
* the statistics add up: ``memory_stats()`` allocation counts and allocated / requested
  bytes equal what the live buffers hold, ``host_memory_stats()`` likewise, and the
  mock's live allocations are exactly the allocator's segments and pinned blocks;
* runtime events are accounted for and bounded: every guard event the allocator created
  is either idle in its (bounded) pool or guards a pending block or a segment mark, and
  the mock's live events are exactly those plus the stream layer's keep-alive markers
  (whose idle pool is bounded too).

Each example ends by freeing everything, synchronizing and emptying the cache: the mock's
live events, allocations and bytes are then back where they started.

The soak test runs 100,000 request cycles (allocate, copy on a side stream, host
callback, free) and checks that events, allocations and memory stay flat.
"""

from __future__ import annotations

import gc
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import pyacl_rt
from pyacl_rt import _allocator as A
from pyacl_rt import _memory as M
from pyacl_rt import _releaser, errors
from pyacl_rt import _stream as S
from pyacl_rt import _watch as W
from pyacl_rt._allocator import _guards
from pyacl_rt._allocator._host import block_size
from pyacl_rt._cachecore import MAX_ALLOC, round_size
from pyacl_rt._memory import backend as _membackend
from pyacl_rt.mock import mock_control

MiB = 1 << 20
DEV = 0

#: Everyday sizes: pool boundaries (512 B, 1 MiB small/large, 10 MiB) and random ones.
SIZES = st.one_of(
    st.sampled_from([0, 1, 511, 512, 513, 4096, MiB, MiB + 1, 3 * MiB, 10 * MiB, 12 * MiB + 1]),
    st.integers(min_value=1, max_value=4 * MiB),
)
#: Sizes no allocator can serve: 2**63 +- k, 2**64 - k, just above MAX_ALLOC.
HOSTILE = st.one_of(
    st.sampled_from([2**63, MAX_ALLOC + 1, 2**64 - 2 * MiB, 2**64 - 2 * MiB - 1]),
    st.integers(min_value=0, max_value=4096).map(lambda k: 2**63 + k),
    st.integers(min_value=1, max_value=4096).map(lambda k: 2**63 - k),
    st.integers(min_value=1, max_value=4096).map(lambda k: 2**64 - k),
)
ENTRY_POINTS = ("DeviceBuffer", "caching_allocator", "caching_allocator_alloc", "HostBuffer")


def _events() -> int:
    return mock_control().stat("events", DEV)


def _device_allocations() -> int:
    return mock_control().stat("allocations", DEV)


def _host_allocations() -> int:
    return mock_control().stat("host_allocations")


def _guard_events_held() -> list[int]:
    """Event handles the allocator holds as guards (pending blocks, segment marks)."""
    held: list[int] = []
    lists: list[list[_guards.Guard]] = []
    for a in A._backend.devices.values():
        lists += [g for _, g in a.pending] + [g for _, g in a.marks.values()]
    if A._backend.host is not None:
        lists += [g for _, g in A._backend.host.pending]
    for guards in lists:
        held += [g[2] for g in guards if g[0] == "event"]
    return held


def _marker_events() -> int:
    """Keep-alive marker events of the stream layer: idle ones and those in watch lists."""
    idle = sum(len(v) for v in W.markers._free.values())
    streams = [*list(S.live_streams.snapshot()), S.default_stream(DEV)]
    return idle + sum(len(s.stream_state.watch) for s in set(streams))


class AllocatorMachine(RuleBasedStateMachine):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        # every example starts from the same state: empty caches, no idle events
        pyacl_rt.synchronize(DEV)
        M.empty_cache()
        W.markers.drop_all()
        self.streams = [S.Stream(DEV), S.Stream(DEV), S.default_stream(DEV)]
        #: live DeviceBuffers with the size asked for
        self.dev: list[tuple[M.DeviceBuffer, int]] = []
        #: live raw addresses: (handle, address, size asked for)
        self.raw: list[tuple[Any, int, int]] = []
        self.host: list[tuple[M.HostBuffer, int]] = []
        self.base_events = _events()
        self.base_dev = _device_allocations()
        self.base_host = _host_allocations()
        self.base_host_blocks = self._host_blocks()
        self.base_markers = _marker_events()
        self.base_guards = sum(len(p.out) for p in _guards._pools.values())

    # ------------------------------------------------------------- helpers
    @staticmethod
    def _host_blocks() -> int:
        h = A._backend.host
        return 0 if h is None else len(h.blocks)

    def _pick(self, items: list[Any], i: int) -> Any:
        return items[i % len(items)]

    # -------------------------------------------------------------- allocate
    @rule(n=SIZES, s=st.integers(0, 2))
    def alloc_device(self, n: int, s: int) -> None:
        self.dev.append((M.DeviceBuffer(n, stream=self.streams[s]), n))

    @rule(n=SIZES, s=st.integers(0, 2))
    def alloc_raw(self, n: int, s: int) -> None:
        h = pyacl_rt.caching_allocator(self.streams[s])
        self.raw.append((h, h.alloc(n), n))

    @rule(n=st.one_of(st.sampled_from([1, 511, 512, 513, 4096]), st.integers(1, MiB)))
    def alloc_host(self, n: int) -> None:
        self.host.append((M.HostBuffer(n), n))

    @rule(n=HOSTILE, entry=st.sampled_from(ENTRY_POINTS), s=st.integers(0, 2))
    def alloc_hostile(self, n: int, entry: str, s: int) -> None:
        before = (M.memory_stats(DEV), pyacl_rt.host_memory_stats(), _device_allocations())
        stream = self.streams[s]
        with pytest.raises(errors.AclOutOfMemoryError) as ei:
            if entry == "DeviceBuffer":
                M.DeviceBuffer(n, stream=stream)
            elif entry == "caching_allocator":
                pyacl_rt.caching_allocator(stream).alloc(n)
            elif entry == "caching_allocator_alloc":
                pyacl_rt.caching_allocator_alloc(n, stream=stream)
            else:
                M.HostBuffer(n)
        assert str(n) in str(ei.value)
        after = (M.memory_stats(DEV), pyacl_rt.host_memory_stats(), _device_allocations())
        assert after == before

    @rule()
    def alloc_more_than_the_device(self) -> None:
        total = pyacl_rt.mem_get_info(DEV)[1]
        reserved = M.memory_reserved(DEV)
        with pytest.raises(errors.AclOutOfMemoryError, match=str(total + 1)) as ei:
            M.DeviceBuffer(total + 1)
        assert ei.value.recent_message is None or "aclrtMalloc" in ei.value.recent_message
        assert M.memory_reserved(DEV) == reserved  # the cache was kept

    # ------------------------------------------------------------------- use
    @precondition(lambda self: self.dev)
    @rule(i=st.integers(0, 1000), s=st.integers(0, 2), value=st.integers(0, 255))
    def memset_on_a_stream(self, i: int, s: int, value: int) -> None:
        b, _ = self._pick(self.dev, i)
        M.memset(b, value, stream=self.streams[s], non_blocking=True)

    @precondition(lambda self: self.dev and self.host)
    @rule(i=st.integers(0, 1000), j=st.integers(0, 1000), s=st.integers(0, 2))
    def copy_host_to_device(self, i: int, j: int, s: int) -> None:
        b, _ = self._pick(self.dev, i)
        h, _ = self._pick(self.host, j)
        n = min(b.nbytes, h.nbytes)
        M.memcpy_async(b, h, n, self.streams[s])

    @precondition(lambda self: self.dev)
    @rule(i=st.integers(0, 1000), s=st.integers(0, 2))
    def copy_numpy_to_device(self, i: int, s: int) -> None:
        b, _ = self._pick(self.dev, i)
        M.copy(b, np.ones(b.nbytes, np.uint8), stream=self.streams[s], non_blocking=True)

    @precondition(lambda self: self.dev)
    @rule(i=st.integers(0, 1000), s=st.integers(0, 2))
    def record_stream(self, i: int, s: int) -> None:
        b, _ = self._pick(self.dev, i)
        b.record_stream(self.streams[s])

    @rule(s=st.integers(0, 2), ms=st.integers(0, 5))
    def host_callback(self, s: int, ms: int) -> None:
        """Holds the stream for a moment: frees meanwhile find its work pending."""
        self.streams[s].launch_host_func(time.sleep, ms / 1000)

    # ------------------------------------------------------------------ free
    @precondition(lambda self: self.dev)
    @rule(i=st.integers(0, 1000), how=st.sampled_from(["close", "thread", "gc", "callback"]))
    def free_device(self, i: int, how: str) -> None:
        b, _ = self.dev.pop(i % len(self.dev))
        if how == "close":
            b.close()
        elif how == "thread":
            t = threading.Thread(target=b.close)
            t.start()
            t.join()
        elif how == "gc":
            cycle: list[Any] = [b]
            cycle.append(cycle)  # only the cycle collector frees it
            del b, cycle
            gc.collect()
        else:  # the last reference dies on the report thread: the releaser frees it
            s = self.streams[i % 3]
            box = [b]
            del b
            s.launch_host_func(box.clear)
            del box
            s.synchronize()
            assert _releaser.flush(60)

    @precondition(lambda self: self.raw)
    @rule(i=st.integers(0, 1000))
    def free_raw(self, i: int) -> None:
        h, p, _ = self.raw.pop(i % len(self.raw))
        h.free(p)

    @precondition(lambda self: self.host)
    @rule(i=st.integers(0, 1000), how=st.sampled_from(["close", "thread", "gc"]))
    def free_host(self, i: int, how: str) -> None:
        h, _ = self.host.pop(i % len(self.host))
        if how == "close":
            h.close()
        elif how == "thread":
            t = threading.Thread(target=h.close)
            t.start()
            t.join()
        else:
            del h
            gc.collect()

    # --------------------------------------------------------- waits, caches
    @rule(which=st.sampled_from(["device", "streams", "empty_cache"]))
    def wait(self, which: str) -> None:
        if which == "device":
            pyacl_rt.synchronize(DEV)
        elif which == "streams":
            for s in self.streams:
                s.synchronize()
        else:
            M.empty_cache()

    @rule(n=SIZES)
    def threads_storm(self, n: int) -> None:
        """Four threads allocate, use on another stream and free at the same time."""
        errs: list[BaseException] = []

        def work(k: int) -> None:
            try:
                for r in range(5):
                    b = M.DeviceBuffer(n, stream=self.streams[(k + r) % 3])
                    M.memset(b, k, stream=self.streams[(k + r + 1) % 3], non_blocking=True)
                    b.close()
            except BaseException as exc:  # reported below
                errs.append(exc)

        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errs, errs

    # ------------------------------------------------------------ invariants
    @invariant()
    def blocks_never_overlap(self) -> None:
        a = A._backend.devices.get(DEV)
        spans: list[tuple[int, int]] = []
        for b, n in self.dev:
            if n:
                assert a is not None
                info = a.core.block(b.ptr)
                assert info is not None and info[3] == 1, (hex(b.ptr), info)
                assert info[0] >= round_size(n) and info[1] == n
                spans.append((b.ptr, b.ptr + info[0]))
        for _h, p, n in self.raw:
            assert a is not None
            info = a.core.block(p)
            assert info is not None and info[3] == 1 and info[1] == n
            spans.append((p, p + info[0]))
        spans.sort()
        for x, y in itertools.pairwise(spans):
            assert x[1] <= y[0], f"device blocks overlap: {x} {y}"
        hspans = sorted((h.ptr, h.ptr + block_size(n)) for h, n in self.host)
        for x, y in itertools.pairwise(hspans):
            assert x[1] <= y[0], f"pinned blocks overlap: {x} {y}"
        if a is not None:
            a.core.check()

    @invariant()
    def statistics_add_up(self) -> None:
        st_ = M.memory_stats(DEV)
        a = A._backend.devices.get(DEV)
        ptrs = [(b.ptr, n) for b, n in self.dev if n] + [(p, n) for _, p, n in self.raw]
        live = [(a.core.block(p)[0], n) for p, n in ptrs] if a is not None else []
        assert st_["allocation.all.current"] == len(live)
        assert st_["allocated_bytes.all.current"] == sum(size for size, _ in live)
        assert st_["requested_bytes.all.current"] == sum(n for _, n in live)
        assert st_["active.all.current"] >= len(live)
        assert st_["reserved_bytes.all.current"] >= st_["active_bytes.all.current"]
        assert M.memory_allocated(DEV) == st_["allocated_bytes.all.current"]
        # every segment is one aclrtMalloc, and nothing else allocates device memory here
        assert _device_allocations() - self.base_dev == st_["segment.all.current"]
        hs = pyacl_rt.host_memory_stats()
        assert hs["allocations.current"] == len(self.host)
        assert hs["allocated_bytes.current"] == sum(block_size(n) for _, n in self.host)
        blocks = self._host_blocks()
        assert _host_allocations() - self.base_host == blocks - self.base_host_blocks
        assert hs["reserved_bytes.current"] >= hs["allocated_bytes.current"]

    @invariant()
    def events_are_accounted_for_and_bounded(self) -> None:
        held = _guard_events_held()
        pools = list(_guards._pools.values())
        idle = [ev for p in pools for ev in p.idle]
        out = [ev for p in pools for ev in p.out]
        # every guard event created is idle or guarding something: none was dropped
        assert sorted(out) == sorted(idle + held), (len(out), len(idle), len(held))
        assert all(len(p.idle) <= _guards.IDLE_MAX for p in pools)
        marker_cap = W.MarkerPool.IDLE_MAX
        assert all(len(v) <= marker_cap for v in W.markers._free.values())
        # the runtime's live events are exactly those plus the keep-alive markers
        grown = len(out) - self.base_guards + _marker_events() - self.base_markers
        assert _events() - self.base_events == grown

    # -------------------------------------------------------------- teardown
    def teardown(self) -> None:
        for b, _ in self.dev:
            b.close()
        for h, p, _ in self.raw:
            h.free(p)
        for hb, _ in self.host:
            hb.close()
        self.dev, self.raw, self.host = [], [], []
        pyacl_rt.synchronize(DEV)
        M.empty_cache()
        self.streams[0].close()
        self.streams[1].close()
        W.markers.drop_all()
        assert M.memory_allocated(DEV) == 0 and M.memory_reserved(DEV) == 0
        assert _device_allocations() == self.base_dev
        assert _host_allocations() == self.base_host - self.base_host_blocks
        assert _events() == self.base_events - self.base_markers - self.base_guards


@pytest.fixture
def caching_clean(mock_loaded: Any) -> Iterator[None]:
    prev = _membackend.select("caching")
    pyacl_rt.set_device(DEV)
    pyacl_rt.synchronize(DEV)
    M.empty_cache()
    W.markers.drop_all()
    try:
        yield
    finally:
        _membackend.select(prev.name)


@pytest.mark.npu_races("random memsets and copies on any stream: the bytes do not matter")
def test_allocator_state_machine(caching_clean: None) -> None:
    run_state_machine_as_test(
        AllocatorMachine,
        settings=settings(
            max_examples=50,
            stateful_step_count=40,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


# ------------------------------------------------------------------------ soak
def _soak_counts() -> tuple[int, int, int, int]:
    return (_events(), _device_allocations(), M.memory_allocated(DEV), M.memory_reserved(DEV))


def test_soak_request_cycles_stay_flat(caching_clean: None) -> None:
    """100,000 request cycles - allocate, copy on a side stream, host callback, free -
    end with the events, allocations and memory they had after the warm-up (issue 12:
    cross-stream frees under pending callbacks leaked one event each)."""
    side = S.Stream(DEV)
    main = S.default_stream(DEV)
    src = np.arange(4096, dtype=np.uint8)
    done = [0]

    def callback() -> None:
        done[0] += 1

    def cycle(i: int) -> None:
        b = M.DeviceBuffer(4096 if i % 3 else 3 * MiB, stream=main)
        M.copy(b[0:4096], src, stream=side, non_blocking=True)
        side.launch_host_func(callback)
        b.close()  # the side stream's work (and callback) may still be pending

    for i in range(1000):
        cycle(i)
    side.synchronize()
    warm = _soak_counts()
    peak_events = 0
    for i in range(1000, 100_000):
        cycle(i)
        if i % 5000 == 0:
            peak_events = max(peak_events, _events())
    side.synchronize()
    pyacl_rt.synchronize(DEV)
    assert done[0] == 100_000
    end = _soak_counts()
    assert end[0] <= warm[0], (warm, end)  # events
    assert end[1] <= warm[1], (warm, end)  # device allocations (cached segments)
    assert end[2] == 0 and end[3] <= warm[3], (warm, end)  # memory
    assert peak_events <= warm[0] + _guards.IDLE_MAX + W.MarkerPool.IDLE_MAX + 64
    side.close()
