"""The scheduler's events: upstream's reasons and messages; the recorder is `kse.events`', which
the controller-manager shares (kept importable here for the scheduler's callers)."""

from kse.events import NORMAL, NOTE_LENGTH_LIMIT, WARNING, EventRecorder, truncate_message
from proto import kse_pb2 as pb

__all__ = [
    "ACTION_BINDING",
    "ACTION_SCHEDULING",
    "NORMAL",
    "NOTE_LENGTH_LIMIT",
    "REASON_FAILED_SCHEDULING",
    "REASON_SCHEDULED",
    "WARNING",
    "EventRecorder",
    "scheduled_message",
    "truncate_message",
]

# Upstream reasons and actions.
REASON_SCHEDULED = "Scheduled"
REASON_FAILED_SCHEDULING = "FailedScheduling"
ACTION_BINDING = "Binding"
ACTION_SCHEDULING = "Scheduling"


def scheduled_message(pod: pb.Pod, node_name: str) -> str:
    return f"Successfully assigned {pod.metadata.namespace}/{pod.metadata.name} to {node_name}"
