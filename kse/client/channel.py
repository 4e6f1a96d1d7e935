"""mTLS channels to the API server.

A channel is built from a `ConnectionFile` (or the path of one). The cert, key and CA bundle are read
when the channel is built, so picking up rotated files means building a new channel and moving
callers over to it (grpcio has no client-side reload; see DEPENDENCIES.md). That is what
`channel_source_from_connection` does: it returns a `ReloadingChannelSource`
(kse.client.credentials), which a `Clientset` takes in place of a channel and which closes like one:

    channel = secure_channel(conn)                       # fixed credentials
    channel = channel_source_from_connection(conn)       # follows the files (rotation, renewal)
    cs = Clientset(channel, ...)
    ...
    await channel.close()
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from kse.config import ConnectionFile

if TYPE_CHECKING:
    from kse.client.credentials import ReloadingChannelSource

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # what a client sends (the server accepts 16 MiB)
MAX_RECEIVE_BYTES = 256 * 1024 * 1024  # what it accepts: large lists (the server sends up to 256 MiB)

# Keepalive: a dead server (or a partition) is noticed within ~40 s on an idle connection. The API
# server permits pings this often (see apiserver_mock.server).
DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_RECEIVE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)


def channel_credentials(conn: ConnectionFile) -> grpc.ChannelCredentials:
    """TLS credentials presenting the client identity of `conn` and trusting its CA bundle."""
    return grpc.ssl_channel_credentials(
        root_certificates=Path(conn.ca_file).read_bytes(),
        private_key=Path(conn.key_file).read_bytes(),
        certificate_chain=Path(conn.cert_file).read_bytes(),
    )


def channel_options(conn: ConnectionFile, options: Sequence[tuple[str, Any]] = ()) -> list[tuple[str, Any]]:
    """DEFAULT_OPTIONS plus the TLS name override, with `options` taking precedence by key."""
    return merge_options(conn.tls_server_name, options)


def merge_options(tls_server_name: str, options: Sequence[tuple[str, Any]] = ()) -> list[tuple[str, Any]]:
    """DEFAULT_OPTIONS, the TLS name override (if any), then `options`, later keys winning."""
    merged: dict[str, Any] = dict(DEFAULT_OPTIONS)
    if tls_server_name:
        merged["grpc.ssl_target_name_override"] = tls_server_name
    merged.update(dict(options))
    return list(merged.items())


def secure_channel(
    conn_or_path: ConnectionFile | str | os.PathLike[str],
    *,
    options: Sequence[tuple[str, Any]] = (),
    interceptors: Sequence[grpc.aio.ClientInterceptor] | None = None,
) -> grpc.aio.Channel:
    """A `grpc.aio` mTLS channel to the API server (not yet connected; `await ch.channel_ready()`)."""
    conn = conn_or_path if isinstance(conn_or_path, ConnectionFile) else ConnectionFile.load(conn_or_path)
    return grpc.aio.secure_channel(
        conn.server,
        channel_credentials(conn),
        options=channel_options(conn, options),
        interceptors=interceptors,
    )


def channel_source_from_connection(
    conn_or_path: ConnectionFile | str | os.PathLike[str],
    *,
    options: Sequence[tuple[str, Any]] = (),
    interceptors: Sequence[grpc.aio.ClientInterceptor] | None = None,
    **reload: Any,
) -> ReloadingChannelSource:
    """Like `secure_channel`, but the result follows the connection's cert, key and CA bundle files.

    A drop-in where a `secure_channel(conn)` result goes to a `Clientset` and is closed with
    `close()`. `reload` passes `poll_interval`, `close_grace`, `renew` to `ReloadingChannelSource`.
    Raises OSError (ClientCredentialsError) when the files cannot be read.
    """
    from kse.client.credentials import ReloadingChannelSource

    conn = conn_or_path if isinstance(conn_or_path, ConnectionFile) else ConnectionFile.load(conn_or_path)
    return ReloadingChannelSource(
        conn.cert_file,
        conn.key_file,
        conn.ca_file,
        conn.server,
        tls_server_name=conn.tls_server_name,
        options=options,
        interceptors=interceptors,
        **reload,
    )
