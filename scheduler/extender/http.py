"""One configured extender (upstream ``HTTPExtender``, ``pkg/scheduler/extender.go``).

Every call is one ``POST {urlPrefix}/{verb}`` with a JSON body, through one aiohttp session per
extender whose total timeout is ``httpTimeout`` (default 5 s, upstream's DefaultExtenderTimeout;
upstream's http.Client.Timeout also covers reading the body). TLS as upstream's makeTransport:
``tlsConfig`` gives insecure / serverName / client cert and key / CA (files or base64 data), and
``enableHTTPS`` without a CA means an unverified connection (upstream sets Insecure then).

Failures raise ``ExtenderError`` with upstream's wording, which is what ends up in the pod's
FailedScheduling event when the extender is not ignorable:

* a connection failure: ``Post "http://127.0.0.1:1/filter": dial tcp 127.0.0.1:1: connect:
  connection refused`` (Go's url.Error around net.OpError); a failed TLS handshake: ``Post "URL":
  tls: <the ssl error>``;
* a timeout: ``Post "URL": context deadline exceeded (Client.Timeout exceeded while awaiting
  headers)``;
* an HTTP status other than 200: ``failed filter with extender at URL URL, code 500``;
* an ``error`` in the result: that text, as is;
* a node name in the result that was not sent: ``extender "URL" claims a filtered node "x" which is
  not found in the input node list``.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import ssl
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from kse.objects.manifest import to_dict
from proto import kse_pb2 as pb
from scheduler.apis.config.types import Extender, KubeSchedulerConfiguration, NodeResourcesFitArgs
from scheduler.apis.config.validation_extenders import decode_data

from .types import (
    WireError,
    binding_args,
    dumps_compact,
    encode_extender_args,
    parse_error_result,
    parse_filter_result,
    parse_host_priority_list,
    parse_preemption_result,
    pod_json,
    preemption_args,
)

log = logging.getLogger(__name__)

DEFAULT_EXTENDER_TIMEOUT = 5.0  # upstream DefaultExtenderTimeout
# Encoded nodes kept per extender (by name, for their resourceVersion); cleared past this size.
_NODE_CACHE_MAX = 8192

Victims = tuple[Sequence[pb.Pod], int]  # the pods to preempt on a node, and the PDB violations


class ExtenderError(Exception):
    """A call to an extender failed; the message is upstream's wording (see the module doc)."""


def _go_dial_error(url: str, e: aiohttp.ClientConnectorError) -> str:
    os_err = e.os_error
    if isinstance(e, aiohttp.ClientSSLError):  # the handshake failed (Go: "tls: ...")
        return f'Post "{url}": tls: {os_err}'
    code = getattr(os_err, "errno", None)
    if code == errno.ECONNREFUSED:
        reason = "connection refused"
    elif isinstance(code, int) and code > 0:
        reason = os.strerror(code).lower()
    else:
        reason = str(os_err) or type(os_err).__name__
    return f'Post "{url}": dial tcp {e.host}:{e.port}: connect: {reason}'


def _pod_resource_names(pod: pb.Pod) -> set[str]:
    names: set[str] = set()
    for c in list(pod.spec.containers) + list(pod.spec.init_containers):
        names.update(c.resources.requests.keys())
        names.update(c.resources.limits.keys())
    return names


