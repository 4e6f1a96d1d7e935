"""The kse API server: Kubernetes-shaped resources over etcd, served with gRPC and mutual TLS.

Module map (a request flows top to bottom):

    cli.py             `kse apiserver` flags, signals, ready/connection files
    server.py          APIServer: etcd client, one watch cache per kind, grpc.aio server (mTLS with
                       reloadable credentials, max connection age, health, reflection)
    service.py         thin gRPC handlers: authenticate, call the registry, map errors, trailers
    auth/              authn.py (identity from the client cert), policy.py (the RBAC-like table),
                       authz.py (decisions, cached; object-scoped checks for node identities)
    registry/          generic.py (Get/Create/Update/UpdateStatus/Delete/Bind/Evict for every kind),
                       reads.py (List/Watch), strategy.py (per-kind defaults and admission)
    validation/        Kubernetes-shaped field errors: meta, pod, others (node, lease, event,
                       priority class), size, common (quantities, timestamps)
    storage/           Store: every write is one compare-guarded etcd transaction
    fencing.py         the hook that turns a FenceToken into extra compares (ignored for now)
    watchcache/        cache.py (list + watch + ring + progress marker), model.py (cached objects,
                       events, filters), watcher.py (bounded per-client queue), ring.py
    wire.py            hand-assembled protobuf wire forms (serialize an event once, reuse it)
    errors.py          APIError and Kubernetes' error messages
"""
