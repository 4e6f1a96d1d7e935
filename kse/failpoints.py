"""Failpoints: named places in the code where a test or a chaos scenario injects a fault, as etcd's
gofail does (github.com/etcd-io/gofail: `// gofail: var name struct{}` comments turned into code,
enabled per name through the GOFAIL_FAILPOINTS environment variable).

Off unless the `KSE_FAILPOINTS` environment variable is set when the process starts (or a test
calls `enable`), and then cheap: every call site is guarded by the module-level boolean

    if failpoints.ENABLED:
        await failpoints.inject("storage/after-commit")

so a disabled failpoint costs one global read and a branch (measured in the README).

The variable is a `;`-separated list of `name=terms`, gofail's syntax where it applies:

    KSE_FAILPOINTS='storage/after-commit=1*crash;watchcache/dispatch=2*drop'

A term is `[N*]action[(arg)]`: the action fires N times (default: every time), then the
failpoint is off. Several terms separated by `->` run in order (`2*off->crash`: the third hit
crashes). Actions:

    off           nothing (a placeholder, with a count: skip the first N hits)
    delay(MS)     sleep MS milliseconds (async call sites), e.g. a slow link or a GC pause
    pause         block until the failpoint is changed (SIGUSR2 re-reads KSE_FAILPOINTS_FILE)
    error(MSG)    raise FailpointError(MSG) at the call site
    crash         exit the process at once (os._exit(137)), as a SIGKILL there would
    drop          the call site skips what it was about to do (a watch event not delivered)
    duplicate     the call site does it twice (a watch event delivered twice)

The call sites, and which actions each supports, are `POINTS` below: the one list of them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "KSE_FAILPOINTS"
ENV_FILE = "KSE_FAILPOINTS_FILE"  # re-read on SIGUSR2: change failpoints of a running process
CRASH_EXIT_CODE = 137

# name -> (where it is, the actions that make sense there)
POINTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "storage/before-commit": (
        "apiserver_mock/storage/store.py: a write's etcd transaction is about to be sent",
        ("delay", "pause", "error", "crash"),
    ),
    "storage/after-commit": (
        "apiserver_mock/storage/store.py: etcd applied the write; the API server has not answered "
        "yet (a crash here is the 'committed but never acknowledged' case)",
        ("delay", "pause", "error", "crash"),
    ),
    "watchcache/dispatch": (
        "apiserver_mock/watchcache/cache.py: one revision's events are about to be offered to the "
        "watchers (drop: not delivered; duplicate: delivered twice)",
        ("drop", "duplicate", "crash"),
    ),
    "service/before-reply": (
        "apiserver_mock/service.py: a unary call has its answer (and its audit record) and is about to reply",
        ("delay", "pause", "error", "crash"),
    ),
    "elector/renew": (
        "kse/leaderelection/elector.py: a leader is about to renew its Lease",
        ("delay", "pause", "error", "crash"),
    ),
    "reflector/deliver-nodes": (
        "kse/client/reflector.py: a node reflector is about to hand a watch batch (or bookmark) to its "
        "informer (pause: the node view stops advancing, as when that watch is down and backing off)",
        ("delay", "pause", "crash"),
    ),
    "binder/bind": (
        "scheduler/binder.py: a bind is about to be sent to the API server",
        ("delay", "pause", "error", "crash"),
    ),
}
ACTIONS = ("off", "delay", "pause", "error", "crash", "drop", "duplicate")


class FailpointError(RuntimeError):
    """What `error(MSG)` raises at a call site."""


class FailpointSpecError(ValueError):
    """A KSE_FAILPOINTS value that does not parse, or names an unknown point or action."""


@dataclass
class Term:
    action: str
    arg: str = ""
    count: int | None = None  # None: forever

    def describe(self) -> str:
        head = f"{self.count}*" if self.count is not None else ""
        return f"{head}{self.action}" + (f"({self.arg})" if self.arg else "")


@dataclass
class Failpoint:
    name: str
    terms: list[Term]
    hits: int = 0
    released: asyncio.Event | None = field(default=None, repr=False)

    def next_action(self) -> Term | None:
        """The term this hit fires (and count it), None when every term is spent."""
        self.hits += 1
        while self.terms:
            term = self.terms[0]
            if term.count is None:
                return term
            if term.count > 0:
                term.count -= 1
                if term.count == 0:
                    self.terms.pop(0)
                return term
            self.terms.pop(0)
        return None


_TERM = re.compile(r"^(?:(\d+)\*)?([a-z]+)(?:\((.*)\))?$")
_active: dict[str, Failpoint] = {}
ENABLED = False


def parse(spec: str) -> dict[str, Failpoint]:
    """`name=terms;...` -> failpoints; FailpointSpecError names what is wrong."""
    out: dict[str, Failpoint] = {}
    for item in (part.strip() for part in spec.split(";")):
        if not item:
            continue
        name, eq, body = item.partition("=")
        name = name.strip()
        if not eq:
            raise FailpointSpecError(f"{item!r}: expected name=action")
        if name not in POINTS:
            raise FailpointSpecError(f"unknown failpoint {name!r} (known: {', '.join(POINTS)})")
        terms = []
        for raw in body.split("->"):
            m = _TERM.match(raw.strip())
            if m is None:
                raise FailpointSpecError(f"{name}: cannot parse {raw.strip()!r} (expected [N*]action[(arg)])")
            count, action, arg = m.group(1), m.group(2), m.group(3) or ""
            if action not in ACTIONS:
                raise FailpointSpecError(f"{name}: unknown action {action!r} (known: {', '.join(ACTIONS)})")
            if action not in ("off", *POINTS[name][1]):
                raise FailpointSpecError(
                    f"{name}: action {action!r} does not apply here (supported: {', '.join(POINTS[name][1])})"
                )
            if action == "delay":
                try:
                    float(arg)
                except ValueError:
                    raise FailpointSpecError(f"{name}: delay needs milliseconds, e.g. delay(200)") from None
            terms.append(Term(action, arg, int(count) if count else None))
        out[name] = Failpoint(name, terms)
    return out


def enable(spec: str) -> None:
    """Replace the active failpoints with `spec` (tests; the process's env at import)."""
    global ENABLED
    old = _active.copy()
    _active.clear()
    _active.update(parse(spec))
    for fp in old.values():  # a paused call site resumes when its failpoint changes
        if fp.released is not None:
            fp.released.set()
    ENABLED = bool(_active)
    if _active:
        log.warning("failpoints enabled: %s", describe())


def disable() -> None:
    enable("")


def describe() -> str:
    return "; ".join(f"{fp.name}={'->'.join(t.describe() for t in fp.terms)}" for fp in _active.values())


def hits(name: str) -> int:
    fp = _active.get(name)
    return fp.hits if fp is not None else 0


def _fire(name: str) -> Term | None:
    fp = _active.get(name)
    if fp is None:
        return None
    term = fp.next_action()
    if term is None or term.action == "off":
        return None
    log.warning("failpoint %s: %s (hit %d)", name, term.describe(), fp.hits)
    if term.action == "crash":
        os._exit(CRASH_EXIT_CODE)
    if term.action == "error":
        raise FailpointError(term.arg or f"failpoint {name}")
    return term


def check(name: str) -> str | None:
    """The synchronous form, for call sites that cannot await: returns "drop" / "duplicate" (the
    caller acts on it), crashes, raises for `error`, None otherwise (delay and pause need `inject`)."""
    term = _fire(name)
    return term.action if term is not None and term.action in ("drop", "duplicate") else None


async def inject(name: str) -> str | None:
    """The async form: sleeps for `delay`, blocks for `pause` until the failpoint changes;
    otherwise as `check`."""
    term = _fire(name)
    if term is None:
        return None
    if term.action == "delay":
        await asyncio.sleep(float(term.arg or 0) / 1000)
        return None
    if term.action == "pause":
        fp = _active[name]
        fp.released = fp.released or asyncio.Event()
        await fp.released.wait()
        return None
    return term.action


def _reload_from_file(*_: object) -> None:
    path = os.environ.get(ENV_FILE)
    if path:
        try:
            enable(Path(path).read_text(encoding="utf-8").strip())
        except (OSError, FailpointSpecError) as e:
            log.error("failpoints: cannot reload %s: %s", path, e)


def install_from_environment() -> None:
    """Read KSE_FAILPOINTS (and arm SIGUSR2 for KSE_FAILPOINTS_FILE); called once at import."""
    spec = os.environ.get(ENV, "")
    if spec:
        enable(spec)
    if os.environ.get(ENV_FILE):
        _reload_from_file()
        try:
            signal.signal(signal.SIGUSR2, _reload_from_file)
        except ValueError:  # not the main thread
            pass


install_from_environment()
