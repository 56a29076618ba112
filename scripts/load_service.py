"""Load generator for examples/service: N concurrent clients for a bounded time.

Each client (``--client raw``, the default: one keep-alive HTTP/1.1 connection on asyncio
streams; ``--client httpx``: an ``httpx.AsyncClient`` pool, whose own cost dominates on a
small machine) POSTs random bodies to ``/infer`` back to back and checks each answer
against the model the service names in ``GET /health`` (``affine_u8``: every byte ``x``
becomes ``(scale * x + bias) mod 256``). The load runs in this process, the service in
its own; bodies and expected answers are made before the run. The first ``--warmup``
seconds (default 1) of the run are not measured; then ``--duration`` seconds are.

Prints p50 / p99 latency, throughput and errors, then PASS/FAIL for: zero errors, and p99
latency within 5x of p50 (the service keeps its loop unblocked, so a request never waits
behind another's device work). Exit status 1 on a miss. It also prints whether the
machine was *loaded* during the run: an idle asyncio loop in a control process
(``loop_control.py``) ticks every 1 ms meanwhile, and on a shared machine whose cores
are taken by other processes its ticks wake up late; TCP retransmits on the machine
during the run (Linux) count as loaded too (loopback packets delivered late). A tail the
service shows while the control stays quiet is the service's own. The load generator's
own loop lag is printed as well (its latencies include it).

``--spawn`` starts the service itself (``examples/service/app.py``, with
``PYACL_RT_SYNC_DEBUG=error`` unless ``--no-sync-debug``) on a free port and stops it
after; otherwise ``--url`` names a running one.

Run: ``python scripts/load_service.py --spawn --clients 64 --duration 5``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from loop_control import Control, LoopLag

REPO = Path(__file__).resolve().parent.parent


def model_table(url: str) -> bytes:
    """The byte table of the service's model, from ``GET /health``."""
    import json
    import urllib.request

    with urllib.request.urlopen(url + "/health", timeout=30) as r:
        model = json.load(r)["model"]
    if model.get("kernel") != "affine_u8":
        raise SystemExit(f"unknown model {model!r}")
    return bytes((model["scale"] * x + model["bias"]) & 0xFF for x in range(256))


def bodies(seed: int, size: int, table: bytes, count: int = 16) -> list[tuple[bytes, bytes]]:
    """``count`` random request bodies of a client and the answers the model gives
    (made before the run: the measured loop spends no CPU on them)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        body = rng.randbytes(size)
        out.append((body, body.translate(table)))
    return out


#: ``post(body) -> (HTTP status, response body)``: one request of a client.
Post = Callable[[bytes], Awaitable[tuple[int, bytes]]]


async def client(
    post: Post,
    work: list[tuple[bytes, bytes]],
    start: float,
    stop: float,
    lat: list[float],
    errs: list[str],
    on_error: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Requests back to back until ``stop``; the latency of those started at or after
    ``start`` (the warm-up before it is not measured) goes to ``lat``. ``on_error`` runs
    after a request raised (the raw client drops its connection)."""
    i = 0
    while time.perf_counter() < stop:
        body, want = work[i % len(work)]
        i += 1
        t0 = time.perf_counter()
        try:
            status, content = await post(body)
            if status != 200:
                errs.append(f"HTTP {status}: {content[:200]!r}")
            elif content != want:
                errs.append("wrong answer")
            elif t0 >= start:
                lat.append(time.perf_counter() - t0)
        except Exception as exc:
            errs.append(f"{type(exc).__name__}: {exc}")
            if on_error is not None:
                await on_error()


