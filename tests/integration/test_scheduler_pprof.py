"""`/debug/pprof/` of a real `kse scheduler` process (profiling is on by default, as upstream):
a CPU profile taken while it schedules pods opens with the standard `pstats` and shows the
scheduling code; the stack dump has every thread and the scheduler's tasks; the block profile
answers; `--profiling=false` serves none of it."""

from __future__ import annotations

import asyncio
import pstats
from pathlib import Path

import aiohttp
import pytest

from certs.layout import PKI
from kse.client.clientset import Clientset
from tests.fixtures.apiserver import ApiServer
from tests.integration.test_scheduler_extender import bound_pods, node, pod
from tests.integration.test_scheduler_process import eventually, start_scheduler

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def get_bytes(address: str, path: str) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as s, s.get(f"http://{address}{path}") as r:
        return r.status, await r.read()


async def test_pprof_endpoints_of_a_live_scheduler(apiserver: ApiServer, pki: PKI, tmp_path: Path) -> None:
    cs = Clientset(await apiserver.channel("admin"), qps=0)
    for i in range(20):
        await cs.nodes.create(node(f"n{i:02d}"))
    sched = await start_scheduler(apiserver, pki, tmp_path)
    try:
        await eventually(lambda: sched.http_get("/readyz"), lambda r: r[0] == 200, 30, "/readyz")
        status, index = await sched.http_get("/debug/pprof/")
        assert status == 200 and "profile?seconds=30" in index and "block" in index

        # Profile while the pods arrive and get scheduled.
        profiling = asyncio.create_task(
            get_bytes(sched.metrics_address, "/debug/pprof/profile?seconds=4&hz=250")
        )
        names = [f"p{i:03d}" for i in range(300)]
        for name in names:
            await cs.pods.create(pod(name))
        status, data = await profiling
        assert status == 200, sched.log()[-5000:]
        path = tmp_path / "scheduler.pstats"
        path.write_bytes(data)
        stats = pstats.Stats(str(path))
        files = {func[0] for func in stats.stats}  # type: ignore[attr-defined]
        assert any(f.endswith("scheduler/scheduler.py") for f in files), sorted(files)
        await eventually(
            lambda: bound_pods(cs), lambda m: all(m.get(n) for n in names), 60, "every pod bound"
        )

        status, stacks = await sched.http_get("/debug/pprof/goroutine?debug=2")
        assert status == 200 and '"MainThread" [main]' in stacks and 'task "informers"' in stacks, stacks[
            :2000
        ]
        status, block = await sched.http_get("/debug/pprof/block")
        assert status == 200 and block.startswith("event loop watched for"), block
        status, _ = await sched.http_get("/debug/pprof/profile?seconds=nope")
        assert status == 400
    finally:
        assert await sched.stop() == 0, sched.log()


async def test_profiling_off(apiserver: ApiServer, pki: PKI, tmp_path: Path) -> None:
    sched = await start_scheduler(apiserver, pki, tmp_path, "--profiling=false")
    try:
        await eventually(lambda: sched.http_get("/readyz"), lambda r: r[0] == 200, 30, "/readyz")
        assert (await sched.http_get("/debug/pprof/"))[0] == 404
        assert (await sched.http_get("/metrics"))[0] == 200
    finally:
        assert await sched.stop() == 0, sched.log()
