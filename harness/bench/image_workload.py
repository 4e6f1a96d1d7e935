"""The image-locality study's inputs, all from one seed: the image catalog, the pods, and the
scheduler configuration per ImageLocality weight. Pure functions (no I/O but reading a spec file),
so the same seed gives the same study on any machine.

* Catalog (`default_catalog`): a mix of small (10-60 MiB: distroless, busybox-like), medium
  (100-400 MiB: language runtimes) and large (0.7-1.6 GiB: ML / JVM application) images. Or a spec
  (`parse_image_spec`): `name=size,...` inline, or a file of such items (commas or lines, `#`
  comments).
* Pods (`make_pods`): each uses one image drawn by popularity (Zipf, s=1, over the catalog in a
  seeded order: a few images are common, most are rare), a fifth of them with a small sidecar
  image too; requests 250m or 500m CPU and 256Mi-1Gi memory; `imagePullPolicy: IfNotPresent`.
* Scheduler config (`scheduler_config`): the v1 defaults with ImageLocality's score weight set
  (0: ImageLocality disabled at score, as a weight of 0 is not a valid weight).
"""

from __future__ import annotations

import random
from pathlib import Path

from kse.objects.quantity import QuantityError, parse_quantity, value
from proto import kse_pb2 as pb

Mi = 1024 * 1024
NAMESPACE = "default"
REGISTRY = "registry.bench.example"
SIDECAR_FRACTION = 0.2


class SpecError(ValueError):
    """A bad `--images` spec (the message names the item)."""


def normalize_image(name: str) -> str:
    """The name a node reports: a missing tag means `:latest` (as nodesim and ImageLocality read
    it; the harness may not import them, DESIGN.md's Layout)."""
    name = name.strip()
    if "@" in name or name.rfind(":") > name.rfind("/"):
        return name
    return f"{name}:latest"


def parse_size(text: str, what: str = "size") -> int:
    """A byte count as a Kubernetes quantity ("150Mi", "1G", "1048576")."""
    try:
        q = parse_quantity(text)
    except QuantityError as e:
        raise SpecError(f"{what} {text!r}: {e}") from None
    if q < 0:
        raise SpecError(f"{what} {text!r}: must not be negative")
    return int(value(q))


def parse_image_spec(spec: str) -> dict[str, int]:
    """`name=size,...` or the path of a file with such items (commas or one a line, `#`
    comments) -> {normalized name: bytes}, in the spec's order."""
    text = spec
    path = Path(spec)
    if path.is_file():
        try:
            text = path.read_text()
        except OSError as e:
            raise SpecError(f"--images {spec}: {e}") from None
    out: dict[str, int] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        for item in line.split(","):
            item = item.strip()
            if not item:
                continue
            name, sep, size = item.rpartition("=")
            if not sep or not name.strip():
                raise SpecError(f"--images: item {item!r}: want NAME=SIZE (e.g. nginx:1.27=150Mi)")
            try:
                out[normalize_image(name)] = parse_size(size.strip(), f"image {name.strip()} size")
            except SpecError as e:
                raise SpecError(f"--images: {e}") from None
    if not out:
        raise SpecError(f"--images: no images in {spec!r}")
    return out


def default_catalog(seed: int) -> dict[str, int]:
    """Fourteen images with seeded sizes: 4 small, 6 medium, 4 large."""
    rng = random.Random(f"catalog-{seed}")
    out: dict[str, int] = {}
    for kind, count, lo, hi in (("small", 4, 10, 60), ("medium", 6, 100, 400), ("large", 4, 700, 1600)):
        for i in range(count):
            out[f"{REGISTRY}/{kind}-{i}:v1"] = rng.randint(lo, hi) * Mi
    return out


def sidecars(catalog: dict[str, int]) -> list[str]:
    """The catalog's smallest images (a quarter, at least one): what sidecars use."""
    by_size = sorted(catalog, key=lambda n: (catalog[n], n))
    return by_size[: max(1, len(by_size) // 4)]


def make_pods(count: int, catalog: dict[str, int], seed: int) -> list[pb.Pod]:
    """`count` pods named `img-<i>` over `catalog` (see the module doc)."""
    rng = random.Random(f"pods-{seed}")
    names = list(catalog)
    rng.shuffle(names)  # popularity order: independent of size
    weights = [1.0 / (rank + 1) for rank in range(len(names))]
    side = sidecars(catalog)
    pods = []
    for i in range(count):
        p = pb.Pod(metadata=pb.ObjectMeta(name=f"img-{i:05d}", namespace=NAMESPACE))
        p.metadata.labels["app"] = "image-locality"
        image = rng.choices(names, weights)[0]
        c = p.spec.containers.add(name="app", image=image, image_pull_policy="IfNotPresent")
        cpu, memory = rng.choice(["250m", "500m"]), rng.choice(["256Mi", "1Gi"])
        c.resources.requests.update({"cpu": cpu, "memory": memory})
        if rng.random() < SIDECAR_FRACTION:
            sidecar = rng.choice(side)
            s = p.spec.containers.add(name="sidecar", image=sidecar, image_pull_policy="IfNotPresent")
            s.resources.requests.update({"cpu": "50m", "memory": "64Mi"})
        pods.append(p)
    return pods


def scheduler_config(weight: int) -> str:
    """A KubeSchedulerConfiguration: the defaults, ImageLocality at `weight` (0: disabled)."""
    head = (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        "- schedulerName: default-scheduler\n"
        "  plugins:\n"
        "    score:\n"
    )
    if weight <= 0:
        return head + "      disabled:\n      - name: ImageLocality\n"
    return head + f"      enabled:\n      - name: ImageLocality\n        weight: {weight}\n"
