"""An asyncio HTTP inference service on pyacl_rt (FastAPI + uvicorn: ``pyacl_rt[service]``).

``POST /infer`` with a request body of bytes answers with the model's output bytes. The
model is one kernel, ``affine_u8``: every byte ``x`` becomes ``(SCALE * x + BIAS) mod 256``
(:func:`reference` is the same on the host). Each request:

1. takes a *request slot* (one stream per slot, ``--slots`` of them; requests beyond
   that wait in the loop for a free slot, never in a thread);
2. takes its device buffer from the caching allocator (``DeviceBuffer(n, stream=slot)``:
   a cached block of that stream, no ``aclrtMalloc`` in the steady state) and its pinned
   staging buffer from the pinned host pool (``HostBuffer(n)``);
3. enqueues copy in -> kernel launch -> copy out on the slot's stream and ``await``s the
   stream: the event loop is never blocked (the test runs it with sync-debug mode
   ``"error"``, where any call that would make the host wait raises);
4. answers with the output.

The kernel binary: on an Ascend card, the Ascend C object of ``affine_u8``
(``--kernel PATH``); on the mock (the default without a card), its host twin
``affine_u8_twin.c`` next to this file, built into a shared object at start-up with the
C compiler (``$CC``, default ``cc``) and the mock's flags. The rest of the code is the
same in both cases: :class:`Model` loads the binary, looks the kernel up and launches it.

Run: ``python examples/service/app.py --port 8000`` then
``python scripts/load_service.py --url http://127.0.0.1:8000 --duration 5``.
"""

import argparse
import asyncio
import collections
import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np

import pyacl_rt as npu

HERE = Path(__file__).resolve().parent
#: The model's parameters: y = (SCALE * x + BIAS) mod 256, byte by byte.
SCALE, BIAS = 3, 1
#: Bytes per block of a launch, and at most this many blocks (the vector cores used).
BLOCK_BYTES, MAX_BLOCKS = 64 << 10, 8


def reference(data: bytes) -> bytes:
    """The model on the host (what the service must answer for ``data``)."""
    return data.translate(bytes((SCALE * x + BIAS) & 0xFF for x in range(256)))


def build_twin(out_dir: Path) -> Path:
    """Compile the host twin of ``affine_u8`` into a shared object (what the mock loads)."""
    from pyacl_rt import mock

    so = out_dir / "affine_u8.so"
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-O2", "-shared", "-fPIC", *mock.cflags(), str(HERE / "affine_u8_twin.c")]
    subprocess.run([*cmd, "-o", str(so)], check=True)
    return so


