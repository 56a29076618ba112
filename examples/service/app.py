"""An asyncio HTTP inference service on pyacl_rt (FastAPI + uvicorn: ``pyacl_rt[service]``).

``POST /infer`` with a request body of bytes answers with the model's output bytes.
Each request:

1. takes a *request slot* (one stream per slot, ``--slots`` of them; requests beyond
   that wait in the loop for a free slot, never in a thread);
2. takes its device buffers from the caching allocator (``DeviceBuffer(n, stream=slot)``:
   a cached block of that stream, no ``aclrtMalloc`` in the steady state) and its pinned
   staging buffers from the pinned host pool (``HostBuffer(n)``);
3. enqueues copy in -> kernel -> copy out on the slot's stream and ``await``s the stream:
   the event loop is never blocked (the test runs it with sync-debug mode ``"error"``,
   where any call that would make the host wait raises);
4. answers with the output.

The kernel is :func:`run_kernel`. Until pyacl_rt's kernel-launch API lands it is a
copy-based stand-in (a device-to-device copy, i.e. the identity model); swapping in a
real kernel (a host twin on the mock) is the one line ``KERNEL = ...`` below.

Run: ``python examples/service/app.py --port 8000`` then
``python scripts/load_service.py --url http://127.0.0.1:8000 --duration 5``.
"""

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pyacl_rt as npu


def copy_kernel(out: npu.DeviceBuffer, inp: npu.DeviceBuffer, stream: npu.Stream) -> None:
    """The stand-in model: ``out = inp`` on the device (enqueued on ``stream``)."""
    npu.copy(out, inp, stream=stream, non_blocking=True)


#: The model run per request: (out, inp, stream) -> None, enqueued on ``stream``.
KERNEL: Callable[[npu.DeviceBuffer, npu.DeviceBuffer, npu.Stream], None] = copy_kernel


class Slots:
    """``n`` request slots on ``device``, one stream each; ``async with slots.take()``."""

    def __init__(self, n: int, device: int = 0) -> None:
        npu.set_device(device)
        self.streams = [npu.Stream(device) for _ in range(n)]
        self.free: asyncio.Queue[npu.Stream] = asyncio.Queue()
        for s in self.streams:
            self.free.put_nowait(s)

    @contextlib.asynccontextmanager
    async def take(self) -> AsyncIterator[npu.Stream]:
        stream = await self.free.get()
        try:
            yield stream
        finally:
            self.free.put_nowait(stream)

    def close(self) -> None:
        """Destroy the streams (waits for their work: run it off the loop, at shutdown)."""
        with npu.sync_debug_mode("default"):  # waiting here is the point of shutdown
            for s in self.streams:
                s.close()


async def infer(slots: Slots, data: bytes) -> bytes:
    """One request: copy in, run :data:`KERNEL`, copy out, on a slot's stream."""
    n = len(data)
    if n == 0:
        return b""
    async with slots.take() as stream:
        inp = npu.DeviceBuffer(n, stream=stream)  # caching allocator, this stream's cache
        out = npu.DeviceBuffer(n, stream=stream)
        stage_in, stage_out = npu.HostBuffer(n), npu.HostBuffer(n)  # pinned host pool
        try:
            with memoryview(stage_in) as mv:
                mv[:] = data
            inp.copy_from_host_async(stage_in, stream)
            KERNEL(out, inp, stream)
            out.copy_to_host_async(stage_out, stream)
            await stream  # the loop serves other requests meanwhile
            return stage_out.tobytes()
        finally:
            # Pooled memory: back to the caches at once, reused in stream order (a
            # cancelled request's buffers stay guarded until the stream passed them).
            for buf in (inp, out, stage_in, stage_out):
                buf.close()


def create_app(slots: int = 8, device: int = 0) -> Any:
    """The FastAPI application (FastAPI is imported here, lazily)."""
    from fastapi import FastAPI, Request, Response

    state: dict[str, Slots] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        state["slots"] = Slots(slots, device)
        yield
        await asyncio.to_thread(state.pop("slots").close)

    app = FastAPI(title="pyacl_rt inference service", lifespan=lifespan)

    @app.post("/infer")
    async def infer_route(request: Request) -> Response:
        body = await request.body()
        result = await infer(state["slots"], body)
        return Response(content=result, media_type="application/octet-stream")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"ok": True, "device": device, "slots": slots, "backend": npu.backend_info().backend}

    return app


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="pyacl_rt asyncio inference service")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--slots", type=int, default=8, help="request slots (one stream each)")
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args(argv)
    import uvicorn

    uvicorn.run(
        create_app(args.slots, args.device),
        host=args.host,
        port=args.port,
        log_level="warning",
        loop="asyncio",
    )


if __name__ == "__main__":
    main()
