"""Which etcd call failures may be retried, and where: the rules of clientv3's retry interceptor
(etcd `client/v3/retry.go`, `client/v3/retry_interceptor.go`), checked against etcd 3.5.1's server.

* Immutable calls (range, status, compact, a watch) are retried on another member when the failure
  is `transient`: UNAVAILABLE (clientv3 `isSafeRetryImmutableRPC` retries exactly that code), plus the
  UNKNOWN / INTERNAL statuses grpc-core (unlike grpc-go) gives a stream the transport lost.
* Mutable calls (put, delete, txn) are retried only when the failure proves the request was not
  applied (`not_applied`; clientv3 `isSafeRetryMutableRPC`: only "there is no address available").
  Any other transport failure leaves the outcome unknown (EtcdOutcomeUnknownError); the API server's
  storage layer resolves it (apiserver_mock/storage/store.py).
"""

from __future__ import annotations

from typing import Final

import grpc

# Failures that prove a request was not applied, so any call (a txn too) may go to another endpoint:
# grpc never had a connection to send it on, or etcd refused it before proposing it to raft. Each
# etcd one is checked against etcd 3.5.1's source (server/etcdserver/...):
NOT_APPLIED: Final = (
    # grpc-core: no ready connection when the call started (refused, unreachable, TLS handshake
    # failed): the request was never written. clientv3 retries mutable RPCs on exactly this
    # ("there is no address available", client/v3/retry.go isSafeRetryMutableRPC).
    (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses"),
    (grpc.StatusCode.UNAVAILABLE, "DNS resolution failed"),
    (grpc.StatusCode.UNAVAILABLE, "empty address list"),
    # api/v3rpc/interceptor.go newUnaryInterceptor (require-leader metadata, before the handler) and
    # v3_server.go waitLeader (before a lease request is forwarded): never proposed.
    (grpc.StatusCode.UNAVAILABLE, "etcdserver: no leader"),
    # raft.ErrProposalDropped, returned by node.Propose (raft/raft.go stepFollower: no leader, or a
    # leadership transfer) before the entry is in any log; v3rpc/util.go maps it to codes.Unknown.
    (grpc.StatusCode.UNKNOWN, "raft proposal dropped"),
    # v3_server.go processInternalRaftRequestOnce: the apply backlog check, before Propose.
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "etcdserver: too many requests"),
)
# NOT in that list, on purpose (a write that failed so has an unknown outcome):
# * "etcdserver: server stopped" (ErrStopped): processInternalRaftRequestOnce returns it from
#   `case <-s.done` AFTER s.r.Propose succeeded; the entry may be committed by the others.
# * "etcdserver: request timed out[, possibly due to ...]" (parseProposeCtxErr): after Propose.
# * "etcdserver: leader changed" (ErrLeaderChanged): only from requestCurrentIndex, i.e. the
#   ReadIndex of a linearizable read; a write never gets it, so if one ever did, it stays unknown.
# * A stream the transport lost (below): a SIGTERMed member with TLS closes its HTTP/2 connections
#   via http.Server.Shutdown (GOAWAY) and then grpc.Server.Stop (embed/etcd.go stopServers: "do not
#   grpc.Server.GracefulStop with TLS enabled"), cutting requests in the middle of their handler.

# grpc-core's words for a call whose stream or connection was lost: a transport failure, not an
# answer from etcd (whose own messages start with "etcdserver:", "mvcc:", "auth:" or "raft").
# Measured on etcd 3.5.1 over mTLS while a member is SIGTERMed / SIGKILLed: UNAVAILABLE "Stream
# removed (GOAWAY received ...)", UNKNOWN "No status received", UNKNOWN "Stream removed (Data frame
# with END_STREAM flag received)", UNAVAILABLE "Socket closed" / "Connection reset by peer".
TRANSPORT_MARKERS: Final = (
    "No status received",
    "Stream removed",
    "RST_STREAM",
    "Socket closed",
    "Connection reset",
    "Broken pipe",
    "GOAWAY",
    "keepalive",
    "Received http2 header with status",
)


def not_applied(err: grpc.aio.AioRpcError) -> bool:
    """Whether `err` proves the request was not applied (so even a txn may go elsewhere)."""
    code = err.code()
    details = err.details() or ""
    return any(code == c and marker in details for c, marker in NOT_APPLIED)


def transient(err: grpc.aio.AioRpcError) -> bool:
    """Whether `err` says the member (or the way to it) failed rather than the request: UNAVAILABLE
    (clientv3's isSafeRetryImmutableRPC retries exactly that), or a stream lost by the transport
    (grpc-core reports those as UNKNOWN or INTERNAL, see TRANSPORT_MARKERS)."""
    code = err.code()
    if code == grpc.StatusCode.UNAVAILABLE:
        return True
    if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
        details = err.details() or ""
        return any(marker in details for marker in TRANSPORT_MARKERS)
    return False