class Model:
    """The ``affine_u8`` kernel loaded on ``device`` from ``binary`` (default: on the
    mock, the host twin built here; on a card the Ascend C object must be given)."""

    def __init__(self, binary: str | os.PathLike[str] | None = None, device: int = 0) -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if binary is None:
            if npu.backend_info().backend != "mock":
                raise SystemExit("on an Ascend card, pass the kernel's binary: --kernel PATH")
            self._tmp = tempfile.TemporaryDirectory(prefix="pyacl_rt_service_")
            binary = build_twin(Path(self._tmp.name))
        self.code = npu.ObjectCode.from_file(binary, device=device)
        self.kernel = self.code.get_kernel("affine_u8")
        self.params = (np.uint32(SCALE), np.uint32(BIAS))
        self.configs = [npu.LaunchConfig(blocks=b) for b in range(1, MAX_BLOCKS + 1)]

    def launch(self, out: npu.DeviceBuffer, inp: npu.DeviceBuffer, stream: npu.Stream) -> None:
        """Enqueue ``out = model(inp)`` on ``stream`` (same size; returns at once)."""
        n = inp.nbytes
        config = self.configs[min(MAX_BLOCKS, -(-n // BLOCK_BYTES)) - 1]
        npu.launch(stream, config, self.kernel, inp, out, np.uint32(n), *self.params)

    def close(self) -> None:
        """Unload the binary (waits for the streams that launched it: run it off the
        loop, at shutdown)."""
        with npu.sync_debug_mode("default"):  # waiting here is the point of shutdown
            self.code.close()
        if self._tmp is not None:
            self._tmp.cleanup()


class Slots:
    """``n`` request slots on ``device``, one stream each; ``async with slots.take()``.

    First come, first served: a freed slot goes straight to the request that has waited
    longest (``asyncio.Queue`` lets a newly arriving request take it and sends the woken
    waiter to the back of the line, which starved a few requests: p99 ~9x p50)."""

    def __init__(self, n: int, device: int = 0) -> None:
        npu.set_device(device)
        self.streams = [npu.Stream(device) for _ in range(n)]
        self.idle: list[npu.Stream] = list(self.streams)
        self.waiting: collections.deque[asyncio.Future[npu.Stream]] = collections.deque()

    @contextlib.asynccontextmanager
    async def take(self) -> AsyncIterator[npu.Stream]:
        if self.idle and not self.waiting:
            stream = self.idle.pop()
        else:
            turn: asyncio.Future[npu.Stream] = asyncio.get_running_loop().create_future()
            self.waiting.append(turn)
            try:
                stream = await turn
            except asyncio.CancelledError:
                if turn.done() and not turn.cancelled():
                    self.give_back(turn.result())  # handed over just as we were cancelled
                raise
        try:
            yield stream
        finally:
            self.give_back(stream)

    def give_back(self, stream: npu.Stream) -> None:
        """The slot goes to the longest waiting request, else back to the idle list."""
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():  # a cancelled waiter's future is done
                turn.set_result(stream)
                return
        self.idle.append(stream)

    def close(self) -> None:
        """Destroy the streams (waits for their work: run it off the loop, at shutdown)."""
        with npu.sync_debug_mode("default"):  # waiting here is the point of shutdown
            for s in self.streams:
                s.close()


async def infer(slots: Slots, model: Model, data: bytes) -> bytes:
    """One request: copy in, run the model's kernel, copy out, on a slot's stream."""
    n = len(data)
    if n == 0:
        return b""
    async with slots.take() as stream:
        inp = npu.DeviceBuffer(n, stream=stream)  # caching allocator, this stream's cache
        out = npu.DeviceBuffer(n, stream=stream)
        stage = npu.HostBuffer(n)  # pinned host pool: staging both ways
        try:
            with memoryview(stage) as mv:
                mv[:] = data
            npu.memcpy_async(inp, stage, n, stream)  # the fast path: owned buffers, no checks
            model.launch(out, inp, stream)
            npu.memcpy_async(stage, out, n, stream)  # after the copy in, in stream order
            await stream  # the loop serves other requests meanwhile
            return stage.tobytes()
        finally:
            # Pooled memory: back to the caches at once, reused in stream order (a
            # cancelled request's buffers stay guarded until the stream passed them).
            for buf in (inp, out, stage):
                buf.close()


def create_app(slots: int = 8, device: int = 0, kernel: str | None = None) -> Any:
    """The FastAPI application (FastAPI is imported here, lazily)."""
    from fastapi import FastAPI, Request, Response

    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        state["slots"] = Slots(slots, device)
        state["model"] = Model(kernel, device)
        yield
        await asyncio.to_thread(state.pop("slots").close)
        await asyncio.to_thread(state.pop("model").close)

    app = FastAPI(title="pyacl_rt inference service", lifespan=lifespan)

    @app.post("/infer")
    async def infer_route(request: Request) -> Response:
        body = await request.body()
        result = await infer(state["slots"], state["model"], body)
        return Response(content=result, media_type="application/octet-stream")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "ok": True,
            "device": device,
            "slots": slots,
            "backend": npu.backend_info().backend,
            "model": {"kernel": "affine_u8", "scale": SCALE, "bias": BIAS},
        }

    return app


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="pyacl_rt asyncio inference service")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--slots", type=int, default=8, help="request slots (one stream each)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument(
        "--kernel", default=None, help="the kernel binary (default on the mock: build the twin)"
    )
    ap.add_argument(
        "--switch-interval",
        type=float,
        default=0.5,
        help="CPython's GIL switch interval in ms (default 0.5; CPython's own: 5)",
    )
    args = ap.parse_args(argv)
    # Await completions need no GIL (a C callback wakes the loop through an eventfd).
    # Other Python threads (host callbacks, executor threads) get the GIL from a busy
    # loop thread only every switch interval: 0.5 ms keeps their waits short.
    sys.setswitchinterval(args.switch_interval / 1000.0)
    import uvicorn

    uvicorn.run(
        create_app(args.slots, args.device, args.kernel),
        host=args.host,
        port=args.port,
        log_level="warning",
        loop="asyncio",
    )


if __name__ == "__main__":
    main()
