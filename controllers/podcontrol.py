"""Creating and deleting a controller's pods (upstream `controller.RealPodControl`).

A pod made from a template gets the template's labels, annotations, finalizers and spec,
`generateName` "<owner>-" (so the API server names it) and the controller reference. Every write
carries the term's fence token.
"""

from __future__ import annotations

from collections.abc import Callable

from kse.client.clientset import Clientset
from proto import kse_pb2 as pb

# validation.NameIsDNSSubdomain leaves room for the 5 random characters generateName appends.
MAX_GENERATE_NAME_PREFIX = 253 - 5


def pods_prefix(controller_name: str) -> str:
    """getPodsPrefix: "<name>-", cut so a generated name stays a valid DNS subdomain."""
    return f"{controller_name}-"[:MAX_GENERATE_NAME_PREFIX]


def pod_from_template(
    template: pb.PodTemplateSpec, namespace: str, prefix: str, ref: pb.OwnerReference
) -> pb.Pod:
    """GetPodFromTemplate."""
    pod = pb.Pod(api_version="v1", kind="Pod")
    meta = pod.metadata
    meta.namespace = namespace
    meta.generate_name = prefix
    meta.labels.update(template.metadata.labels)
    meta.annotations.update(template.metadata.annotations)
    meta.finalizers.extend(template.metadata.finalizers)
    meta.owner_references.append(ref)
    pod.spec.CopyFrom(template.spec)
    return pod


class PodControl:
    """Fenced pod writes for one controller."""

    def __init__(self, clientset: Clientset, fence: Callable[[], pb.FenceToken | None]) -> None:
        self._cs = clientset
        self._fence = fence

    async def create_pod(
        self, namespace: str, template: pb.PodTemplateSpec, owner_name: str, ref: pb.OwnerReference
    ) -> pb.Pod:
        pod = pod_from_template(template, namespace, pods_prefix(owner_name), ref)
        return await self._cs.pods.create(pod, fence=self._fence())

    async def delete_pod(self, namespace: str, name: str, uid: str = "") -> pb.Pod:
        return await self._cs.pods.delete(namespace, name, uid=uid, fence=self._fence())
