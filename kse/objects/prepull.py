"""The pre-pull request: how a scheduler plugin asks the simulated kubelets to pull images ahead.

Kubernetes has no API for "pull this image on that node"; real clusters use a DaemonSet pre-puller
or a registry mirror. kse's sample Permit plugin (`scheduler.framework.plugins.samples.imageprepull`)
needs one, and it may only write what the scheduler's RBAC role allows: Events. So the request is
an ordinary core/v1 Event about the waiting pod, written by the scheduler's event recorder (fenced
like its other events), with reason `PrePullImages` and a message of a fixed shape:

    pre-pull on node <node>: <image>,<image>,...

`kse nodesim --pre-pull-events` watches Events and pulls for those naming one of its nodes; the
images then show up in that node's `status.images`, which is what the plugin waits for. Both sides
use the two functions below, so the shape is defined once.
"""

from __future__ import annotations

from collections.abc import Sequence

REASON_PRE_PULL = "PrePullImages"
ACTION_PRE_PULL = "PrePull"
_PREFIX = "pre-pull on node "


def pre_pull_message(node: str, images: Sequence[str]) -> str:
    return f"{_PREFIX}{node}: {','.join(images)}"


def parse_pre_pull_message(message: str) -> tuple[str, list[str]] | None:
    """(node, images) of a pre-pull message, None when it is not one."""
    if not message.startswith(_PREFIX) or ": " not in message:
        return None
    node, _, rest = message[len(_PREFIX) :].partition(": ")
    images = [i.strip() for i in rest.split(",") if i.strip()]
    if not node or not images:
        return None
    return node, images
