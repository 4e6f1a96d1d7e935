"""Free TCP ports for the servers we start: tests run in parallel, so no code path uses a fixed port.

A port is free when we can bind it; we then close it and hand the number out, so a race with
another process is possible and starters retry on "address already in use" (`start_cluster` does).

Ports are drawn at random *below* the kernel's ephemeral range (ip_local_port_range, normally
32768-60999) rather than with `bind(0)`, which returns a port *inside* it: that range is also where
every outgoing connection takes its local port, and a server we restart on the same port (an etcd
member after a kill) would then race every client connection on the machine for it. Where the range
leaves no room below it, `bind(0)` is used.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 10_000
_TRIES = 200
_handed_out: set[int] = set()  # never give the same port twice in one process


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now (see the module doc for the race)."""
    highest = _ephemeral_floor() - 1
    rng = random.SystemRandom()
    if highest - _LOWEST >= 1000:
        for _ in range(_TRIES):
            port = rng.randint(_LOWEST, highest)
            if port not in _handed_out and _bindable(host, port):
                _handed_out.add(port)
                return port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(_TRIES):
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise OSError(f"no free TCP port found on {host}")


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct free ports."""
    return [free_port(host) for _ in range(count)]