class HTTPExtender:
    """An extender over HTTP(S). ``await close()`` when done (closes its connection pool)."""

    def __init__(self, config: Extender) -> None:
        self.config = config
        self.url_prefix = config.url_prefix
        self.filter_verb = config.filter_verb
        self.prioritize_verb = config.prioritize_verb
        self.preempt_verb = config.preempt_verb
        self.bind_verb = config.bind_verb
        self.weight = config.weight
        self.node_cache_capable = config.node_cache_capable
        self.ignorable = config.ignorable
        self.managed_resources = frozenset(r.name for r in config.managed_resources)
        self.timeout = config.http_timeout or DEFAULT_EXTENDER_TIMEOUT
        self._ssl = self._ssl_context(config)
        self._server_hostname = config.tls_config.server_name if config.tls_config else ""
        self._session: aiohttp.ClientSession | None = None
        self._nodes: dict[str, tuple[str, bytes]] = {}

    def __repr__(self) -> str:
        return f"HTTPExtender({self.url_prefix!r})"

    # ------------------------------------------------------------------ what it does

    def name(self) -> str:
        """The urlPrefix (upstream Name), also the "plugin" name of its scores."""
        return self.url_prefix

    def is_ignorable(self) -> bool:
        return self.ignorable

    def is_filter(self) -> bool:
        return bool(self.filter_verb)

    def is_prioritizer(self) -> bool:
        return bool(self.prioritize_verb)

    def is_binder(self) -> bool:
        return bool(self.bind_verb)

    def supports_preemption(self) -> bool:
        return bool(self.preempt_verb)

    def is_interested(self, pod: pb.Pod) -> bool:
        """Upstream IsInterested: every pod when it manages no resources, else a pod whose
        (init) containers request or limit one of them."""
        if not self.managed_resources:
            return True
        return not self.managed_resources.isdisjoint(_pod_resource_names(pod))

    # ------------------------------------------------------------------ verbs

    async def filter(
        self, pod: pb.Pod, nodes: Sequence[pb.Node]
    ) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """Upstream Filter: (names of the nodes that passed, failedNodes, failedAndUnresolvableNodes).
        The passed nodes are a subset of `nodes`; raises ExtenderError."""
        names = [n.metadata.name for n in nodes]
        if not self.filter_verb:
            return names, {}, {}
        body = await self._send(self.filter_verb, self._args(pod, nodes))
        try:
            result = parse_filter_result(body, self.node_cache_capable)
        except WireError as e:
            raise ExtenderError(self._bad_response(self.filter_verb, e)) from None
        if result.error:
            raise ExtenderError(result.error)
        sent = set(names)
        for name in result.names or ():
            if name not in sent:
                raise ExtenderError(
                    f'extender "{self.url_prefix}" claims a filtered node "{name}" which is not found in '
                    "the input node list"
                )
        return list(result.names or ()), result.failed, result.failed_and_unresolvable

    async def prioritize(self, pod: pb.Pod, nodes: Sequence[pb.Node]) -> tuple[list[tuple[str, int]], int]:
        """Upstream Prioritize: ([(host, score 0..10)], weight). Without a prioritizeVerb every
        node scores 0 with weight 0. Raises ExtenderError."""
        if not self.prioritize_verb:
            return [(n.metadata.name, 0) for n in nodes], 0
        body = await self._send(self.prioritize_verb, self._args(pod, nodes))
        try:
            return parse_host_priority_list(body), self.weight
        except WireError as e:
            raise ExtenderError(self._bad_response(self.prioritize_verb, e)) from None

    async def bind(self, pod: pb.Pod, node_name: str) -> None:
        """Upstream Bind: the extender binds the pod (ExtenderBindingArgs). Raises ExtenderError."""
        if not self.bind_verb:
            raise ExtenderError("unexpected empty bindVerb in extender")
        m = pod.metadata
        body = await self._send(self.bind_verb, binding_args(m.namespace, m.name, m.uid, node_name))
        try:
            err = parse_error_result(body, "ExtenderBindingResult")
        except WireError as e:
            raise ExtenderError(self._bad_response(self.bind_verb, e)) from None
        if err:
            raise ExtenderError(err)

    async def process_preemption(
        self,
        pod: pb.Pod,
        victims: Mapping[str, Victims],
        pods_on_node: Callable[[str], Sequence[pb.Pod] | None],
    ) -> dict[str, Victims]:
        """Upstream ProcessPreemption: the extender narrows the candidate nodes and their victims.
        `victims` is node name -> (pods, PDB violations); `pods_on_node(name)` the pods the
        scheduler's snapshot has on a node (None: no such node). The answer's UIDs are turned back
        into those pods; a UID not on that node is an error (the caches disagree). Raises
        ExtenderError."""
        if not self.preempt_verb:
            raise ExtenderError(
                f"preempt verb is not defined for extender {self.url_prefix} but run into ProcessPreemption"
            )
        args = preemption_args(pod_json(pod), victims, self.node_cache_capable)
        body = await self._send(self.preempt_verb, args)
        try:
            result = parse_preemption_result(body)
        except WireError as e:
            raise ExtenderError(self._bad_response(self.preempt_verb, e)) from None
        out: dict[str, Victims] = {}
        for node, meta in result.items():
            on_node = pods_on_node(node)
            if on_node is None:
                raise ExtenderError(f'nodeinfo not found for node name "{node}"')
            by_uid = {p.metadata.uid: p for p in on_node}
            chosen = []
            for uid in meta.pod_uids:
                if uid not in by_uid:
                    raise ExtenderError(
                        f"extender: {self.url_prefix} claims to preempt pod (UID: {uid}) on node: {node}, "
                        "but the pod is not found on that node"
                    )
                chosen.append(by_uid[uid])
            out[node] = (chosen, meta.num_pdb_violations)
        return out

    # ------------------------------------------------------------------ the wire

    def _args(self, pod: pb.Pod, nodes: Sequence[pb.Node]) -> bytes:
        """ExtenderArgs as JSON bytes: node names for a nodeCacheCapable extender, else the nodes."""
        pod_bytes = dumps_compact(pod_json(pod))
        if self.node_cache_capable:
            return encode_extender_args(pod_bytes, None, [n.metadata.name for n in nodes])
        return encode_extender_args(pod_bytes, [self._node_json(n) for n in nodes], None)

    def _node_json(self, node: pb.Node) -> bytes:
        """A node as JSON, encoded once per resourceVersion (the same nodes go out for every pod)."""
        name, rv = node.metadata.name, node.metadata.resource_version
        hit = self._nodes.get(name)
        if hit is not None and hit[0] == rv and rv:
            return hit[1]
        if len(self._nodes) >= _NODE_CACHE_MAX:
            self._nodes.clear()
        encoded = dumps_compact(to_dict(node))
        self._nodes[name] = (rv, encoded)
        return encoded

    def _url(self, verb: str) -> str:
        return self.url_prefix.rstrip("/") + "/" + verb

    def _bad_response(self, verb: str, e: Exception) -> str:
        return f"decoding the {verb} response of extender at URL {self._url(verb)}: {e}"

    async def _send(self, verb: str, args: Any) -> Any:
        """POST `args` (JSON bytes, or a value to encode) to ``{urlPrefix}/{verb}``; the decoded
        JSON answer."""
        url = self._url(verb)
        session = self._session_for_loop()
        kwargs: dict[str, Any] = {}
        if self._ssl is not None and urlsplit(url).scheme == "https":
            kwargs["ssl"] = self._ssl
            if self._server_hostname:
                kwargs["server_hostname"] = self._server_hostname
        data = args if isinstance(args, bytes) else dumps_compact(args)
        try:
            async with session.post(
                url, data=data, headers={"Content-Type": "application/json"}, **kwargs
            ) as resp:
                if resp.status != 200:
                    raise ExtenderError(f"failed {verb} with extender at URL {url}, code {resp.status}")
                raw = await resp.read()
        except ExtenderError:
            raise
        except TimeoutError:
            raise ExtenderError(
                f'Post "{url}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)'
            ) from None
        except aiohttp.ClientConnectorError as e:
            raise ExtenderError(_go_dial_error(url, e)) from None
        except (aiohttp.ClientError, OSError, ssl.SSLError) as e:
            raise ExtenderError(f'Post "{url}": {e}') from None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ExtenderError(self._bad_response(verb, e)) from None

    def _session_for_loop(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()

    @staticmethod
    def _ssl_context(config: Extender) -> ssl.SSLContext | None:
        """Upstream makeTransport: None for plain HTTP with no tlsConfig."""
        tls = config.tls_config
        if tls is None and not config.enable_https:
            return None
        has_ca = tls is not None and bool(tls.ca_file or tls.ca_data)
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if tls is not None and tls.ca_file:
            ctx.load_verify_locations(cafile=tls.ca_file)
        elif tls is not None and tls.ca_data:
            ctx.load_verify_locations(cadata=decode_data(tls.ca_data).decode())
        insecure = (tls is not None and tls.insecure) or (config.enable_https and not has_ca)
        if insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if tls is not None and (tls.cert_file or tls.cert_data):
            if tls.cert_file and tls.key_file:
                ctx.load_cert_chain(tls.cert_file, tls.key_file)
            else:
                _load_cert_chain_data(ctx, tls.cert_file, tls.key_file, tls.cert_data, tls.key_data)
        return ctx


def _load_cert_chain_data(
    ctx: ssl.SSLContext, cert_file: str, key_file: str, cert_data: str, key_data: str
) -> None:
    """`ssl` loads a client pair only from files: write the in-line data to private temporary files."""
    with tempfile.TemporaryDirectory(prefix="kse-extender-tls-") as d:
        cert_path, key_path = cert_file, key_file
        if cert_data:
            cert_path = os.path.join(d, "cert.pem")
            with open(os.open(cert_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                f.write(decode_data(cert_data))
        if key_data:
            key_path = os.path.join(d, "key.pem")
            with open(os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
                f.write(decode_data(key_data))
        ctx.load_cert_chain(cert_path, key_path)


def build_extenders(configs: Sequence[Extender]) -> list[HTTPExtender]:
    """The extenders in call order (upstream buildExtenders): as configured, except that the
    ignorable ones go to the tail. Raises ValueError when a TLS file cannot be read."""
    out: list[HTTPExtender] = []
    tail: list[HTTPExtender] = []
    for i, cfg in enumerate(configs):
        try:
            ext = HTTPExtender(cfg)
        except (OSError, ssl.SSLError, ValueError) as e:
            raise ValueError(f"extenders[{i}] ({cfg.url_prefix}): tlsConfig: {e}") from e
        (tail if ext.is_ignorable() else out).append(ext)
    return out + tail


def ignored_by_scheduler(configs: Sequence[Extender]) -> list[str]:
    """The managed resources NodeResourcesFit must not check (``ignoredByScheduler``)."""
    return [r.name for cfg in configs for r in cfg.managed_resources if r.ignored_by_scheduler]


def apply_ignored_resources(cfg: KubeSchedulerConfiguration) -> None:
    """Upstream buildExtenders: the extenders' ``ignoredByScheduler`` resources become every
    profile's NodeResourcesFitArgs.ignoredResources (they replace what the file said, as
    upstream). A profile without NodeResourcesFit args (the plugin is disabled) is left alone."""
    ignored = ignored_by_scheduler(cfg.extenders)
    if not ignored:
        return
    for profile in cfg.profiles:
        for pc in profile.plugin_config:
            if pc.name == "NodeResourcesFit" and isinstance(pc.args, NodeResourcesFitArgs):
                pc.args.ignored_resources = list(ignored)


async def close_all(extenders: Sequence[HTTPExtender]) -> None:
    await asyncio.gather(*(e.close() for e in extenders), return_exceptions=True)
