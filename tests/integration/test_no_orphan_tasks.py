"""Structured concurrency, end to end: objects with background tasks leave none behind.

The API server in-process (real etcd, real mTLS listener), the etcd client following its credential
files, and a reloading channel source: each is used, closed, and then the event loop must hold no
task it started (kse.tasks, DESIGN.md "no orphan tasks").
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from apiserver_mock.server import APIServer, ServerConfig
from kse.client.credentials import ReloadingChannelSource
from kse.etcdclient import EtcdClient
from kse.objects.kinds import KINDS
from tests.fixtures.apiserver import etcd_tls_of
from tests.fixtures.pki import PKI

pytestmark = pytest.mark.integration


# grpc.aio starts this task per streaming call to wait for the call's final status, and neither
# `call.cancel()` nor `channel.close()` waits for it (grpc/aio/_channel.py `_close` cancels the calls
# and destroys the channel): it ends when grpc's completion queue poller delivers the cancelled
# status, a few loop turns later, later still on a loaded machine (seen in CI with 11 watch caches).
GRPC_STATUS_TASK = "_AioCall._handle_status_once_received"
GRPC_STATUS_GRACE_S = 10.0


def _coro_name(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    return str(getattr(coro, "__qualname__", None) or getattr(coro, "__name__", repr(coro)))


@asynccontextmanager
async def no_new_tasks() -> AsyncIterator[None]:
    """Fail when a task started inside the block is still running after it: ours at once; grpc's
    status waiter of a call we cancelled within GRPC_STATUS_GRACE_S (a deadline, not a sleep)."""
    before = asyncio.all_tasks()
    yield
    started = {t for t in asyncio.all_tasks() - before if not t.done()}
    ours = {t for t in started if _coro_name(t) != GRPC_STATUS_TASK}
    assert not ours, f"tasks left running: {sorted(f'{t.get_name()} {_coro_name(t)}' for t in ours)}"
    grpcs = started - ours
    if grpcs:
        await asyncio.wait(grpcs, timeout=GRPC_STATUS_GRACE_S)
    left = {t for t in grpcs if not t.done()}
    assert not left, f"grpc calls never ended: {sorted(t.get_name() for t in left)}"


def _config(etcd: Any, pki: PKI) -> ServerConfig:
    leaf = pki.leaves["apiserver"]
    return ServerConfig(
        etcd_endpoints=list(etcd.endpoints),
        tls_cert=leaf.cert,
        tls_key=leaf.key,
        client_ca=leaf.ca_bundle,
        etcd_tls=etcd_tls_of(etcd),
        prefix=f"/kse-test-{uuid.uuid4().hex[:12]}",
        bookmark_interval=0.05,
    )


async def test_api_server_ends_every_task_it_started(etcd: Any, pki: PKI) -> None:
    async with no_new_tasks():
        async with APIServer(_config(etcd, pki)) as server:
            # one per watch cache, the progress loop, the system namespaces, the etcd compactor
            # (gc freezing is off here)
            assert len(server._tasks) == len(KINDS) + 3
            assert all(not t.done() for t in server._tasks)
            # The shared progress-marker write, owned by the cache.
            assert await server.caches["pod"].request_progress() > 0
            await server.stop(0)  # as `kse apiserver` does on a signal; leaving stops again
        assert server._tasks == []


async def test_api_server_start_failure_leaves_nothing_running(pki: PKI) -> None:
    from harness.procs.ports import free_port
    from kse.etcdclient import EtcdError

    config = _config(type("NoEtcd", (), {"endpoints": [f"http://127.0.0.1:{free_port()}"]})(), pki)
    async with no_new_tasks():
        with pytest.raises(EtcdError):  # as itself, not wrapped in an ExceptionGroup
            async with APIServer(config):
                pass


async def test_the_check_fails_on_a_task_left_running() -> None:
    leaked = asyncio.get_running_loop().create_future()
    with pytest.raises(AssertionError, match="tasks left running"):
        async with no_new_tasks():
            task = asyncio.create_task(asyncio.wait_for(leaked, None), name="leaked")
            await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_etcd_client_with_credential_reload_ends_its_tasks(etcd_factory: Any, pki: PKI) -> None:
    from harness.procs.etcd import EtcdServerTLS

    etcd = await etcd_factory(1, tls=EtcdServerTLS.from_pki_dir(pki.dir))
    async with no_new_tasks():
        client = await EtcdClient.connect(
            etcd.endpoints, tls=etcd.client_tls, credential_reload_interval=0.01
        )
        assert len(client._tasks) == 1  # the reload loop
        await client.close()
        assert client._tasks.closed and len(client._tasks) == 0


async def test_channel_source_ends_its_maintenance_task(pki: PKI) -> None:
    from harness.procs.ports import free_port

    leaf = pki.leaves["apiserver"]
    async with no_new_tasks():
        source = ReloadingChannelSource(
            leaf.cert, leaf.key, leaf.ca_bundle, f"127.0.0.1:{free_port()}", poll_interval=0.01
        )
        await source.start()
        assert len(source._tasks) == 1
        await source.close()