class RawClient:
    """A minimal HTTP/1.1 keep-alive client over asyncio streams: one connection per
    client, no pool (so no pool scheduling in the measured latency)."""

    def __init__(self, url: str) -> None:
        from urllib.parse import urlsplit

        u = urlsplit(url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.conn is None:
            self.conn = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.conn
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: {len(body)}\r\n"
            "Content-Type: application/octet-stream\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")  # one await for the status and headers
        status = int(head.split(None, 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
                break
        return status, await reader.readexactly(length)

    async def post_infer(self, body: bytes) -> tuple[int, bytes]:
        """One request to the service's ``/infer``."""
        return await self.post("/infer", body)

    async def close(self) -> None:
        if self.conn is not None:
            self.conn[1].close()
            await self.conn[1].wait_closed()

    async def reset(self) -> None:
        """Drop the connection after an error (the next request opens a new one)."""
        await self.close()
        self.conn = None


async def drive_raw(
    url: str, clients: int, warmup: float, duration: float, work: list[list[tuple[bytes, bytes]]]
) -> tuple[list[float], list[str], float]:
    lat: list[float] = []
    errs: list[str] = []
    conns = [RawClient(url) for _ in range(clients)]
    try:
        t0 = time.perf_counter()
        start, stop = t0 + warmup, t0 + warmup + duration
        await asyncio.gather(
            *(
                client(c.post_infer, work[i], start, stop, lat, errs, on_error=c.reset)
                for i, c in enumerate(conns)
            )
        )
        took = time.perf_counter() - start
    finally:
        for c in conns:
            await c.close()
    return lat, errs, took


async def drive(
    url: str, clients: int, warmup: float, duration: float, work: list[list[tuple[bytes, bytes]]]
) -> tuple[list[float], list[str], float]:
    import httpx

    lat: list[float] = []
    errs: list[str] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as http:

        async def post(body: bytes) -> tuple[int, bytes]:
            r = await http.post(url + "/infer", content=body)
            return r.status_code, r.content

        t0 = time.perf_counter()
        start, stop = t0 + warmup, t0 + warmup + duration
        await asyncio.gather(
            *(client(post, work[i], start, stop, lat, errs) for i in range(clients))
        )
        took = time.perf_counter() - start
    return lat, errs, took


#: An idle loop's 1 ms ticker waking up later than this at p99 (s), or later than
#: LOADED_WORST even once: the machine is loaded (other processes took the cores). A
#: CPU-bound process (the service) is starved far longer than an idle one then.
LOADED_LAG, LOADED_WORST = 0.002, 0.005


def tcp_retransmits() -> int | None:
    """The machine's TCP segments retransmitted so far (Linux ``/proc/net/snmp``), or None.

    On a loaded machine loopback packets are delivered late (the kernel's softirq work
    waits for a core), the sender's loss-probe timer fires and retransmits: a request
    then takes 100s of ms more without either process being slow."""
    try:
        lines = [ln.split() for ln in Path("/proc/net/snmp").read_text().splitlines()]
    except OSError:
        return None
    tcp = [ln for ln in lines if ln and ln[0] == "Tcp:"]
    if len(tcp) < 2 or "RetransSegs" not in tcp[0]:
        return None
    return int(tcp[1][tcp[0].index("RetransSegs")])


async def measure(
    url: str, args: argparse.Namespace, work: list[list[tuple[bytes, bytes]]]
) -> tuple[list[float], list[str], float, LoopLag]:
    """Drive the service, with the control process ticking meanwhile."""
    control = Control()
    await control.start()
    own: list[float] = []
    ticking = asyncio.ensure_future(_tick(own))
    try:
        run = drive if args.client == "httpx" else drive_raw
        lat, errs, took = await run(url, args.clients, args.warmup, args.duration, work)
    finally:
        ticking.cancel()
        lag = await control.stop()
    own.sort()
    if own:
        print(
            f"load generator: its own loop's 1 ms ticks woke up "
            f"{own[int(0.99 * (len(own) - 1))] * 1e3:.2f} ms late at p99, "
            f"{own[-1] * 1e3:.1f} ms at worst (its latencies include that)"
        )
    return lat, errs, took, lag


async def _tick(lags: list[float]) -> None:
    """A 1 ms ticker in the load generator's own loop: how late each tick woke up (s)."""
    while True:
        t0 = time.perf_counter()
        await asyncio.sleep(0.001)
        lags.append(time.perf_counter() - t0 - 0.001)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(port: int, slots: int, sync_debug: bool) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.setdefault("PYACL_RT_BACKEND", "mock")
    if sync_debug:
        env["PYACL_RT_SYNC_DEBUG"] = "error"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "examples" / "service" / "app.py"),
            "--port",
            str(port),
            "--slots",
            str(slots),
        ],
        env=env,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the service exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit("the service did not start within 60 s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--spawn", action="store_true", help="start examples/service/app.py")
    ap.add_argument("--slots", type=int, default=8, help="with --spawn: request slots")
    ap.add_argument("--no-sync-debug", action="store_true")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--duration", type=float, default=5.0, help="measured seconds")
    ap.add_argument(
        "--warmup", type=float, default=1.0, help="seconds of load before the measured window"
    )
    ap.add_argument("--size", type=int, default=64 * 1024, help="request bytes")
    ap.add_argument(
        "--client",
        choices=("httpx", "raw"),
        default="raw",
        help="httpx.AsyncClient, or a minimal keep-alive HTTP/1.1 client on asyncio streams",
    )
    args = ap.parse_args()
    proc = None
    url = args.url
    if args.spawn:
        port = free_port()
        proc = spawn(port, args.slots, not args.no_sync_debug)
        url = f"http://127.0.0.1:{port}"
    try:
        table = model_table(url)
        work = [bodies(i, args.size, table) for i in range(args.clients)]
        retrans0 = tcp_retransmits()
        lat, errs, took, lag = asyncio.run(measure(url, args, work))
        retrans1 = tcp_retransmits()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    ok = True
    retrans = None if retrans0 is None or retrans1 is None else retrans1 - retrans0
    loaded = lag.p99 > LOADED_LAG or lag.max > LOADED_WORST or bool(retrans)
    print(
        f"machine: {'loaded' if loaded else 'quiet'} (an idle loop in a control process: "
        f"1 ms ticks woke up {lag.p99 * 1e3:.2f} ms late at p99, {lag.max * 1e3:.1f} ms at "
        f"worst; loaded above {LOADED_LAG * 1e3:g} ms at p99 or {LOADED_WORST * 1e3:g} ms "
        f"at worst, or with TCP retransmits: {'n/a' if retrans is None else retrans})"
    )
    n = len(lat)
    if n:
        qs = statistics.quantiles(lat, n=100) if n > 1 else [lat[0]] * 99
        p50, p99 = statistics.median(lat), qs[98]
        print(
            f"{args.clients} clients, {took:.1f} s, {args.size} B requests: {n} ok, "
            f"{n / took:.0f} req/s, p50 {p50 * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms "
            f"(p99/p50 {p99 / p50:.2f}x), errors {len(errs)}"
        )
        ratio_ok = p99 <= 5 * p50
        print(f"{'PASS' if ratio_ok else 'FAIL'}  p99 latency within 5x of p50: {p99 / p50:.2f}x")
        ok &= ratio_ok
    else:
        print("no request succeeded")
        ok = False
    print(f"{'PASS' if not errs else 'FAIL'}  zero errors: {len(errs)}")
    for e in sorted(set(errs))[:5]:
        print("   ", e)
    ok &= not errs
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
