"""What makes an answer a finding.

Per request: no INTERNAL or UNKNOWN over gRPC and no 5xx over HTTP (except a 503/504 that is a
metav1.Status with a reason, which `kse.apierrors` documents as ServiceUnavailable / Timeout), no
hang (the client's per-request deadline passed), no dropped connection while the server lives, and
every HTTP error body a metav1.Status (a Kubernetes client reads nothing else). A server that has
died is a crash; the runner checks that separately (`why` here is only about the answer).
"""

from __future__ import annotations

import json

from chaos.fuzz.doors import Answer
from chaos.fuzz.requests import GRPC_METHODS, Request

# INTERNAL answers that are upstream's own: kube-apiserver's eviction subresource answers a pod
# covered by two PodDisruptionBudgets with NewInternalError (pkg/registry/core/pod/storage/
# eviction.go), and kse matches it (apiserver_mock/registry/eviction.py). Not a finding.
UPSTREAM_INTERNAL = ("This pod has more than one PodDisruptionBudget",)

# gRPC codes the error table (kse/apierrors.py) answers with, INTERNAL excepted.
DOCUMENTED_GRPC = {
    "OK",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "ABORTED",
    "INVALID_ARGUMENT",
    "PERMISSION_DENIED",
    "UNAUTHENTICATED",
    "OUT_OF_RANGE",
    "FAILED_PRECONDITION",
    "RESOURCE_EXHAUSTED",
    "DEADLINE_EXCEEDED",
    "UNAVAILABLE",
}


def judge(req: Request, ans: Answer) -> str | None:
    """Why `ans` to `req` is a finding ("internal", "hang", ...: the finding's class), or None."""
    if ans.hang:
        return "hang"
    if req.door == "grpc":
        return _judge_grpc(req, ans)
    return _judge_http(req, ans)


def _upstream_internal(detail: str) -> bool:
    return any(text in detail for text in UPSTREAM_INTERNAL)


def _judge_grpc(req: Request, ans: Answer) -> str | None:
    if ans.code == "INTERNAL" and _upstream_internal(ans.detail):
        return None
    if ans.code in ("INTERNAL", "UNKNOWN"):
        return "internal"
    if ans.code == "UNIMPLEMENTED":
        return None if req.method not in GRPC_METHODS else "unexpected-code"
    if ans.code not in DOCUMENTED_GRPC:
        return "unexpected-code"
    if ans.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") and not ans.detail:
        return "unexplained-unavailable"
    if ans.code != "OK" and not ans.detail:
        return "error-without-message"
    return None


def _status_body(detail: str) -> dict[str, object] | None:
    try:
        doc = json.loads(detail)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("kind") == "Status" else None


def _judge_http(req: Request, ans: Answer) -> str | None:
    if req.truncate:
        # The client sent less than it promised and hung up: any answer, or none, is fine;
        # only a 5xx (or the server dying, checked by the runner) is a finding.
        return "internal" if ans.code.isdigit() and ans.code.startswith("5") else None
    if ans.transport:
        return "connection-dropped"
    if not ans.code.isdigit():
        return "unexpected-code"
    status = int(ans.code)
    if status >= 500:
        status_doc = _status_body(ans.detail)
        if status in (503, 504) and status_doc is not None and status_doc.get("reason"):
            return None
        if (
            status == 500
            and status_doc is not None
            and _upstream_internal(str(status_doc.get("message", "")))
        ):
            return None
        return "internal"
    if status >= 400 and req.method != "HEAD" and len(ans.detail) < 4096 and _status_body(ans.detail) is None:
        return "error-not-status"
    return None
