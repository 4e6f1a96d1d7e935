"""List and Watch: served from the watch cache, or from etcd at an exact revision.

List resourceVersion semantics (Kubernetes'):
* ""  - consistent: the cache is first brought up to etcd's current revision (`WatchCache.sync`),
        then serves; if it cannot catch up in time, the list is read from etcd instead;
* "0" - whatever the cache has now (may be stale; never older than what this server served before);
* "N" - exactly revision N, read from etcd (OUT_OF_RANGE if compacted).
With `limit`, the first page comes from the cache at its revision R and the continue token pins R:
later pages read etcd at R, which holds exactly the state the cache had at R, so the pages form one
consistent snapshot.
"""

from __future__ import annotations

import base64
import binascii

from apiserver_mock import errors, wire
from apiserver_mock.errors import Gone, Invalid, Unavailable
from apiserver_mock.registry.generic import ETCD_MAX_REVISION, Registry, parse_rv
from apiserver_mock.watchcache.cache import WatchCache
from apiserver_mock.watchcache.model import CachedObject, Filter, make_filter
from apiserver_mock.watchcache.ring import TooOld
from apiserver_mock.watchcache.watcher import Watcher
from certs.identity import Identity
from kse.etcdclient import CompactedError, FutureRevisionError
from kse.objects.fields import FieldSelectorError, parse_field_selector
from kse.objects.kinds import Kind
from kse.objects.labels import SelectorError, parse_selector
from proto import kse_pb2 as pb

FRESHNESS_TIMEOUT = 3.0  # as the Kubernetes watch cache's wait for a resourceVersion
ETCD_PAGE = 500

CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new "
    "list without the continue parameter, or use the continue value from the response to retrieve the "
    "remainder of the results. Continuing with the provided token results in an inconsistent list - objects "
    "that were created, modified, or deleted between the time the first chunk was returned and now may show "
    "up in the list."
)


def encode_continue(revision: int, key_suffix: bytes) -> str:
    return base64.urlsafe_b64encode(b"%d/" % revision + key_suffix).decode()


def decode_continue(token: str) -> tuple[int, bytes]:
    try:
        raw = base64.urlsafe_b64decode(token.encode())
        rev_text, _, suffix = raw.partition(b"/")
        rev = int(rev_text)
    except (binascii.Error, ValueError):
        raise Invalid(f'continue key is not valid: "{token}"') from None
    if rev <= 0 or rev > ETCD_MAX_REVISION or not suffix:
        raise Invalid(f'continue key is not valid: "{token}"')
    return rev, suffix


def build_filter(kind: Kind, namespace: str, label_selector: str, field_selector: str) -> Filter:
    try:
        labels = parse_selector(label_selector)
    except SelectorError as e:
        raise Invalid(str(e)) from None
    try:
        fields = parse_field_selector(field_selector, kind)
    except FieldSelectorError as e:
        raise Invalid(str(e)) from None
    return make_filter(namespace, labels, fields)


