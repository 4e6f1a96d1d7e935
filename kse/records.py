"""Records that several processes write and the chaos checker reads, as JSON lines.

A client's failed RPCs (`RpcErrorRecord`, written by `RpcErrorRecorder` from the client
interceptor in `kse.client.rpc_errors`) live here, below every process that writes them, and the
JSON-lines writer and reader they share with the chaos history (`chaos.history`). The API server's
audit records are `kse.audit`.

JSON-lines files are appended one flushed line per record, so a process killed mid-write leaves at
most one torn last line, which `read_jsonl` skips.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from kse import apierrors

__all__ = [
    "APPLICATION_CODES",
    "JsonlWriter",
    "RpcErrorRecord",
    "RpcErrorRecorder",
    "read_jsonl",
]

# gRPC codes that are the server's answer to the request itself (conflicts, missing objects, broken
# fences, invalid input, compacted revisions): a call that got one reached the server over a working
# TLS session, so it cannot have been broken by a certificate rotation.
APPLICATION_CODES: frozenset[str] = frozenset(
    row.grpc_code.name
    for row in (
        apierrors.CONFLICT,
        apierrors.ALREADY_EXISTS,
        apierrors.NOT_FOUND,
        apierrors.FENCED,
        apierrors.INVALID,
        apierrors.EXPIRED,
    )
)


@dataclass(frozen=True, slots=True)
class RpcErrorRecord:
    """One RPC that failed as a client saw it: `code` is the gRPC status code name."""

    ts: float
    client: str
    method: str
    code: str
    detail: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> RpcErrorRecord:
        data = json.loads(line)
        return cls(
            ts=float(data["ts"]),
            client=str(data.get("client", "")),
            method=str(data.get("method", "")),
            code=str(data["code"]),
            detail=str(data.get("detail", "")),
        )


R = TypeVar("R")


def read_jsonl(path: Path, parse: Callable[[str], R]) -> Iterator[R]:
    """`parse(line)` for every line of a JSON-lines file; unparseable lines (a torn tail) are skipped."""
    with path.open(encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield parse(line)
            except (json.JSONDecodeError, TypeError, KeyError, ValueError):
                continue


class JsonlWriter:
    """Appends records (anything with `to_json()`) to a JSON-lines file, one flushed line per record.

    Lines are written with a single `write` on a file opened in append mode and flushed at once, so a
    process killed at any moment leaves at most one torn last line (which readers skip). One writer
    per process and file: processes must not share a file.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[str] | None = self.path.open("a", encoding="utf-8")

    def append(self, record: Any) -> None:
        if self._f is None:
            raise ValueError(f"{self.path}: writer is closed")
        self._f.write(record.to_json() + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RpcErrorRecorder:
    """Appends an `RpcErrorRecord` per failed RPC of one client (a scheduler replica, the generator).

        errors = RpcErrorRecorder(run_dir / "rpc-errors-scheduler-1.jsonl", "scheduler-1")
        ...
        except grpc.aio.AioRpcError as e:
            errors(method, e.code(), e.details() or "")

    `code` may be a `grpc.StatusCode` (its name is recorded) or a code name.
    """

    def __init__(self, path: Path | str, client: str, *, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self._clock = clock
        self._writer = JsonlWriter(path)

    def __call__(self, method: str, code: object, detail: str = "") -> None:
        name = getattr(code, "name", None) or str(code)
        self._writer.append(RpcErrorRecord(self._clock(), self.client, method, name, detail))

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> RpcErrorRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
