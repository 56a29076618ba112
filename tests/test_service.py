"""examples/service (the asyncio HTTP inference service) and scripts/load_service.py."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import pyacl_rt as npu

REPO = Path(__file__).resolve().parent.parent
APP = REPO / "examples" / "service" / "app.py"

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")


def _load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("service_app", APP)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_model_kernel_runs_its_host_twin_and_matches_the_reference() -> None:
    """The service's kernel is a real launch: the host twin built from
    examples/service/affine_u8_twin.c, loaded as the kernel binary."""
    app = _load_app()
    model = app.Model()
    try:
        assert model.kernel.num_arguments == 5
        data = bytes(range(256)) * 1000  # 256000 bytes: several blocks
        with npu.Stream() as s:
            inp = npu.DeviceBuffer(len(data), stream=s)
            out = npu.DeviceBuffer(len(data), stream=s)
            inp.copy_from_host(data)
            model.launch(out, inp, s)
            s.synchronize()
            got = bytes(out.copy_to_host())
            inp.close()
            out.close()
        assert got == app.reference(data) != data
        assert got[:4] == bytes([1, 4, 7, 10])  # 3 * x + 1
    finally:
        model.close()


def test_requests_never_block_the_loop_under_sync_debug_error() -> None:
    app = _load_app()

    async def main() -> None:
        with npu.sync_debug_mode("error"):
            slots, model = app.Slots(4), app.Model()
            try:
                bodies = [os.urandom(1000 + i) for i in range(64)] + [os.urandom(300_000)]
                out = await asyncio.gather(*(app.infer(slots, model, b) for b in bodies))
                assert out == [app.reference(b) for b in bodies]
                assert await app.infer(slots, model, b"") == b""
            finally:
                await asyncio.to_thread(slots.close)
                await asyncio.to_thread(model.close)

    asyncio.run(main())


def test_a_cancelled_request_leaves_the_slot_usable() -> None:
    app = _load_app()

    async def main() -> None:
        with npu.sync_debug_mode("error"):
            slots, model = app.Slots(1), app.Model()
            try:
                task = asyncio.ensure_future(app.infer(slots, model, os.urandom(1 << 20)))
                await asyncio.sleep(0)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                data = os.urandom(4096)
                assert await app.infer(slots, model, data) == app.reference(data)
            finally:
                await asyncio.to_thread(slots.close)
                await asyncio.to_thread(model.close)

    asyncio.run(main())


def test_the_http_app_answers_through_asgi() -> None:
    import httpx

    app = _load_app()
    api = app.create_app(slots=2)

    async def main() -> None:
        async with api.router.lifespan_context(api):
            transport = httpx.ASGITransport(app=api)
            async with httpx.AsyncClient(transport=transport, base_url="http://svc") as c:
                with npu.sync_debug_mode("error"):
                    r = await c.post("/infer", content=b"hello npu")
                assert r.status_code == 200 and r.content == app.reference(b"hello npu")
                health = (await c.get("/health")).json()
                assert health["ok"] and health["slots"] == 2
                assert health["model"] == {"kernel": "affine_u8", "scale": 3, "bias": 1}

    asyncio.run(main())


def test_64_clients_zero_errors_and_p99_within_5x_of_p50() -> None:
    """The load generator spawns the service (sync-debug "error") and drives it.

    Every run must answer every request correctly. The latency ratio is a property of the
    service, measured on a shared CI machine: a run that misses it while the load
    generator's control process found the machine quiet fails at once (that tail is the
    service's); a run that misses it on a loaded machine (other processes took the
    cores: the idle control loop lagged too, or loopback TCP retransmitted) is repeated,
    up to five runs.
    """
    outputs = []
    for _attempt in range(5):
        proc = subprocess.run(
            [
                sys.executable,
                str(REPO / "scripts" / "load_service.py"),
                "--spawn",
                "--clients",
                "64",
                "--warmup",
                "1",
                "--duration",
                "5",
                "--size",
                "4096",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYACL_RT_BACKEND": "mock"},
        )
        outputs.append(proc.stdout + proc.stderr)
        assert "PASS  zero errors: 0" in proc.stdout, outputs[-1]
        if "PASS  p99 latency within 5x of p50" in proc.stdout:
            assert proc.returncode == 0, outputs[-1]
            return
        assert "FAIL  p99 latency within 5x of p50" in proc.stdout, outputs[-1]
        assert "machine: loaded" in proc.stdout, "a tail on a quiet machine:\n" + outputs[-1]
    raise AssertionError("p99 above 5x p50 in five runs:\n" + "\n---\n".join(outputs))


def test_slots_are_first_come_first_served() -> None:
    """A freed slot goes to the request that waited longest, not to one arriving at that
    moment (asyncio.Queue let the newcomer take it and sent the woken waiter to the back
    of the line: a few requests starved, p99 ~9x p50 on a quiet machine; failed before)."""
    app = _load_app()
    slots = app.Slots(1)
    order: list[str] = []

    async def request(name: str, hold: asyncio.Event | None = None) -> None:
        async with slots.take():
            order.append(name)
            if hold is not None:
                await hold.wait()

    async def main() -> None:
        release = asyncio.Event()
        first = asyncio.create_task(request("first", release))
        await asyncio.sleep(0)
        waiters = [asyncio.create_task(request(f"waiter{k}")) for k in range(3)]
        await asyncio.sleep(0)
        cancelled = asyncio.create_task(request("cancelled"))
        await asyncio.sleep(0)
        cancelled.cancel()
        release.set()  # the slot is freed ...
        await asyncio.sleep(0)
        late = asyncio.create_task(request("late"))  # ... as a newcomer arrives
        await asyncio.gather(first, *waiters, late)
        assert cancelled.cancelled()

    try:
        asyncio.run(main())
    finally:
        slots.close()
    assert order == ["first", "waiter0", "waiter1", "waiter2", "late"]
