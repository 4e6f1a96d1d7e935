"""A component's HTTP endpoints: ``/healthz``, ``/livez``, ``/readyz`` and ``/metrics``, shared by
``kse scheduler`` and ``kse controller-manager`` (upstream serves them on ``--secure-port``; kse
serves plain HTTP on ``--metrics-bind-address``).

With ``pprof`` (``--profiling``, the default) it also serves ``/debug/pprof/`` (``kse.pprof``):
CPU profiles of the live process, every thread's and task's stack, the heap by type and, with
``--contention-profiling``, what blocks the event loop.

Health endpoints answer as Kubernetes components do (``k8s.io/apiserver/pkg/server/healthz``):
200 ``ok`` when every check passes; otherwise 500 with one ``[+]name ok`` / ``[-]name failed:
reason withheld`` line per check and ``<endpoint> check failed``. ``?verbose`` lists the checks
on success too; ``/readyz/<check>`` runs one check. GET and HEAD only (405 otherwise).

HTTP itself is aiohttp's (``aiohttp.web`` behind an `AppRunner`, one `TCPSite`), as for every
kse HTTP endpoint; the routing below is ours: one catch-all route, so a trailing slash and the
404/405 bodies behave as they always have.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import TracebackType
from urllib.parse import parse_qs

from aiohttp import web

from kse.pprof import Pprof
from kse.scrape import parse_address

__all__ = ["CONTENT_TYPE", "Check", "HealthServer", "parse_address", "ping"]

# The Prometheus text format 0.0.4, as `prometheus_client.generate_latest` writes it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]

# How long leaving the `async with` waits for a scrape still being answered.
SHUTDOWN_TIMEOUT = 1.0


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
        pprof: Pprof | None = None,
    ) -> None:
        self._host, self._port = parse_address(address)
        self._healthz = {"ping": ping, **(healthz or {})}
        self._readyz = {"ping": ping, **(readyz or {})}
        self._metrics = metrics
        self._pprof = pprof
        self._runner: web.AppRunner | None = None
        self.address = ""

    async def __aenter__(self) -> HealthServer:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        # No access log: Prometheus scrapes every few seconds and probes more often.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._host, self._port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        host, port = runner.addresses[0][:2]
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        self.address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        log.info(
            "serving /healthz, /readyz and /metrics%s on http://%s",
            " and /debug/pprof/" if self._pprof is not None else "",
            self.address,
        )
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        data: bytes
        if self._pprof is not None and self._pprof.handles(request.path):
            status, data, ctype = await self._pprof.answer(request.method, request.path, request.query_string)
        else:
            status, body, ctype = self._route(request.method, request.path, request.query_string)
            data = body.encode()
        # aiohttp sends no body for HEAD but keeps the Content-Length of the GET.
        return web.Response(
            status=status,
            body=data,
            headers={"Content-Type": ctype, "X-Content-Type-Options": "nosniff"},
        )

    def _route(self, method: str, path: str, query: str) -> tuple[int, str, str]:
        """(status, body, content type) for one request, as the hand-written server answered."""
        if method not in ("GET", "HEAD"):
            return 405, "method not allowed\n", "text/plain"
        path = path.rstrip("/") or "/"
        verbose = "verbose" in parse_qs(query, keep_blank_values=True)
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
