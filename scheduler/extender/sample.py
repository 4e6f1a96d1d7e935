"""``kse extender-sample``: a small scheduler extender, to try extenders with (and what the
integration tests run against).

    kse extender-sample --listen 127.0.0.1:8888 --filter-label example.com/ok \\
        --prefer-label example.com/fast [--bind --connection-file admin.json] \\
        [--tls-cert server.pem --tls-key server-key.pem [--tls-client-ca ca.pem]]

It answers upstream's extender protocol (``scheduler.extender.types``) on ``POST .../VERB``, for
any path prefix (the last path segment is the verb), so ``urlPrefix: http://HOST:PORT/scheduler``
with ``filterVerb: filter`` reaches it:

* ``filter``: nodes without the ``--filter-label`` key fail (``failedNodes``, message
  ``node(s) didn't have label KEY``), or, with ``--unresolvable``, land in
  ``failedAndUnresolvableNodes``; without the flag every node passes. It answers with
  ``nodenames`` when the scheduler sent names (nodeCacheCapable), else with ``nodes``;
* ``prioritize``: 10 (MaxExtenderPriority) for nodes with the ``--prefer-label`` key, 0 otherwise;
* ``bind``: with ``--bind``, posts pods/binding to the API server over its own connection (the
  connection flags; an identity allowed to bind, e.g. admin or a scheduler's); without it, an
  ``error`` result;
* a nodeCacheCapable scheduler sends only node names: the sample then reads the nodes' labels
  from the API server (so give it a connection), or knows those it was sent in full before;
* ``preempt``: agrees with the scheduler (returns the victims it was sent, as UIDs).

``GET /stats`` returns the calls per verb as JSON (``{"filter": 3, ...}``); ``GET /healthz`` ok.
A malformed request gets 400 with the reason. ``--ready-file`` is written once it listens:
``{"address": "HOST:PORT", "pid": N}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import ssl
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from kse.config import ConnectionFile
from kse.fileio import write_atomic
from kse.flags.connection_args import add_connection_flags, connection_from_args, connection_source
from kse.flags.logging_args import add_log_level_flag, setup_logging
from kse.scrape import parse_address

from .types import MAX_EXTENDER_PRIORITY

log = logging.getLogger("extender-sample")

VERBS = ("filter", "prioritize", "bind", "preempt")


class BadRequest(ValueError):
    """The request is not what the protocol says; answered with 400 and this message."""


def _field(obj: Any, key: str, path: str = "") -> Any:
    if not isinstance(obj, dict):
        raise BadRequest(f"{path or 'body'}: must be a JSON object")
    return obj.get(key)


def _labels(node: Any, i: int) -> tuple[str, dict[str, str]]:
    meta = _field(node, "metadata", f"nodes.items[{i}]")
    name = _field(meta, "name", f"nodes.items[{i}].metadata")
    if not isinstance(name, str) or not name:
        raise BadRequest(f"nodes.items[{i}].metadata.name: Required value")
    labels = _field(meta, "labels", f"nodes.items[{i}].metadata") or {}
    if not isinstance(labels, dict):
        raise BadRequest(f"nodes.items[{i}].metadata.labels: must be an object")
    return name, labels


class SampleExtender:
    """The extender's logic; `app()` is its aiohttp application."""

    def __init__(
        self,
        *,
        filter_label: str | None = None,
        prefer_label: str | None = None,
        unresolvable: bool = False,
        connection: ConnectionFile | None = None,
        bind: bool = False,
    ) -> None:
        self.binds = bind
        self.filter_label = filter_label
        self.prefer_label = prefer_label
        self.unresolvable = unresolvable
        self.connection = connection
        self.calls: Counter[str] = Counter()
        # Labels of nodes seen in full (a nodeCacheCapable scheduler sends only names): the
        # sample's "own node cache" is what earlier non-cache-capable calls or the API server showed.
        self._known: dict[str, dict[str, str]] = {}
        self._clientset: Any = None
        self._channel: Any = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/stats", self._stats)
        app.router.add_post("/{path:.*}", self._verb)
        app.on_cleanup.append(self._close)
        return app

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _stats(self, _request: web.Request) -> web.Response:
        return web.json_response(dict(self.calls))

    async def _close(self, _app: web.Application) -> None:
        if self._channel is not None:
            await self._channel.close(grace=None)

    async def _verb(self, request: web.Request) -> web.Response:
        verb = request.path.rstrip("/").rsplit("/", 1)[-1]
        if verb not in VERBS:
            return web.Response(
                status=404, text=f"unknown verb {verb!r}; this extender serves {', '.join(VERBS)}\n"
            )
        self.calls[verb] += 1
        try:
            body = json.loads(await request.read())
            answer = await getattr(self, verb)(body)
        except (BadRequest, ValueError) as e:
            return web.Response(status=400, text=f"{verb}: {e}\n")
        return web.json_response(answer)

    # ------------------------------------------------------------------ verbs

    def _candidates(self, body: Any) -> tuple[list[str], bool]:
        """(node names, whether they came as nodenames); learns the labels of full nodes."""
        names = _field(body, "nodenames")
        if names is not None:
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise BadRequest("nodenames: must be a list of strings")
            return names, True
        nodes = _field(body, "nodes")
        items = _field(nodes, "items", "nodes") if nodes is not None else []
        if not isinstance(items, list):
            raise BadRequest("nodes.items: must be a list")
        out = []
        for i, node in enumerate(items):
            name, labels = _labels(node, i)
            self._known[name] = labels
            out.append(name)
        return out, False

    def _has(self, node: str, key: str) -> bool:
        return key in self._known.get(node, {})

    async def filter(self, body: Any) -> dict[str, Any]:
        names, as_names = self._candidates(body)
        if as_names:
            await self._learn(names)
        passed, failed = [], {}
        for name in names:
            if self.filter_label is None or self._has(name, self.filter_label):
                passed.append(name)
            else:
                failed[name] = f"node(s) didn't have label {self.filter_label}"
        result: dict[str, Any] = {
            "failedAndUnresolvableNodes" if self.unresolvable else "failedNodes": failed
        }
        if as_names:
            result["nodenames"] = passed
        else:
            items = _field(body, "nodes")["items"]
            keep = set(passed)
            result["nodes"] = {"metadata": {}, "items": [n for n in items if n["metadata"]["name"] in keep]}
        return result

    async def prioritize(self, body: Any) -> list[dict[str, Any]]:
        names, as_names = self._candidates(body)
        if as_names:
            await self._learn(names)
        preferred = self.prefer_label
        return [
            {
                "host": n,
                "score": MAX_EXTENDER_PRIORITY if preferred is not None and self._has(n, preferred) else 0,
            }
            for n in names
        ]

    async def bind(self, body: Any) -> dict[str, Any]:
        fields = {k: _field(body, k) for k in ("podName", "podNamespace", "podUID", "node")}
        for k, v in fields.items():
            if not isinstance(v, str) or (not v and k != "podUID"):
                raise BadRequest(f"{k}: Required value")
        cs = await self._client() if self.binds else None
        if cs is None:
            return {"error": "this extender does not bind: start it with --bind and an API server connection"}
        from kse.client.errors import ApiError
        from proto import kse_pb2 as pb

        binding = pb.Binding(
            api_version="v1",
            kind="Binding",
            metadata=pb.ObjectMeta(
                namespace=fields["podNamespace"], name=fields["podName"], uid=fields["podUID"]
            ),
            target=pb.ObjectReference(kind="Node", api_version="v1", name=fields["node"]),
        )
        try:
            await cs.pods.bind(binding)
        except ApiError as e:
            return {"error": str(e)}
        log.info("bound %s/%s to %s", fields["podNamespace"], fields["podName"], fields["node"])
        return {}

    async def preempt(self, body: Any) -> dict[str, Any]:
        meta = _field(body, "nodeNameToMetaVictims")
        if meta is not None:
            if not isinstance(meta, dict):
                raise BadRequest("nodeNameToMetaVictims: must be an object")
            return {"nodeNameToMetaVictims": meta}
        full = _field(body, "nodeNameToVictims") or {}
        if not isinstance(full, dict):
            raise BadRequest("nodeNameToVictims: must be an object")
        out = {}
        for node, victims in full.items():
            pods = _field(victims, "pods", f"nodeNameToVictims[{node}]") or []
            uids = [
                {"uid": ((p.get("metadata") or {}).get("uid") or "")} for p in pods if isinstance(p, dict)
            ]
            out[node] = {"pods": uids, "numPDBViolations": _field(victims, "numPDBViolations") or 0}
        return {"nodeNameToMetaVictims": out}

    # ------------------------------------------------------------------ the API server (optional)

    async def _client(self) -> Any:
        if self.connection is None:
            return None
        if self._clientset is None:
            from kse.client.clientset import Clientset

            self._channel = connection_source(self.connection)
            self._clientset = Clientset(self._channel, user_agent="kse-extender-sample")
        return self._clientset

    async def _learn(self, names: Sequence[str]) -> None:
        """Labels of nodes only named (nodeCacheCapable): from the API server when connected."""
        missing = [n for n in names if n not in self._known]
        cs = await self._client()
        if not missing or cs is None:
            return
        for node in (await cs.nodes.list()).items:
            self._known[node.metadata.name] = dict(node.metadata.labels)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kse extender-sample", description=__doc__.splitlines()[0] if __doc__ else None
    )
    p.add_argument(
        "--listen", required=True, metavar="HOST:PORT", help="address to serve on (port 0 picks one)"
    )
    p.add_argument("--filter-label", metavar="KEY", help="filter: nodes without this label key fail")
    p.add_argument(
        "--unresolvable",
        action="store_true",
        help="filter: report failed nodes as failedAndUnresolvableNodes",
    )
    p.add_argument("--prefer-label", metavar="KEY", help="prioritize: nodes with this label key score 10")
    p.add_argument(
        "--bind", action="store_true", help="bind: post pods/binding over the API server connection below"
    )
    tls = p.add_argument_group("serving TLS (default: plain HTTP)")
    tls.add_argument("--tls-cert", type=Path, help="serving certificate (PEM)")
    tls.add_argument("--tls-key", type=Path, help="serving key (PEM)")
    tls.add_argument(
        "--tls-client-ca", type=Path, help="require client certificates signed by this CA bundle"
    )
    p.add_argument("--ready-file", type=Path, help='written once serving: {"address": "HOST:PORT", "pid": N}')
    add_connection_flags(p, "binding")
    add_log_level_flag(p)
    return p


