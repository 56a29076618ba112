#!/usr/bin/env python3
"""A pool of Ray actors, one per Ascend card, each running the pipeline of its batches.

    pip install 'pyacl_rt[ray]'
    python examples/ray_workers.py [--cards N] [--batches M] [--json]

Ray's NPU resource does the pinning: an actor that asks for ``resources={"NPU": 1}``
starts with ``ASCEND_RT_VISIBLE_DEVICES`` set to the card Ray gave it, and pyacl_rt (the
real runtime and the mock alike) honours it: the actor sees exactly one device,
``Device(0)``, whose ``physical_id`` is that card. On a machine with cards Ray detects
them itself; elsewhere (the mock) this script declares ``--cards`` NPUs to a local
cluster (``ray.init(num_cpus=2, resources={"NPU": N})``). To join an existing cluster
set ``RAY_ADDRESS``.

The pipeline per batch: upload, a device-side step (a copy and a memset: a copy-based
stand-in for a kernel), download into pinned memory, checksum; the driver checks every
result against the same computation on the host.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

BATCH_BYTES = 64 * 1024
HEADER = 16  # the device-side step zeroes the first HEADER bytes of each batch


def make_batch(i: int) -> bytes:
    """Batch ``i``: deterministic bytes."""
    return bytes((i * 31 + j * 7) & 0xFF for j in range(256)) * (BATCH_BYTES // 256)


def expected(batch: bytes) -> int:
    """The pipeline's result computed on the host."""
    return sum(batch[HEADER:])


class CardWorker:
    """One actor per card (wrapped by ``ray.remote`` in :func:`main`)."""

    def __init__(self) -> None:
        import pyacl_rt as npu

        self.npu = npu
        self.stream = npu.Stream(0)  # Device(0): the one card Ray gave this actor
        self.inp = npu.DeviceBuffer(BATCH_BYTES)
        self.out = npu.DeviceBuffer(BATCH_BYTES)
        self.pinned = npu.HostBuffer(BATCH_BYTES)

    def describe(self) -> dict[str, Any]:
        """What this actor sees: the variable Ray set, device count, physical id."""
        return {
            "pid": os.getpid(),
            "visible": os.environ.get("ASCEND_RT_VISIBLE_DEVICES"),
            "devices": self.npu.device_count(),
            "physical_id": self.npu.Device(0).physical_id,
        }

    def run(self, batch_ids: list[int]) -> list[int]:
        """Run the pipeline over batches ``batch_ids``; return their checksums."""
        npu, s = self.npu, self.stream
        results = []
        for i in batch_ids:
            npu.copy(self.inp, make_batch(i), stream=s, non_blocking=True)  # upload
            npu.copy(self.out, self.inp, stream=s, non_blocking=True)  # device step
            self.out.memset(0, HEADER, stream=s, non_blocking=True)
            npu.copy(self.pinned, self.out, stream=s, non_blocking=True)  # download
            s.synchronize()
            results.append(sum(self.pinned.memoryview()))
        return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cards", type=int, default=4, help="actors, one per card")
    ap.add_argument("--batches", type=int, default=16, help="batches, spread over the cards")
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    args = ap.parse_args(argv)

    import logging

    import ray

    # Ray's NPU detection tries pyACL (`import acl`) first and logs its absence as an
    # error; pyacl_rt does not need it.
    logging.getLogger("ray._private.accelerators.npu").setLevel(logging.CRITICAL)
    if "RAY_ADDRESS" in os.environ:
        ray.init()
    else:  # a local cluster; the NPUs are declared (the mock has no /dev/davinci*)
        ray.init(
            num_cpus=2,
            resources={"NPU": args.cards},
            include_dashboard=False,
            logging_level="ERROR",
            log_to_driver=False,
        )
    try:
        Worker = ray.remote(num_cpus=0, resources={"NPU": 1})(CardWorker)
        actors = [Worker.remote() for _ in range(args.cards)]  # type: ignore[attr-defined]
        seen = ray.get([a.describe.remote() for a in actors])
        shares = [list(range(k, args.batches, args.cards)) for k in range(args.cards)]
        sums = ray.get([a.run.remote(ids) for a, ids in zip(actors, shares, strict=True)])
    finally:
        ray.shutdown()
    report = []
    for k, (info, ids, got) in enumerate(zip(seen, shares, sums, strict=True)):
        ok = got == [expected(make_batch(i)) for i in ids]
        report.append({**info, "actor": k, "batches": ids, "ok": ok})
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        for r in report:
            print(
                f"actor {r['actor']}: ASCEND_RT_VISIBLE_DEVICES={r['visible']} sees "
                f"{r['devices']} device, physical id {r['physical_id']}, "
                f"{len(r['batches'])} batches {'ok' if r['ok'] else 'WRONG'}"
            )
    distinct = len({r["physical_id"] for r in report}) == len(report)
    return 0 if distinct and all(r["ok"] and r["devices"] == 1 for r in report) else 1


if __name__ == "__main__":
    sys.exit(main())