class Reads:
    """List and Watch on top of a Registry's caches and store."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    # ------------------------------------------------------------------ list

    async def list(self, ident: Identity, req: pb.ListRequest) -> tuple[bytes, int]:
        reg = self.registry
        kind = reg.kind_for(req.resource)
        ns = req.namespace if kind.namespaced else ""
        reg.authz.authorize(ident, "list", kind, "", ns, "")
        filt = build_filter(kind, ns, req.label_selector, req.field_selector)
        if req.limit < 0:
            raise Invalid(f"limit must not be negative, got {req.limit}")
        cache = reg.cache(kind)
        if getattr(req, "continue"):
            rev, suffix = decode_continue(getattr(req, "continue"))
            return await self._from_etcd(
                cache, filt, rev, req.limit, cache.key_prefix + suffix, continuing=True
            )
        rv = req.resource_version
        if rv == "":
            if not await cache.sync(FRESHNESS_TIMEOUT):
                return await self._from_etcd(cache, filt, 0, req.limit, b"")
        elif rv != "0":
            return await self._from_etcd(cache, filt, parse_rv(rv), req.limit, b"")
        return self._from_cache(cache, filt, req.limit)

    @staticmethod
    def _from_cache(cache: WatchCache, filt: Filter, limit: int) -> tuple[bytes, int]:
        rev = cache.revision
        matched = cache.snapshot(filt)
        if not limit:
            return wire.object_list(rev, [o.wire for o in matched]), rev
        page: list[CachedObject] = []
        for o in matched:
            page.append(o)
            if len(page) == limit:
                break
        rest = sum(1 for _ in matched)  # the generator continues after the page
        if not rest:
            return wire.object_list(rev, [o.wire for o in page]), rev
        token = encode_continue(rev, page[-1].key[len(cache.key_prefix) :])
        return wire.object_list(rev, [o.wire for o in page], token, rest), rev

    async def _from_etcd(
        self,
        cache: WatchCache,
        filt: Filter,
        rev: int,
        limit: int,
        start_after: bytes,
        continuing: bool = False,
    ) -> tuple[bytes, int]:
        start, end = cache.range_for(filt.namespace)
        if start_after:
            start = max(start, start_after + b"\x00")
        selective = filt.labels is not None or filt.fields is not None
        items: list[bytes] = []
        last_key = b""
        more = False
        remaining: int | None = None
        try:
            while True:
                want = limit - len(items) if limit else 0
                page = max(want, ETCD_PAGE) if (selective and limit) else want
                res = await self.registry.store.range(start, end, revision=rev, limit=page)
                rev = rev or res.revision
                for i, kv in enumerate(res.kvs):
                    o = cache.decode(kv.key, kv.value, kv.mod_revision)
                    last_key = kv.key
                    if o is not None and (not selective or filt.matches(o)):
                        items.append(o.wire)
                        if limit and len(items) == limit:
                            more = res.more or i + 1 < len(res.kvs)
                            if more and not selective:
                                remaining = res.count - (i + 1)
                            break
                else:
                    if res.more and res.kvs:
                        start = res.kvs[-1].key + b"\x00"
                        continue
                break
        except CompactedError as e:
            if continuing:
                raise Gone(CONTINUE_TOO_OLD) from None
            raise errors.too_old(rev, e.compact_revision) from None
        except FutureRevisionError:
            raise Unavailable(f"Too large resource version: {rev}, current: {cache.revision}") from None
        token = encode_continue(rev, last_key[len(cache.key_prefix) :]) if more else ""
        return wire.object_list(rev, items, token, remaining), rev

    # ------------------------------------------------------------------ watch

    async def watch(
        self, ident: Identity, req: pb.WatchRequest, peer: str = ""
    ) -> tuple[WatchCache, Watcher]:
        reg = self.registry
        kind = reg.kind_for(req.resource)
        ns = req.namespace if kind.namespaced else ""
        reg.authz.authorize(ident, "watch", kind, "", ns, "")
        filt = build_filter(kind, ns, req.label_selector, req.field_selector)
        cache = reg.cache(kind)
        rv = req.resource_version
        from_rev: int | None = None
        if rv == "":
            if not await cache.sync(FRESHNESS_TIMEOUT):
                raise Unavailable("timed out waiting for the watch cache to catch up with etcd; retry")
        elif rv != "0":
            n = parse_rv(rv)
            if n > cache.revision and not await cache.wait_fresh(n, FRESHNESS_TIMEOUT):
                raise Unavailable(f"Too large resource version: {n}, current: {cache.revision}")
            if not req.send_initial_events:
                from_rev = n
                try:
                    await cache.check_compaction(n)
                except TooOld as e:
                    raise errors.too_old(e.requested, e.floor) from None
        try:
            watcher = cache.add_watcher(
                filt,
                from_revision=from_rev,
                send_initial_events=req.send_initial_events,
                bookmarks=req.allow_watch_bookmarks,
                peer=peer,
            )
        except TooOld as e:
            raise errors.too_old(e.requested, e.floor) from None
        return cache, watcher
