"""What `kse apply | create | get | delete` share: connecting, writing output, kubectl's error wording.

Every command runs its body with `run`: connect with the connection file (`--config`, else
$KSE_CONFIG, else ~/.kse/config.json), run, close, and turn every expected failure into kubectl's
message and exit code 1; never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TextIO

from kse import printers
from kse.client.clientset import Clientset, RetryPolicy
from kse.client.errors import ApiError, UnavailableError
from kse.objects.kinds import Kind, UnknownKindError, lookup_resource

CLI_USER_AGENT = "kse-cli/0.1"


@dataclass
class Out:
    """Where a command writes; an error flips the exit code to 1."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    failed: bool = False

    def line(self, text: str) -> None:
        self.stdout.write(text if text.endswith("\n") else text + "\n")
        self.stdout.flush()

    def write(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    def error(self, text: str) -> None:
        self.failed = True
        self.stderr.write(text.rstrip("\n") + "\n")
        self.stderr.flush()

    def note(self, text: str) -> None:
        self.stderr.write(text.rstrip("\n") + "\n")
        self.stderr.flush()


def error_text(err: ApiError) -> str:
    """kubectl's wording for a server error."""
    if isinstance(err, UnavailableError):
        return f"Unable to connect to the server: {err.message}"
    return err.kubectl_message()


def run(args: argparse.Namespace, body: Callable[[Clientset, Out], Awaitable[None]]) -> int:
    """Connect, run `body`, close; map every expected failure to a message and exit code 1."""
    out = Out()
    try:
        asyncio.run(_with_clientset(args, body, out))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except ApiError as e:
        out.error(error_text(e))
    except CommandError as e:
        out.error(f"error: {e}")
    return 1 if out.failed else 0


class CommandError(Exception):
    """A usage or local error, printed as kubectl does: `error: ...`."""


async def _with_clientset(
    args: argparse.Namespace, body: Callable[[Clientset, Out], Awaitable[None]], out: Out
) -> None:
    from kse.client.channel import channel_source_from_connection
    from kse.config import ConfigError, ConnectionFile, resolve

    try:
        conn = ConnectionFile.load(resolve(args.config))
        # Follows the credential files, so a long `kse get -w` survives a rotation (its watch
        # resumes on the new channel from the last revision printed).
        channel = channel_source_from_connection(conn, options=[("grpc.primary_user_agent", CLI_USER_AGENT)])
    except ConfigError as e:
        raise CommandError(str(e)) from None
    except OSError as e:
        raise CommandError(f"cannot read client credentials: {e}") from None
    timeout = float(args.request_timeout)
    cs = Clientset(
        channel,
        qps=0,  # one person at a terminal: no client-side throttling
        burst=0,
        user_agent=CLI_USER_AGENT,
        timeout=timeout,
        retry=RetryPolicy(deadline=min(timeout, 5.0)),
    )
    try:
        await body(cs, out)
    finally:
        await channel.close(grace=None)


def describe(kind: Kind, name: str) -> str:
    """kubectl's `pod/nginx` / `priorityclass.scheduling.k8s.io/high` object label."""
    return printers.resource_name(kind, name)


def quoted(kind: Kind, name: str) -> str:
    """kubectl delete's `pod "nginx"` form."""
    prefix = kind.kind.lower() + (f".{kind.group}" if kind.group else "")
    return f'{prefix} "{name}"'


def from_server(err: ApiError, doing: str, source: str) -> str:
    if isinstance(err, UnavailableError):
        return error_text(err)
    return f'Error from server ({err.reason}): error when {doing} "{source}": {err.message}'


def lookup(resource: str) -> Kind:
    try:
        return lookup_resource(resource)
    except UnknownKindError:
        raise CommandError(f'the server doesn\'t have a resource type "{resource}"') from None
