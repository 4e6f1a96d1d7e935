"""The objects a scheduler_perf workload creates, from template files or upstream's defaults.

Every template file is rendered with Go's text/template (`kse.schedperf.gotemplate`) and the data
upstream passes (`{"Index": i, "Count": n}` plus the op's `templateParams`), then decoded as a
Kubernetes manifest (`kse.objects.manifest`). Upstream decodes strictly; kse's objects do not
model every Kubernetes field, so a field kse does not know is reported once per template (on
stderr, by the caller) and dropped, rather than failing a config upstream accepts.

Without a template, the objects are upstream's defaults (scheduler_perf.go makeBaseNode and
makeBasePod with test/utils MakePodSpec): a node of 4 CPU, 32Gi and 110 pods, Ready and Running;
a pod with one `pause` container requesting and limited to 100m CPU and 500Mi, port 80.

Names: a template's `name` is kept; otherwise `generateName` (or upstream's default prefixes,
`node-<opIndex>-` and `pod-`) plus a counter, decided here (upstream adds 5 random characters
server-side; a counter keeps runs reproducible). Every node gets `kubernetes.io/hostname` = its
name, as upstream's node preparer sets it, and allocatable defaults to capacity where the
template gives none (the kubelet's behaviour, which the in-process runner has no kubelet for).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kse.objects.kinds import kind_of, unwrap
from kse.objects.manifest import ManifestError, decode_manifests
from kse.schedperf.decode import ConfigError
from kse.schedperf.gotemplate import Template, TemplateError
from proto import kse_pb2 as pb

HOSTNAME_LABEL = "kubernetes.io/hostname"
DEFAULT_NODE_CAPACITY = {"pods": "110", "cpu": "4", "memory": "32Gi"}
DEFAULT_POD_RESOURCES = {"cpu": "100m", "memory": "500Mi"}
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def default_node(generate_name: str) -> pb.Node:
    """scheduler_perf's makeBaseNode."""
    node = pb.Node(api_version="v1", kind="Node")
    node.metadata.generate_name = generate_name
    node.status.capacity.update(DEFAULT_NODE_CAPACITY)
    node.status.allocatable.update(DEFAULT_NODE_CAPACITY)
    node.status.phase = "Running"
    node.status.conditions.add(type="Ready", status="True")
    return node


def default_pod() -> pb.Pod:
    """scheduler_perf's makeBasePod (test/utils MakePodSpec)."""
    pod = pb.Pod(api_version="v1", kind="Pod")
    pod.metadata.generate_name = "pod-"
    c = pod.spec.containers.add(name="pause", image=PAUSE_IMAGE)
    c.ports.add(container_port=80)
    c.resources.requests.update(DEFAULT_POD_RESOURCES)
    c.resources.limits.update(DEFAULT_POD_RESOURCES)
    return pod


class Renderer:
    """Renders template files (each parsed once) into objects; collects the unknown-field
    warnings so the runner can print each once."""

    def __init__(self) -> None:
        self._templates: dict[str, Template] = {}
        self._static: dict[str, pb.Object] = {}  # decoded once: templates without actions
        self.warnings: list[str] = []
        self._warned: set[str] = set()

    def _template(self, path: str) -> Template:
        t = self._templates.get(path)
        if t is None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise ConfigError(f"template {path}: cannot read: {e}") from None
            try:
                t = Template(text, path)
            except TemplateError as e:
                raise ConfigError(str(e)) from None
            self._templates[path] = t
        return t

    def render(self, path: str, index: int, count: int, params: Mapping[str, Any] | None = None) -> pb.Object:
        """The one object of template `path` for `.Index` = index, `.Count` = count."""
        cached = self._static.get(path)
        if cached is not None:
            out = pb.Object()
            out.CopyFrom(cached)
            return out
        data: dict[str, Any] = dict(params or {})
        data["Index"] = index
        data["Count"] = count
        try:
            text = self._template(path).execute(data)
        except TemplateError as e:
            raise ConfigError(str(e)) from None
        try:
            decoded = decode_manifests(text, source=path)
        except ManifestError as e:
            raise ConfigError(f"template {path} (Index {index}): {e}") from None
        if len(decoded) != 1:
            raise ConfigError(f"template {path}: want exactly one object, got {len(decoded)}")
        d = decoded[0]
        if d.obj.WhichOneof("kind") == "node" and not d.obj.node.status.allocatable:
            d.obj.node.status.allocatable.update(d.obj.node.status.capacity)
        if d.unknown_fields and path not in self._warned:
            self._warned.add(path)
            self.warnings.append(
                f"template {path}: fields kse does not model were ignored: {', '.join(d.unknown_fields)}"
            )
        if self._template(path).static:
            self._static[path] = d.obj
            out = pb.Object()
            out.CopyFrom(d.obj)
            return out
        return d.obj

    def node(
        self, path: str | None, index: int, count: int, params: Mapping[str, Any], prefix: str
    ) -> pb.Node:
        if path is None:
            return default_node(prefix)
        obj = self.render(path, index, count, params)
        if obj.WhichOneof("kind") != "node":
            raise ConfigError(f"template {path}: want a Node, got {kind_of(obj).kind}")
        return obj.node

    def pod(self, path: str | None, index: int, count: int, params: Mapping[str, Any]) -> pb.Pod:
        if path is None:
            return default_pod()
        obj = self.render(path, index, count, params)
        if obj.WhichOneof("kind") != "pod":
            raise ConfigError(f"template {path}: want a Pod, got {kind_of(obj).kind}")
        return obj.pod

    def namespace(self, path: str | None) -> pb.Namespace:
        """upstream's namespace template is read without text/template (getSpecFromFile)."""
        if path is None:
            return pb.Namespace(api_version="v1", kind="Namespace")
        try:
            text = Path(path).read_text(encoding="utf-8")
            decoded = decode_manifests(text, source=path)
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"template {path}: cannot read: {e}") from None
        except ManifestError as e:
            raise ConfigError(f"template {path}: {e}") from None
        if len(decoded) != 1 or decoded[0].obj.WhichOneof("kind") != "namespace":
            raise ConfigError(f"template {path}: want exactly one Namespace")
        return decoded[0].obj.namespace

    def any(self, path: str, index: int, count: int, params: Mapping[str, Any]) -> pb.Object:
        return self.render(path, index, count, params)


def name_object(msg: Any, counter: int, fallback_prefix: str) -> str:
    """Give `msg` (a Node, Pod, ...) a name: its own, else generateName (or the fallback) plus
    the counter."""
    meta = msg.metadata
    if not meta.name:
        meta.name = f"{meta.generate_name or fallback_prefix}{counter:05d}"
    return str(meta.name)


def object_name(obj: pb.Object) -> str:
    return str(unwrap(obj).metadata.name)
