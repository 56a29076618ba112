"""A control process for the benchmarks: an idle asyncio loop with a 1 ms ticker.

Run next to a measurement, it sees what the machine does to any process at the same
time: on a shared, loaded machine the scheduler alone can make an idle loop's 1 ms
ticker wake up late by several ms. ``scripts/bench_async.py`` compares its loop lag with
the control's; ``scripts/load_service.py`` reports it next to the service's latency.

Used from the scripts in this directory (``from loop_control import Control``)::

    control = Control()
    await control.start()      # the ticker runs from here ...
    ...                        # ... the measurement ...
    stats = await control.stop()   # ... to here: LoopLag(p50, p99, max) in seconds
"""

from __future__ import annotations

import asyncio
import sys
from typing import NamedTuple

#: The control process: ticks from start to the first line on its stdin, then prints
#: the p50, p99 and max of how late each tick woke up (seconds).
CONTROL = r"""
import asyncio, sys

async def main():
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_reader(sys.stdin.fileno(), stop.set)
    print("ready", flush=True)
    lags = []
    while not stop.is_set():
        t0 = loop.time()
        await asyncio.sleep(0.001)
        lags.append(loop.time() - t0 - 0.001)
    lags.sort() if lags else lags.append(0.0)
    q = lambda f: lags[min(len(lags) - 1, int(f * len(lags)))]
    print(q(0.5), q(0.99), lags[-1], flush=True)

asyncio.run(main())
"""


class LoopLag(NamedTuple):
    """How late the control's 1 ms ticks woke up, in seconds."""

    p50: float
    p99: float
    max: float


class Control:
    """The control process; :meth:`start` it, run the measurement, :meth:`stop` it."""

    proc: asyncio.subprocess.Process

    async def start(self) -> None:
        """Start the process and its ticker (returns once it ticks)."""
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CONTROL,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        line = await self.proc.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"the control process did not start: {line!r}")

    async def kill(self) -> None:
        """End the process at once (a measurement that was given up)."""
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def stop(self) -> LoopLag:
        """Stop the ticker and the process; the lag it saw."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"stop\n")
        await self.proc.stdin.drain()
        out = await self.proc.stdout.readline()
        await self.proc.wait()
        p50, p99, worst = (float(x) for x in out.split())
        return LoopLag(p50, p99, worst)
