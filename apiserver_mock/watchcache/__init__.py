"""The watch cache: per resource, one etcd watch, the current objects, and a ring of recent events."""

from apiserver_mock.watchcache.cache import WatchCache
from apiserver_mock.watchcache.ring import TooOld

__all__ = ["TooOld", "WatchCache"]
