"""Client credential reload: a channel source that follows its cert, key and CA bundle files.

grpcio cannot change a channel's credentials (DEPENDENCIES.md, "grpcio TLS"), so a reload is a swap:

    files change (rotation, renewal, CA phase)
      -> FileCredentialSource.poll() accepts them (never a torn pair)
      -> a new channel is built with them; `current()` hands it out from now on
      -> the old channel is retired: once the unary calls in flight on it have finished (at most
         `close_grace`, by default the clientset's call timeout, so none is cut short), it is closed
      -> watch streams still open on it end (CancelledError, which the clientset reports as a
         closed channel) and the reflector resumes them on the new channel from the last revision it
         delivered: nothing lost, nothing repeated (see kse.client.reflector).

The clientset asks `current()` for every call and every new watch and starts the call before it
awaits anything, so no call can start on a channel after it was retired.

When the files are looked at:
* every `poll_interval` seconds (default 1 s: three `stat` calls when nothing changed);
* on demand: `reload()` (synchronous, returns whether it swapped);
* at the renewal point of the current certificate, a uniformly random 70-90 % of its lifetime as
  kubelet's certificate manager does. kse has no CSR API, so renewing means re-reading the files;
  something else must have written them: `kse certs rotate`, or a `certs.rotation.CertRenewer` run
  by whoever holds the CA key path (`kse up` in short-lived mode). A process that holds the CA key
  path itself can pass `renew=CertRenewer(pki_dir, stem, ttl).renew_now`, which is then called at
  that point before the files are read. Past the point without new files, a warning is logged, and
  an error once the certificate has expired (its handshakes then fail: UNAVAILABLE).

Lifetimes: the source owns one maintenance task (polling, renewal point) and one task per channel
being retired. The maintenance task starts at `async with` / `start()`, or else at the first
`current()` made on a running loop (so `Clientset(channel_source_from_connection(conn))` needs no
extra line); `close()` ends all of them and closes every channel. Everything runs on the event
loop's thread; create the source inside the loop, as any grpc.aio channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
import grpc.aio
from cryptography import x509

from certs.rotation import rotation_deadline
from certs.source import CredentialError, Credentials, FileCredentialSource
from kse.client.channel import merge_options
from kse.tasks import TaskSet

log = logging.getLogger(__name__)

DEFAULT_POLL_INTERVAL = 1.0
# The clientset's default per-call timeout: every unary call started on a retired channel has ended
# by then, so waiting this long never cuts one short. Usually the wait is much shorter: the channel
# closes as soon as its in-flight unary calls are done.
DEFAULT_CLOSE_GRACE = 30.0

# Each channel gets its own connection: grpc may otherwise share a subchannel (one TLS connection,
# handshaken with the old credentials) between channels to the same target.
RELOAD_OPTIONS: tuple[tuple[str, Any], ...] = (("grpc.use_local_subchannel_pool", 1),)

_UNARY_RESPONSE_CALLS = (grpc.aio.UnaryUnaryCall, grpc.aio.StreamUnaryCall)


class ClientCredentialsError(CredentialError, OSError):
    """The client's cert, key or CA bundle cannot be read (or never formed a consistent set).

    Also an OSError, so callers that report unreadable credential files keep doing so.
    """


@dataclass
class ReloadStats:
    """What the source did, for logs, metrics and tests."""

    swaps: int = 0  # channels replaced by a newer one
    retired: int = 0  # old channels closed
    drained_calls: int = 0  # unary calls a retirement waited for before closing a channel
    cut_calls: int = 0  # unary calls still running when `close_grace` ran out (cancelled)
    renewal_points: int = 0  # renewal deadlines reached
    reload_errors: int = 0  # polls or renew hooks that raised


def active_unary_calls(channel: grpc.aio.Channel) -> list[Any] | None:
    """The unary-response calls in flight on `channel`, or None if grpc no longer lets us see them.

    grpc.aio keeps its calls in a private `_active_calls` set (it cancels them on close). Streams
    are left out: a watch never finishes by itself, and is meant to be closed and resumed.
    """
    active = getattr(channel, "_active_calls", None)
    if active is None:
        return None
    return [c for c in list(active) if isinstance(c, _UNARY_RESPONSE_CALLS) and not c.done()]


async def retire_channel(
    old: grpc.aio.Channel, grace: float, on_drain: Callable[[int], object] | None = None
) -> tuple[int, int]:
    """Close `old` once the unary calls in flight on it have finished (waiting at most `grace`
    seconds, then cancelling what is left); streams still open on it end at the close (their
    readers resume them elsewhere). Returns (calls waited for, calls cut short).

    The retirement half of a credential swap, shared by `ReloadingChannelSource` and the etcd
    client (kse.etcdclient.client): callers have already moved to the new channel, so nothing new
    starts on `old`. `on_drain(n)` is told, before the wait, how many calls it waits for.
    """
    calls = active_unary_calls(old)
    if calls is None:
        # Cannot tell unary calls from streams: let grpc wait for all of them, up to the grace.
        await old.close(grace=grace)
        return 0, 0
    cut = 0
    if calls:
        if on_drain is not None:
            on_drain(len(calls))
        cut = await _drain(calls, grace)
    await old.close(grace=None)
    return len(calls), cut


async def _drain(calls: list[Any], grace: float) -> int:
    """Wait until every call in `calls` is done, at most `grace` s; how many were still running."""
    pending = set(calls)
    done = asyncio.Event()

    def finished(call: Any) -> None:
        pending.discard(call)
        if not pending:
            done.set()

    for call in calls:
        call.add_done_callback(finished)
    if not pending:
        return 0
    try:
        async with asyncio.timeout(grace):
            await done.wait()
    except TimeoutError:
        log.warning(
            "%d call(s) still running on a retired channel after %gs; cancelling them", len(pending), grace
        )
        return len(pending)
    return 0


class ReloadingChannelSource:
    """A `ChannelSource` whose channel follows the credential files (see the module doc).

    Also usable where a `grpc.aio.Channel` was: `close(grace)`, `async with`, `channel_ready()`.
    """

    def __init__(
        self,
        cert: str | os.PathLike[str],
        key: str | os.PathLike[str],
        ca_bundle: str | os.PathLike[str],
        target: str,
        *,
        tls_server_name: str = "localhost",
        options: Sequence[tuple[str, Any]] = (),
        interceptors: Sequence[grpc.aio.ClientInterceptor] | None = None,
        poll_interval: float | None = DEFAULT_POLL_INTERVAL,
        close_grace: float = DEFAULT_CLOSE_GRACE,
        renew: Callable[[], object] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if poll_interval is not None and poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive (or None), got {poll_interval}")
        if close_grace < 0:
            raise ValueError(f"close_grace must be >= 0, got {close_grace}")
        self.target = target
        self.poll_interval = poll_interval
        self.close_grace = close_grace
        self.stats = ReloadStats()
        self._files = FileCredentialSource(Path(cert), Path(key), Path(ca_bundle))
        self._options = merge_options(tls_server_name, [*RELOAD_OPTIONS, *options])
        self._interceptors = list(interceptors) if interceptors else None
        self._renew_hook = renew
        self._rng = rng or random.Random()
        try:
            creds = self._files.load()
        except CredentialError as e:
            raise ClientCredentialsError(str(e)) from e
        self._creds = creds
        self._channel = self._build(creds)
        self._cert = x509.load_pem_x509_certificate(creds.cert_pem)
        self._renew_at = self._plan_renewal()
        self._warned: set[tuple[int, str]] = set()
        self._closed = False
        self._wake: asyncio.Event | None = None
        # The maintenance task and the retirement of swapped-out channels; close() ends them.
        self._tasks = TaskSet(f"channel-source-{self.target}", logger=log)
        self._task: asyncio.Task[None] | None = None  # the maintenance task, once started
        self._retiring: dict[asyncio.Task[None], grpc.aio.Channel] = {}

    # ------------------------------------------------------------------ ChannelSource

    def current(self) -> grpc.aio.Channel:
        """The channel to start a call on now. Raises grpc.aio.UsageError once the source is closed
        (the clientset reports that as a closed channel)."""
        if self._closed:
            raise grpc.aio.UsageError("the channel source is closed")
        if self._task is None:
            self._first_use()
        return self._channel

    # ------------------------------------------------------------------ state

    @property
    def channel(self) -> grpc.aio.Channel:
        """The current channel, without starting anything."""
        return self._channel

    @property
    def credentials(self) -> Credentials:
        """The credentials the current channel was built with (`.version` counts accepted changes)."""
        return self._creds

    @property
    def certificate(self) -> x509.Certificate:
        """The client certificate the current channel presents."""
        return self._cert

    @property
    def renew_at(self) -> datetime:
        """The renewal point of the current certificate (70-90 % of its lifetime, jittered)."""
        return self._renew_at

    @property
    def paths(self) -> tuple[Path, Path, Path]:
        """(cert, key, CA bundle)."""
        return self._files.paths

    @property
    def reload_error(self) -> str | None:
        """Why the files, which changed, were not taken (a torn pair, a bad file); None once taken."""
        return self._files.last_error

    @property
    def closed(self) -> bool:
        return self._closed

    def in_flight(self) -> int | None:
        """Unary calls in flight on the current channel (None if this grpc does not let us see)."""
        calls = active_unary_calls(self._channel)
        return None if calls is None else len(calls)

    @property
    def retiring(self) -> int:
        """Old channels not closed yet (waiting for their unary calls)."""
        return len(self._retiring)

    # ------------------------------------------------------------------ reload

    def reload(self) -> bool:
        """Look at the files now; if they changed to a consistent new set, swap in a new channel.

        Returns whether it swapped. Call it on the event loop (the old channel is retired there).
        """
        if self._closed:
            return False
        creds = self._files.poll()
        if creds is None:
            if self._files.last_error:
                log.debug("client credentials %s not reloaded: %s", self.paths[0], self._files.last_error)
            return False
        self._swap(creds)
        return True

    def request_reload(self) -> None:
        """Ask the maintenance task to look at the files at once (non-blocking)."""
        if self._wake is not None:
            self._wake.set()

    def _swap(self, creds: Credentials) -> None:
        asyncio.get_running_loop()  # before any change: a swap needs the loop to retire
        new = self._build(creds)
        old, self._channel = self._channel, new
        self._creds = creds
        self._cert = x509.load_pem_x509_certificate(creds.cert_pem)
        self._renew_at = self._plan_renewal()
        self.stats.swaps += 1
        log.info(
            "client credentials reloaded (version %d, %s, serial %x, expires %s): new channel to %s; "
            "the old one closes once its in-flight calls are done (at most %gs)",
            creds.version,
            self._cert.subject.rfc4514_string(),
            self._cert.serial_number,
            self._cert.not_valid_after_utc.isoformat(),
            self.target,
            self.close_grace,
        )
        task = self._tasks.spawn(self._retire(old), name=f"retire-channel-{self.target}")
        self._retiring[task] = old  # closed at once by close() if it is cut short
        task.add_done_callback(self._retired)

    def _retired(self, task: asyncio.Task[None]) -> None:
        self._retiring.pop(task, None)

    async def _retire(self, old: grpc.aio.Channel) -> None:
        _, cut = await retire_channel(old, self.close_grace, on_drain=self._draining)
        self.stats.cut_calls += cut
        self.stats.retired += 1

    def _draining(self, calls: int) -> None:
        self.stats.drained_calls += calls

    def _build(self, creds: Credentials) -> grpc.aio.Channel:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=creds.ca_pem, private_key=creds.key_pem, certificate_chain=creds.cert_pem
        )
        return grpc.aio.secure_channel(
            self.target, credentials, options=self._options, interceptors=self._interceptors
        )

    # ------------------------------------------------------------------ renewal point

    def _plan_renewal(self) -> datetime:
        return rotation_deadline(self._cert, self._rng)

    def _seconds_to(self, when: datetime) -> float:
        return when.timestamp() - time.time()

    async def _at_renewal_point(self) -> None:
        self.stats.renewal_points += 1
        cert = self._cert
        log.info(
            "client certificate %s (serial %x) reached its renewal point; expires %s",
            cert.subject.rfc4514_string(),
            cert.serial_number,
            cert.not_valid_after_utc.isoformat(),
        )
        if self._renew_hook is not None:
            try:
                await asyncio.to_thread(self._renew_hook)
            except Exception as e:
                self.stats.reload_errors += 1
                log.error("renewing the client certificate failed: %r", e)

    def _warn_once(self, what: str, message: str, *args: object, level: int = logging.WARNING) -> None:
        key = (self._cert.serial_number, what)
        if key not in self._warned:
            self._warned.add(key)
            log.log(level, message, *args)

    # ------------------------------------------------------------------ lifetime

    def _first_use(self) -> None:
        """Look at the files before the first call, then start polling.

        A source can sit unused for long after it was built: the controller manager's main
        connection carries nothing until it leads. Its channel holds the credentials read at
        construction; after a CA switch and remove those trust only a CA the server no longer
        uses, and the first calls failed the handshake until the first poll swapped them."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self.reload()
        self._start_if_running()

    def _start_if_running(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self._wake = asyncio.Event()
        self._task = self._tasks.spawn(self._maintain(), name=f"channel-source-{self.target}")

    async def start(self) -> ReloadingChannelSource:
        """Start polling (idempotent). `async with` and the first `current()` do this too."""
        if self._closed:
            raise grpc.aio.UsageError("the channel source is closed")
        if self._task is None:
            self._start_if_running()
        return self

    async def _maintain(self) -> None:
        assert self._wake is not None
        renewal_seen: int | None = None
        while True:
            timeout = self._next_wake(renewal_seen)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            serial = self._cert.serial_number
            if renewal_seen != serial and self._seconds_to(self._renew_at) <= 0:
                renewal_seen = serial
                await self._at_renewal_point()
            try:
                swapped = self.reload()
            except Exception as e:  # keep polling whatever one poll did
                self.stats.reload_errors += 1
                log.error("reloading client credentials failed: %r", e)
                continue
            if not swapped and renewal_seen == self._cert.serial_number:
                self._complain_if_stale()

    def _next_wake(self, renewal_seen: int | None) -> float | None:
        """Seconds until the next look at the files: the poll interval, the renewal point of the
        current cert (once), its expiry (once, to say so); None: only when asked."""
        cert = self._cert
        waits = [] if self.poll_interval is None else [self.poll_interval]
        if renewal_seen != cert.serial_number:
            waits.append(self._seconds_to(self._renew_at))
        elif (cert.serial_number, "expired") not in self._warned:
            waits.append(self._seconds_to(cert.not_valid_after_utc))
        return max(0.0, min(waits)) if waits else None

    def _complain_if_stale(self) -> None:
        cert = self._cert
        if self._seconds_to(cert.not_valid_after_utc) <= 0:
            self._warn_once(
                "expired",
                "client certificate %s expired at %s and %s has not been renewed: new connections "
                "will be refused",
                cert.subject.rfc4514_string(),
                cert.not_valid_after_utc.isoformat(),
                self.paths[0],
                level=logging.ERROR,
            )
        else:
            self._warn_once(
                "stale",
                "client certificate %s is past its renewal point and %s has not changed yet "
                "(expires %s); renew it with `kse certs rotate` or a CertRenewer",
                cert.subject.rfc4514_string(),
                self.paths[0],
                cert.not_valid_after_utc.isoformat(),
            )

    async def close(self, grace: float | None = None) -> None:
        """Stop polling and close every channel: the current one with `grace` (as
        `grpc.aio.Channel.close`), old ones being retired at once."""
        if self._closed:
            return
        self._closed = True
        self._task = None
        retiring = dict(self._retiring)
        await self._tasks.aclose()
        for channel in retiring.values():
            await channel.close(grace=None)
        await self._channel.close(grace)

    async def channel_ready(self) -> None:
        """Wait until the current channel is connected (as `grpc.aio.Channel.channel_ready`)."""
        await self.current().channel_ready()

    async def __aenter__(self) -> ReloadingChannelSource:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return (
            f"ReloadingChannelSource({self.target}, {self.paths[0]}, version {self._creds.version}, "
            f"{'closed' if self._closed else 'open'})"
        )
