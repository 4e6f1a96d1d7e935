"""The scheduler's HTTP endpoints: ``/healthz``, ``/livez``, ``/readyz`` and ``/metrics``
(upstream serves them on ``--secure-port``; kse serves plain HTTP on ``--metrics-bind-address``).

Health endpoints answer as Kubernetes components do (``k8s.io/apiserver/pkg/server/healthz``):
200 ``ok`` when every check passes; otherwise 500 with one ``[+]name ok`` / ``[-]name failed:
reason withheld`` line per check and ``<endpoint> check failed``. ``?verbose`` lists the checks
on success too; ``/readyz/<check>`` runs one check. A minimal asyncio HTTP/1.1 server: one
request per connection (``Connection: close``), GET and HEAD only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

from kse.scrape import parse_address
from scheduler.metrics import CONTENT_TYPE

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]

MAX_REQUEST_HEAD = 16 * 1024
READ_TIMEOUT = 10.0
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
}


def ping() -> tuple[bool, str]:
    return True, "ok"


class HealthServer:
    """Serves health checks and metrics while the `async with` block runs."""

    def __init__(
        self,
        address: str,
        *,
        healthz: Mapping[str, Check] | None = None,
        readyz: Mapping[str, Check] | None = None,
        metrics: Callable[[], str] | None = None,
    ) -> None:
        self._host, self._port = parse_address(address)
        self._healthz = {"ping": ping, **(healthz or {})}
        self._readyz = {"ping": ping, **(readyz or {})}
        self._metrics = metrics
        self._server: asyncio.Server | None = None
        self.address = ""

    async def __aenter__(self) -> HealthServer:
        self._server = await asyncio.start_server(self._handle, self._host, self._port)
        host, port = self._server.sockets[0].getsockname()[:2]
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        log.info("serving /healthz, /readyz and /metrics on http://%s", self.address)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > MAX_REQUEST_HEAD:
                raise ValueError("request head too large")
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split(" ")
            if len(parts) != 3:
                status, body, ctype = 400, "malformed request line\n", "text/plain"
                method = "GET"
            else:
                method, target = parts[0], parts[1]
                status, body, ctype = self._route(method, target)
            payload = body.encode()
            headers = (
                f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
                f"Content-Type: {ctype}\r\n"
                f"Content-Length: {len(payload)}\r\n"
                "X-Content-Type-Options: nosniff\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(headers.encode() + (b"" if method == "HEAD" else payload))
            await writer.drain()
        except (
            TimeoutError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ConnectionError,
            ValueError,
        ):
            pass
        except Exception:
            log.exception("serving an HTTP request")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _route(self, method: str, target: str) -> tuple[int, str, str]:
        if method not in ("GET", "HEAD"):
            return 405, "method not allowed\n", "text/plain"
        url = urlsplit(target)
        path = url.path.rstrip("/") or "/"
        verbose = "verbose" in parse_qs(url.query, keep_blank_values=True)
        if path == "/metrics":
            if self._metrics is None:
                return 404, "404 page not found\n", "text/plain"
            return 200, self._metrics(), CONTENT_TYPE
        for endpoint, checks in (
            ("healthz", self._healthz),
            ("livez", self._healthz),
            ("readyz", self._readyz),
        ):
            prefix = f"/{endpoint}"
            if path == prefix:
                return self._run_checks(endpoint, checks, verbose)
            if path.startswith(prefix + "/"):
                name = path[len(prefix) + 1 :]
                check = checks.get(name)
                if check is None:
                    return 404, "404 page not found\n", "text/plain"
                return self._run_checks(endpoint, {name: check}, verbose)
        return 404, "404 page not found\n", "text/plain"

    @staticmethod
    def _run_checks(endpoint: str, checks: Mapping[str, Check], verbose: bool) -> tuple[int, str, str]:
        lines: list[str] = []
        failed = False
        for name, check in checks.items():
            try:
                ok, reason = check()
            except Exception as e:
                ok, reason = False, repr(e)
            if ok:
                lines.append(f"[+]{name} ok")
            else:
                failed = True
                lines.append(f"[-]{name} failed: reason withheld")
                log.info("%s check %s failed: %s", endpoint, name, reason)
        if failed:
            return 500, "\n".join(lines) + f"\n{endpoint} check failed\n", "text/plain; charset=utf-8"
        if verbose:
            return 200, "\n".join(lines) + f"\n{endpoint} check passed\n", "text/plain; charset=utf-8"
        return 200, "ok", "text/plain; charset=utf-8"
