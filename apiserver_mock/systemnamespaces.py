"""The namespaces every cluster has: default, kube-system, kube-public, kube-node-lease.

kube-apiserver creates them itself, from its system-namespaces controller
(pkg/controlplane/controller/systemnamespaces), and re-creates them every minute if someone
deletes them; `kubectl get ns` on a fresh cluster shows them. kse does the same, through the
service's own `call` (so the creates are authorized and audited like any other write), as the
API server's own identity.
"""

from __future__ import annotations

import asyncio
import logging

from apiserver_mock.errors import AlreadyExists, NotFound
from apiserver_mock.service import ResourcesService
from certs.identity import Identity
from proto import kse_pb2 as pb

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
APISERVER_IDENTITY = Identity("system:apiserver", ("system:masters",))
RESYNC_INTERVAL_S = 60.0  # upstream's systemnamespaces controller period
RETRY_INTERVAL_S = 2.0  # after a failure (etcd unavailable at start-up)


async def ensure_once(service: ResourcesService) -> list[str]:
    """Create whichever system namespace is missing; the names created. Errors other than
    AlreadyExists propagate (the loop retries them)."""
    created = []
    for name in SYSTEM_NAMESPACES:
        try:  # a read first: a create of an existing namespace would be an audited refusal
            await service.call("Get", APISERVER_IDENTITY, pb.GetRequest(resource="namespaces", name=name))
            continue
        except NotFound:
            pass
        obj = pb.Object(namespace=pb.Namespace(metadata=pb.ObjectMeta(name=name)))
        try:
            await service.call("Create", APISERVER_IDENTITY, pb.WriteRequest(object=obj))
        except AlreadyExists:
            continue
        created.append(name)
    return created


async def keep_system_namespaces(
    service: ResourcesService, interval: float = RESYNC_INTERVAL_S, *, first_wait: float = 0.0
) -> None:
    """Run `ensure_once` after `first_wait` and every `interval`, until cancelled; a failure
    (etcd down) is logged and retried sooner."""
    await asyncio.sleep(first_wait)
    while True:
        wait = interval
        try:
            created = await ensure_once(service)
            if created:
                log.info("created system namespaces: %s", ", ".join(created))
        except Exception as e:
            wait = min(interval, RETRY_INTERVAL_S)
            log.warning("system namespaces: %s (retrying in %gs)", e, wait)
        await asyncio.sleep(wait)
