#!/usr/bin/env python3
"""One process per Ascend card with plain ``multiprocessing`` (spawn), the way
torchrun-style launchers run one worker per device.

    python examples/per_card.py [--cards N] [--batches M]     # spawns N workers
    LOCAL_RANK=2 python examples/per_card.py --worker         # one worker, as a launcher

Each worker pins itself to its card by setting ``ASCEND_RT_VISIBLE_DEVICES`` to its rank
**before its first pyacl_rt call** (importing pyacl_rt is fine: the runtime reads the
variable when it starts). It then sees exactly one device, ``Device(0)``, whose
``physical_id`` is the card; it runs its batches through a small pipeline (upload, a
device-side step, download; a copy-based stand-in for a kernel) and returns checksums.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
from typing import Any

import pyacl_rt as npu

BATCH_BYTES = 64 * 1024
HEADER = 16  # the device-side step zeroes the first HEADER bytes of each batch


def make_batch(i: int) -> bytes:
    """Batch ``i``: deterministic bytes."""
    return bytes((i * 31 + j * 7) & 0xFF for j in range(256)) * (BATCH_BYTES // 256)


def expected(batch: bytes) -> int:
    """The pipeline's result computed on the host."""
    return sum(batch[HEADER:])


def pin_to_card(rank: int) -> None:
    """Make card ``rank`` this process's only device (before the first pyacl_rt call).
    When the launcher already restricted the cards (``ASCEND_RT_VISIBLE_DEVICES=4,5``),
    ``rank`` indexes that list."""
    if npu.is_initialized():
        raise RuntimeError("set ASCEND_RT_VISIBLE_DEVICES before the runtime starts")
    given = os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "")
    cards = given.split(",") if given else None
    os.environ["ASCEND_RT_VISIBLE_DEVICES"] = cards[rank] if cards else str(rank)


def run_pipeline(batch_ids: list[int]) -> dict[str, Any]:
    """Run the batches on this process's (only) device; report what it saw."""
    stream = npu.Stream(0)
    inp, out = npu.DeviceBuffer(BATCH_BYTES), npu.DeviceBuffer(BATCH_BYTES)
    pinned = npu.HostBuffer(BATCH_BYTES)
    results = []
    for i in batch_ids:
        batch = make_batch(i)
        npu.copy(inp, batch, stream=stream, non_blocking=True)  # upload
        npu.copy(out, inp, stream=stream, non_blocking=True)  # device-side step:
        out.memset(0, HEADER, stream=stream, non_blocking=True)  # copy, clear header
        npu.copy(pinned, out, stream=stream, non_blocking=True)  # download
        stream.synchronize()
        results.append(sum(pinned.memoryview()))
    for obj in (inp, out, pinned, stream):
        obj.close()
    return {
        "visible": os.environ.get("ASCEND_RT_VISIBLE_DEVICES"),
        "devices": npu.device_count(),
        "physical_id": npu.Device(0).physical_id,
        "batches": batch_ids,
        "ok": results == [expected(make_batch(i)) for i in batch_ids],
    }


def worker(rank: int, batch_ids: list[int], results: Any) -> None:
    """Body of one spawned worker process."""
    pin_to_card(rank)
    results.put((rank, run_pipeline(batch_ids)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cards", type=int, default=4, help="workers, one per card")
    ap.add_argument("--batches", type=int, default=8, help="batches, spread over the cards")
    ap.add_argument("--worker", action="store_true", help="run one worker (LOCAL_RANK)")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)
    if args.worker:  # started by a launcher: the rank comes from the environment
        rank = int(os.environ.get("LOCAL_RANK", "0"))
        pin_to_card(rank)
        report = {rank: run_pipeline(list(range(rank, args.batches, args.cards)))}
    else:
        ctx = mp.get_context("spawn")  # never fork a process that may have started ACL
        results = ctx.Queue()
        procs = [
            ctx.Process(target=worker, args=(r, list(range(r, args.batches, args.cards)), results))
            for r in range(args.cards)
        ]
        for p in procs:
            p.start()
        report = dict(results.get(timeout=300) for _ in procs)
        for p in procs:
            p.join()
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        for rank in sorted(report):
            r = report[rank]
            print(
                f"worker {rank}: ASCEND_RT_VISIBLE_DEVICES={r['visible']} sees "
                f"{r['devices']} device, physical id {r['physical_id']}, "
                f"batches {r['batches']} {'ok' if r['ok'] else 'WRONG'}"
            )
    return 0 if all(r["ok"] for r in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
