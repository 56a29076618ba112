#!/usr/bin/env python3
"""Caching allocator figures (issues 8 and 12), measured on the loaded library (the mock here).

    python scripts/bench_allocator.py [--number N] [--repeat R] [--threads T] [--rounds K]

Every time is per alloc+free pair: the minimum over ``--repeat`` interleaved rounds of
``--number`` pairs (timeit's rule: background load only adds time), each ratio against
a baseline measured in the same run.

1. **Cached alloc+free vs raw** (``--nbytes``, default 64 KiB):

   ``raw``     ``lowlevel.lib.aclrtMalloc(out, n, 0)`` + ``aclrtFree(out[0])`` (out array
               allocated once).
   ``cached``  ``h.free(h.alloc(n))`` with ``h = pyacl_rt.caching_allocator(s)``: the
               same raw-address interface (ints in, ints out), served from the cache
               after the first pair; one C call each on a hit.

   Target: raw / cached >= 10. For information the script also times
   ``caching_allocator_delete(caching_allocator_alloc(n, stream=s))`` (torch's
   function pair, a Python wrapper around the same cache).

2. **The buffer life vs raw** (4 KiB and 4 MiB): the whole Pythonic life of a buffer
   served from the cache against the raw runtime pair of the same size.

   device  ``DeviceBuffer(n, stream=s).close()`` vs ``aclrtMalloc`` + ``aclrtFree``
   host    ``HostBuffer(n).close()`` vs ``aclrtMallocHost`` + ``aclrtFreeHost``

   Target: raw / life >= 3 for each of the four rows. For information:
   ``DeviceBuffer(n).close()`` (the current stream), ``with DeviceBuffer(n, stream=s):``,
   a buffer dropped without ``close()`` (freed by its reference count), and
   ``DeviceBuffer(n).close()`` with ``PYACL_RT_ALLOCATOR=native``.

3. **Service workload.** ``--threads`` threads on 2 streams each run ``--rounds``
   "requests": allocate a few buffers of mixed sizes (0.5 KiB .. 24 MiB; batch-dependent
   activations and small metadata), memset them on their stream, sometimes copy one to
   a buffer of the other stream (cross-stream use: event-guarded reuse), and free them.
   At the end (before any ``empty_cache``): ``memory_reserved()`` /
   ``max_memory_allocated()``. Target: <= 1.25.

Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
import warnings
from collections.abc import Callable

warnings.simplefilter("ignore")

import pyacl_rt  # noqa: E402
from pyacl_rt import _memory as M  # noqa: E402
from pyacl_rt import lowlevel  # noqa: E402
from pyacl_rt._memory import backend as _membackend  # noqa: E402

KiB = 1024
MiB = 1024 * KiB
#: raw pair / buffer life, at least (section 2)
LIFE_TARGET = 3.0


def _per_pair(fn: Callable[[int], None], number: int) -> float:
    t0 = time.perf_counter()
    fn(number)
    return (time.perf_counter() - t0) / number


def _best_of(fns: dict[str, Callable[[int], None]], number: int, repeat: int) -> dict[str, float]:
    """Per-pair minimum of each function over ``repeat`` interleaved rounds."""
    for fn in fns.values():
        fn(50)  # warm: the caches hold a segment / block afterwards
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            best[name] = min(best[name], _per_pair(fn, number))
    return best


def _with_native(fn: Callable[[int], None]) -> Callable[[int], None]:
    def run(k: int) -> None:
        prev = _membackend.select("native")
        try:
            fn(k)
        finally:
            _membackend.select(prev.name)

    return run


def bench_pairs(number: int, repeat: int, nbytes: int) -> dict[str, float]:
    lib = lowlevel.lib
    out = lowlevel.ffi.new("uintptr_t[1]")
    s = pyacl_rt.current_stream(0)
    alloc = pyacl_rt.caching_allocator_alloc
    delete = pyacl_rt.caching_allocator_delete
    handle = pyacl_rt.caching_allocator(s)
    h_alloc, h_free = handle.alloc, handle.free
    malloc, free = lib.aclrtMalloc, lib.aclrtFree

    def raw(k: int) -> None:
        for _ in range(k):
            malloc(out, nbytes, 0)
            free(out[0])

    def cached(k: int) -> None:
        for _ in range(k):
            h_free(h_alloc(nbytes))

    def torch_pair(k: int) -> None:
        for _ in range(k):
            delete(alloc(nbytes, stream=s))

    return _best_of({"raw": raw, "cached": cached, "torch_pair": torch_pair}, number, repeat)


def bench_life(number: int, repeat: int, nbytes: int) -> dict[str, float]:
    """Section 2 at one size."""
    lib = lowlevel.lib
    out = lowlevel.ffi.new("uintptr_t[1]")
    s = pyacl_rt.Stream(0)
    DeviceBuffer, HostBuffer = M.DeviceBuffer, M.HostBuffer
    malloc, free = lib.aclrtMalloc, lib.aclrtFree
    malloc_host, free_host = lib.aclrtMallocHost, lib.aclrtFreeHost

    def raw_device(k: int) -> None:
        for _ in range(k):
            malloc(out, nbytes, 0)
            free(out[0])

    def raw_host(k: int) -> None:
        for _ in range(k):
            malloc_host(out, nbytes)
            free_host(out[0])

    def device(k: int) -> None:
        for _ in range(k):
            DeviceBuffer(nbytes, stream=s).close()

    def host(k: int) -> None:
        for _ in range(k):
            HostBuffer(nbytes).close()

    def device_current(k: int) -> None:
        for _ in range(k):
            DeviceBuffer(nbytes).close()

    def device_with(k: int) -> None:
        for _ in range(k):
            with DeviceBuffer(nbytes, stream=s):
                pass

    def device_dropped(k: int) -> None:
        for _ in range(k):
            DeviceBuffer(nbytes, stream=s)

    fns = {
        "raw_device": raw_device,
        "device": device,
        "raw_host": raw_host,
        "host": host,
        "device_current": device_current,
        "device_with": device_with,
        "device_dropped": device_dropped,
        "device_native": _with_native(device_current),
    }
    try:
        return _best_of(fns, number, repeat)
    finally:
        s.synchronize()
        s.close()


def service(threads: int, rounds: int) -> tuple[int, int, int]:
    """Returns (reserved at the end, peak allocated, peak reserved)."""
    streams = [pyacl_rt.Stream(0), pyacl_rt.Stream(0)]
    item_sizes = [12 * KiB, 48 * KiB, 160 * KiB, 768 * KiB]
    pyacl_rt.empty_cache()
    pyacl_rt.reset_peak_memory_stats(0)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        rng = random.Random(i)
        mine, other = streams[i % 2], streams[(i + 1) % 2]
        try:
            pyacl_rt.set_device(0)
            for _ in range(rounds):
                batch = rng.randint(1, 32)
                bufs = [M.DeviceBuffer(rng.randint(64, 4 * KiB), stream=mine)]
                for item in rng.sample(item_sizes, 2):
                    bufs.append(M.DeviceBuffer(batch * item, stream=mine))
                for b in bufs:
                    M.memset(b, 0, stream=mine, non_blocking=True)
                if rng.random() < 0.25:
                    dst = M.DeviceBuffer(bufs[1].nbytes, stream=other)
                    M.copy(dst, bufs[1], stream=other, non_blocking=True)
                    bufs.append(dst)
                mine.synchronize()
                for b in bufs:
                    b.close()
            mine.synchronize()
            other.synchronize()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    result = (
        M.memory_reserved(0),
        M.max_memory_allocated(0),
        M.max_memory_reserved(0),
    )
    for s in streams:
        s.synchronize()
        s.close()
    return result


def _us(t: float) -> str:
    return f"{t * 1e6:8.3f} us"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--number", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--nbytes", type=int, default=64 * KiB)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=150)
    args = ap.parse_args()
    pyacl_rt.set_device(0)
    if _membackend.device().name != "caching":
        print("PYACL_RT_ALLOCATOR is not 'caching': nothing to measure")
        return 1
    ok = True

    t = bench_pairs(args.number, args.repeat, args.nbytes)
    ratio = t["raw"] / t["cached"]
    print(f"1. alloc+free pair of {args.nbytes} bytes (best of {args.repeat} x {args.number}):")
    print(f"  raw aclrtMalloc+aclrtFree          {_us(t['raw'])}")
    print(f"  caching_allocator(s) alloc+free    {_us(t['cached'])}")
    print(f"  caching_allocator_alloc+delete     {_us(t['torch_pair'])}")
    print(f"  raw / cached = {ratio:.1f}x   (target >= 10x: {_verdict(ratio >= 10)})")
    print(f"  raw / caching_allocator_alloc+delete = {t['raw'] / t['torch_pair']:.1f}x (info)")
    ok &= ratio >= 10

    print(f"2. the buffer life, served from the cache (best of {args.repeat} x {args.number}):")
    print(f"  {'size':>7}  {'what':<44} {'per pair':>11}  {'raw / it':>8}")
    for nbytes in (4 * KiB, 4 * MiB):
        life = bench_life(args.number, args.repeat, nbytes)
        size = f"{nbytes // KiB} KiB" if nbytes < MiB else f"{nbytes // MiB} MiB"
        rows = (
            ("raw_device", "aclrtMalloc + aclrtFree", None),
            ("device", "DeviceBuffer(n, stream=s).close()", "raw_device"),
            ("raw_host", "aclrtMallocHost + aclrtFreeHost", None),
            ("host", "HostBuffer(n).close()", "raw_host"),
            ("device_current", "DeviceBuffer(n).close() (info)", "raw_device"),
            ("device_with", "with DeviceBuffer(n, stream=s): (info)", "raw_device"),
            ("device_dropped", "DeviceBuffer(n, stream=s), no close (info)", "raw_device"),
            ("device_native", "DeviceBuffer(n).close(), native (info)", "raw_device"),
        )
        for key, what, base in rows:
            line = f"  {size:>7}  {what:<44} {_us(life[key]):>11}"
            if base is not None:
                r = life[base] / life[key]
                line += f"  {r:7.2f}x"
                if "(info)" not in what:
                    hit = r >= LIFE_TARGET
                    line += f"  (target >= {LIFE_TARGET:g}x: {_verdict(hit)})"
                    ok &= hit
            print(line)

    reserved, peak_alloc, peak_reserved = service(args.threads, args.rounds)
    r = reserved / peak_alloc
    print(f"3. service workload ({args.threads} threads, 2 streams, {args.rounds} requests each):")
    print(
        f"  peak allocated {peak_alloc / MiB:.1f} MiB, reserved at the end {reserved / MiB:.1f} MiB"
    )
    ratio_peak = peak_reserved / peak_alloc
    print(
        f"  peak reserved {peak_reserved / MiB:.1f} MiB = {ratio_peak:.2f}x peak allocated (info)"
    )
    print(f"  reserved / peak allocated = {r:.3f}   (target <= 1.25: {_verdict(r <= 1.25)})")
    ok &= r <= 1.25
    print("PASS" if ok else "FAIL: a target was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