def _serving_tls(p: argparse.ArgumentParser, args: argparse.Namespace) -> ssl.SSLContext | None:
    if args.tls_cert is None and args.tls_key is None:
        if args.tls_client_ca is not None:
            p.error("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if args.tls_cert is None or args.tls_key is None:
        p.error("--tls-cert and --tls-key go together")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls_client_ca is not None:
            ctx.load_verify_locations(cafile=args.tls_client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as e:
        p.error(f"--tls-cert/--tls-key/--tls-client-ca: {e}")
    return ctx


async def serve(args: argparse.Namespace, extender: SampleExtender, tls: ssl.SSLContext | None) -> int:
    host, port = parse_address(args.listen)
    # The handlers go in before anything says we are serving: a caller that reads the ready file
    # and signals at once must get a graceful stop (and the ready file removed), not the default kill.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    runner = web.AppRunner(extender.app(), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=tls)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        if bound_host in ("0.0.0.0", "::"):
            bound_host = "127.0.0.1"
        address = f"{bound_host}:{bound_port}"
        log.info("extender-sample serving on %s://%s", "https" if tls else "http", address)
        if args.ready_file is not None:
            write_atomic(args.ready_file, json.dumps({"address": address, "pid": os.getpid()}) + "\n")
        await stop.wait()
    finally:
        await runner.cleanup()
        if args.ready_file is not None:
            args.ready_file.unlink(missing_ok=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    setup_logging(args.log_level)
    try:
        parse_address(args.listen)
    except ValueError as e:
        parser.error(f"--listen: {e}")
    given = any(getattr(args, k) is not None for k in ("connection_file", "server", "ca", "cert", "key"))
    connection = connection_from_args(parser, args) if given or args.bind else None
    tls = _serving_tls(parser, args)
    extender = SampleExtender(
        filter_label=args.filter_label,
        prefer_label=args.prefer_label,
        unresolvable=args.unresolvable,
        connection=connection,
        bind=args.bind,
    )
    try:
        return asyncio.run(serve(args, extender, tls))
    except OSError as e:
        log.error("cannot start: %s", e)
        return 1
