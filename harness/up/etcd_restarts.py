"""Restart the etcd members of a running `kse up` one at a time, each healthy before the next: what a
CA rotation needs after `add` and after `remove`, because etcd 3.5 reads `--trusted-ca-file` only at
start. With three members the quorum holds throughout, so no request fails (the API server's etcd
client moves to a live member; see the README's etcd part).

The member is stopped with SIGTERM; `kse up`'s supervisor starts it again (it supervises etcd
members, `harness.up.plan.ClusterPlan.supervise_control_plane`) and records the new pid in
run/cluster.json; the member is healthy once it answers Status with a leader. Nothing here starts a
process: the `kse up` that owns the cluster does.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from harness.clusterfile import ClusterFile, ClusterFileError, cluster_file_path
from harness.procs.proctable import pid_alive

__all__ = ["EtcdRestartError", "restart_etcd_members", "running_cluster_for_pki"]

RESTART_WITHIN_S = 60.0


class EtcdRestartError(RuntimeError):
    """A member did not come back healthy in time (the message says which, and what to do)."""


def running_cluster_for_pki(pki_dir: Path) -> ClusterFile | None:
    """The cluster.json of a running `kse up` whose PKI is `pki_dir` (D/pki -> D/run/cluster.json),
    or None: no such file, its owner is gone, or it uses another PKI."""
    path = cluster_file_path(pki_dir.resolve().parent)
    try:
        cf = ClusterFile.read(path)
    except (ClusterFileError, OSError, ValueError):
        return None
    if cf.owner_pid is None or not pid_alive(cf.owner_pid) or cf.pki_dir.resolve() != pki_dir.resolve():
        return None
    return cf


async def _healthy(endpoint: str, cf: ClusterFile, budget: float) -> None:
    from certs.layout import APISERVER_ETCD_CLIENT, ca_bundle_path, cert_path, key_path
    from kse.etcdclient import EtcdClient, EtcdError, EtcdTLS

    pki = cf.pki_dir
    tls = (
        EtcdTLS(
            ca_bundle_path(pki), cert_path(pki, APISERVER_ETCD_CLIENT), key_path(pki, APISERVER_ETCD_CLIENT)
        )
        if cf.etcd_tls
        else None
    )
    deadline = time.monotonic() + budget
    last = "not asked yet"
    while time.monotonic() < deadline:
        try:
            async with await EtcdClient.connect([endpoint], tls=tls, timeout=2.0) as etcd:
                status = await etcd.status(endpoint)
                if status.get("leader"):
                    return
                last = "no leader yet"
        except (EtcdError, OSError, TimeoutError) as e:
            last = str(e)
        await asyncio.sleep(0.2)
    raise EtcdRestartError(f"etcd at {endpoint} not healthy within {budget:g}s: {last}")


async def restart_etcd_members(
    data_dir: Path, say: Callable[[str], None], *, within: float = RESTART_WITHIN_S
) -> list[str]:
    """Restart every etcd member of the `kse up` in `data_dir`, one at a time; returns their names."""
    cf = ClusterFile.load(data_dir)
    names = cf.by_role("etcd")
    if len(names) != len(cf.etcd_endpoints):
        raise EtcdRestartError(
            f"{len(names)} etcd processes but {len(cf.etcd_endpoints)} endpoints in cluster.json"
        )
    for name, endpoint in zip(names, cf.etcd_endpoints, strict=True):
        old = cf.processes[name].live_pid
        if old is None or not pid_alive(old):
            raise EtcdRestartError(f"{name} is not running; restart the members once every one is up")
        os.kill(old, signal.SIGTERM)
        say(f"{name} (pid {old}) stopped to reload its trusted CA; waiting for kse up to start it again")
        deadline = time.monotonic() + within
        new: int | None = None
        while time.monotonic() < deadline:
            try:
                entry = ClusterFile.load(data_dir).processes.get(name)
            except (ClusterFileError, OSError, ValueError) as e:
                raise EtcdRestartError(f"the running kse up is gone ({e}); {name} stays stopped") from e
            new = entry.live_pid if entry is not None and entry.running else None
            if new is not None and new != old and pid_alive(new):
                break
            await asyncio.sleep(0.1)
        else:
            raise EtcdRestartError(f"kse up did not start {name} again within {within:g}s")
        await _healthy(endpoint, cf, max(1.0, deadline - time.monotonic()))
        say(f"{name} healthy again (pid {new})")
    return names
