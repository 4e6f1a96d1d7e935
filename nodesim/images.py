"""Container images on a simulated node: the cache, image pulls, and what the node reports.

The pull model is a kubelet with `serializeImagePulls: true` (its default) behind a link of fixed
bandwidth: a pull of S bytes takes S / bandwidth seconds, and a node pulls one image at a time, so
a pull starts when the previous one has finished. An image already cached costs nothing; an image
being pulled for another pod is waited for, not pulled twice. A pod can start when the last of its
images is there:

    cache = ImageCache({"nginx:latest": 150 * Mi})
    ready_at, pulled = cache.plan_pull(["nginx", "redis:7"], now, sizes, default_size, bandwidth)
    ...
    cache.settle(now)          # pulls that have finished join the cache

`pull_delay()` is the same arithmetic for one pod on an idle node: the sum of the sizes of its
images not yet cached, over the bandwidth.

What the node reports (`status_images()`) is as the kubelet's image list: largest first, at most
`MAX_STATUS_IMAGES` (kubelet's nodeStatusMaxImages, 50) entries, each with its name and size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from proto import kse_pb2 as pb

MAX_STATUS_IMAGES = 50
DEFAULT_TAG = "latest"


def normalize_image(name: str) -> str:
    """The name a container runtime reports: a missing tag means `:latest` (as ImageLocality reads it)."""
    name = name.strip()
    if "@" in name:
        return name
    if name.rfind(":") <= name.rfind("/"):
        return f"{name}:{DEFAULT_TAG}"
    return name


def pod_images(pod: pb.Pod) -> list[str]:
    """The pod's images (init containers first), normalized, without duplicates."""
    containers = (*pod.spec.init_containers, *pod.spec.containers)
    return list(dict.fromkeys(normalize_image(c.image) for c in containers if c.image))


def image_size(name: str, sizes: Mapping[str, int], default_size: int) -> int:
    return sizes.get(normalize_image(name), default_size)


def pull_seconds(size_bytes: int, bandwidth: float) -> float:
    """Seconds to pull `size_bytes` at `bandwidth` bytes/s (0 or less: instant)."""
    if bandwidth <= 0:
        return 0.0
    return size_bytes / bandwidth


def pull_delay(
    images: Iterable[str],
    cached: Iterable[str],
    sizes: Mapping[str, int],
    default_size: int,
    bandwidth: float,
) -> float:
    """Seconds until a pod with `images` can start on an idle node that has `cached`: the sizes of
    the images not cached (unknown ones count `default_size`) over the bandwidth."""
    have = {normalize_image(i) for i in cached}
    missing = {normalize_image(i) for i in images} - have
    return pull_seconds(sum(image_size(i, sizes, default_size) for i in missing), bandwidth)


class ImageCache:
    """The images of one node, and the pulls in progress (see the module doc)."""

    def __init__(self, images: Mapping[str, int] | None = None) -> None:
        self.images: dict[str, int] = {normalize_image(k): v for k, v in (images or {}).items()}
        self.pulling: dict[str, tuple[float, int]] = {}  # name -> (done at, size)
        self.pull_free_at = float("-inf")  # when the (serial) puller is free

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize_image(name) in self.images

    def plan_pull(
        self,
        images: Iterable[str],
        now: float,
        sizes: Mapping[str, int],
        default_size: int,
        bandwidth: float,
    ) -> tuple[float, list[str]]:
        """When a pod needing `images` can start, and which images this starts pulling.

        Pulls queue behind the ones in progress (one at a time); an image already being pulled is
        waited for. The returned time is never before `now`."""
        ready = now
        started: list[str] = []
        for name in dict.fromkeys(normalize_image(i) for i in images):
            if name in self.images:
                continue
            in_progress = self.pulling.get(name)
            if in_progress is not None:
                ready = max(ready, in_progress[0])
                continue
            size = sizes.get(name, default_size)
            start = max(now, self.pull_free_at)
            done = start + pull_seconds(size, bandwidth)
            self.pull_free_at = done
            self.pulling[name] = (done, size)
            started.append(name)
            ready = max(ready, done)
        return ready, started

    def settle(self, now: float) -> list[str]:
        """Move every pull finished by `now` into the cache; returns the names that joined."""
        done = [name for name, (at, _) in self.pulling.items() if at <= now]
        for name in done:
            _, size = self.pulling.pop(name)
            self.images[name] = size
        return done

    def add(self, names: Iterable[str], sizes: Mapping[str, int], default_size: int) -> list[str]:
        """Mark images as present (a pod found running after a restart had them); returns the new ones."""
        added = []
        for name in (normalize_image(n) for n in names):
            if name not in self.images:
                self.pulling.pop(name, None)
                self.images[name] = sizes.get(name, default_size)
                added.append(name)
        return added

    def status_images(self) -> list[pb.ContainerImage]:
        """The node's `status.images`: largest first (ties by name), at most MAX_STATUS_IMAGES."""
        ordered = sorted(self.images.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_STATUS_IMAGES]
        return [pb.ContainerImage(names=[name], size_bytes=size) for name, size in ordered]
