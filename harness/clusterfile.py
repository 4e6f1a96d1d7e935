"""D/run/cluster.json: a running cluster described for other processes, as one dataclass that both
writes it (`kse up`, through `harness.up.Cluster`) and reads it (`kse chaos run --attach D`: the
local backend's pids, the runner's connection file, audit log and Lease).

`kse up` rewrites it atomically (a temp file, then rename: a reader sees the old or the new file,
never half of one) whenever a process starts or exits, and removes it when the cluster stops.
Schema (version 1):

    {
      "version": 1,
      "owner_pid": 4242,                      # the `kse up` (or Cluster) process
      "updated_at": "2024-05-01T12:00:00.123+00:00",
      "data_dir": "...", "pki_dir": "...", "run_dir": "...", "logs_dir": "...",
      "connection_file": ".../config.json",   # the admin connection file
      "connections_dir": ".../connections",    # <identity>.json per client identity
      "audit_log": ".../audit/audit.jsonl",   # null when the API server has no --audit-log
      "apiserver": "127.0.0.1:PORT",          # null before it is ready
      "apiserver_http": "127.0.0.1:PORT",     # the Kubernetes HTTP API; null: not served (or not ready)
      "kubeconfig": ".../kubeconfig",         # the admin kubeconfig for it; null: none written
      "etcd_endpoints": ["https://127.0.0.1:PORT"],
      "etcd_tls": true,
      "cert_ttl_s": 600.0,                    # null: long-lived certificates, no renewal
      "lease": {"namespace": "kube-system", "name": "kube-scheduler", "duration_s": 15.0},
      "processes": {                          # every process of the topology, in start order
        "scheduler-1": {
          "role": "scheduler",                # etcd | apiserver | scheduler | nodesim | workload
          "pid": 1234,                        # null while it is not running (exited, in backoff)
          "running": true,
          "paused": false,                    # SIGSTOPped
          "identity": "scheduler-1_0a1b2c3d", # its current lease identity (null for non-schedulers)
          "proxy": "127.0.0.1:PORT",          # the partition proxy it goes through, or null
          "rpc_error_log": ".../rpc-errors-scheduler-1.jsonl",   # or null
          "log": ".../logs/scheduler-1.log"
        }, ...
      }
    }

Reading is lenient about what is *absent*, because `kse datadir init` writes a smaller file for
the compose topology (no version, pids, logs or ports: containers are reached through Docker): a
missing directory defaults to the `kse up` layout around the file (D/run/cluster.json -> D/pki,
D/run, ...), a missing process field to "not known" (`pid` None, `running` = has a pid). What is
*present* must have its type, or `read()` raises `ClusterFileError` naming the field
(`processes.scheduler-1.pid`). Keys it does not know are ignored (a newer writer may add some).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kse.fileio import write_atomic

__all__ = [
    "CLUSTER_FILE_NAME",
    "CLUSTER_FILE_VERSION",
    "ClusterFile",
    "ClusterFileError",
    "LeaseInfo",
    "ProcessEntry",
    "cluster_file_path",
]

CLUSTER_FILE_NAME = "cluster.json"
CLUSTER_FILE_VERSION = 1


class ClusterFileError(ValueError):
    """cluster.json could not be read; the message names the file and the field."""


def cluster_file_path(data_dir: Path | str) -> Path:
    """Where a data dir's cluster.json lives: D/run/cluster.json."""
    return Path(data_dir).expanduser() / "run" / CLUSTER_FILE_NAME


@dataclass(frozen=True)
class LeaseInfo:
    """The scheduler Lease the replicas elect on, and the lease duration they use (None: unknown)."""

    namespace: str = "kube-system"
    name: str = "kube-scheduler"
    duration_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "duration_s": self.duration_s}


@dataclass(frozen=True)
class ProcessEntry:
    """One process of the topology (schema in the module doc)."""

    role: str
    pid: int | None = None
    running: bool = False
    paused: bool = False
    identity: str | None = None
    proxy: str | None = None
    rpc_error_log: str | None = None
    log: str | None = None

    @property
    def live_pid(self) -> int | None:
        """The recorded pid if it is a usable one (the file may be stale: check it still lives)."""
        return self.pid if self.pid is not None and self.pid > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "pid": self.pid,
            "running": self.running,
            "paused": self.paused,
            "identity": self.identity,
            "proxy": self.proxy,
            "rpc_error_log": self.rpc_error_log,
            "log": self.log,
        }


@dataclass(frozen=True)
class ClusterFile:
    """D/run/cluster.json as data (schema in the module doc). Paths are absolute."""

    data_dir: Path
    pki_dir: Path
    run_dir: Path
    logs_dir: Path
    connection_file: Path
    connections_dir: Path
    audit_log: Path | None = None
    apiserver: str | None = None
    # Added after version 1 was fixed: absent in older files, read as None (not served / not known).
    apiserver_http: str | None = None
    kubeconfig: Path | None = None
    etcd_endpoints: tuple[str, ...] = ()
    etcd_tls: bool = True
    cert_ttl_s: float | None = None
    lease: LeaseInfo = field(default_factory=LeaseInfo)
    processes: dict[str, ProcessEntry] = field(default_factory=dict)  # in start order
    owner_pid: int | None = None
    updated_at: str = ""
    version: int = CLUSTER_FILE_VERSION

    # ------------------------------------------------------------------ lookups

    def by_role(self, role: str) -> list[str]:
        """The names of the processes with `role`, in the file's order."""
        return [name for name, p in self.processes.items() if p.role == role]

    # ------------------------------------------------------------------ writing

    def to_json(self) -> dict[str, Any]:
        """The JSON object, keys in the schema's order."""
        return {
            "version": self.version,
            "owner_pid": self.owner_pid,
            "updated_at": self.updated_at,
            "data_dir": str(self.data_dir),
            "pki_dir": str(self.pki_dir),
            "run_dir": str(self.run_dir),
            "logs_dir": str(self.logs_dir),
            "connection_file": str(self.connection_file),
            "connections_dir": str(self.connections_dir),
            "audit_log": str(self.audit_log) if self.audit_log is not None else None,
            "apiserver": self.apiserver,
            "apiserver_http": self.apiserver_http,
            "kubeconfig": str(self.kubeconfig) if self.kubeconfig is not None else None,
            "etcd_endpoints": list(self.etcd_endpoints),
            "etcd_tls": self.etcd_tls,
            "cert_ttl_s": self.cert_ttl_s,
            "lease": self.lease.to_json(),
            "processes": {name: p.to_json() for name, p in self.processes.items()},
        }

    def write(self, path: Path) -> None:
        """Replace `path` atomically (temp file + rename). Raises OSError."""
        write_atomic(path, json.dumps(self.to_json(), indent=1) + "\n")

    # ------------------------------------------------------------------ reading

    @classmethod
    def read(cls, path: Path | str) -> ClusterFile:
        """Parse `path` (see the module doc for what may be absent). Raises ClusterFileError, also
        when the file cannot be read (its message says which file and why)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ClusterFileError(f"cannot read {path}: {e}") from e
        return cls.from_json(data, path)

    @classmethod
    def load(cls, data_dir: Path | str) -> ClusterFile:
        """The cluster.json of a data dir (D/run/cluster.json)."""
        return cls.read(cluster_file_path(data_dir))

    @classmethod
    def from_json(cls, data: object, path: Path) -> ClusterFile:
        """From the parsed JSON of the file at `path` (whose location gives the layout defaults)."""
        r = _Reader(path)
        if not isinstance(data, dict):
            raise ClusterFileError(f"{path}: must be a JSON object, got {_kind(data)}")
        version = r.integer(data, "version", CLUSTER_FILE_VERSION)
        if version != CLUSTER_FILE_VERSION:
            r.fail("version", f"unsupported version {version} (this kse reads {CLUSTER_FILE_VERSION})")
        raw_procs = data.get("processes")
        if not isinstance(raw_procs, dict):
            raise ClusterFileError(f"{path}: no `processes` mapping")
        run_dir = r.path(data, "run_dir", path.parent)
        data_dir = r.path(data, "data_dir", run_dir.parent)
        return cls(
            version=version,
            owner_pid=r.optional_int(data, "owner_pid"),
            updated_at=r.string(data, "updated_at") or "",
            data_dir=data_dir,
            pki_dir=r.path(data, "pki_dir", data_dir / "pki"),
            run_dir=run_dir,
            logs_dir=r.path(data, "logs_dir", data_dir / "logs"),
            connection_file=r.path(data, "connection_file", data_dir / "config.json"),
            connections_dir=r.path(data, "connections_dir", data_dir / "connections"),
            audit_log=r.optional_path(data, "audit_log"),
            apiserver=r.string(data, "apiserver"),
            apiserver_http=r.string(data, "apiserver_http"),
            kubeconfig=r.optional_path(data, "kubeconfig"),
            etcd_endpoints=tuple(r.strings(data, "etcd_endpoints")),
            etcd_tls=r.boolean(data, "etcd_tls", True),
            cert_ttl_s=r.optional_number(data, "cert_ttl_s"),
            lease=r.lease(data.get("lease")),
            processes={str(name): r.process(str(name), entry) for name, entry in raw_procs.items()},
        )


def _kind(v: object) -> str:
    return "null" if v is None else type(v).__name__


class _Reader:
    """Typed reads of one cluster.json, every error naming the file and the field."""

    def __init__(self, path: Path) -> None:
        self.file = path

    def fail(self, where: str, message: str) -> None:
        raise ClusterFileError(f"{self.file}: {where}: {message}")

    def _get(self, data: dict[str, Any], key: str, types: tuple[type, ...], what: str, where: str) -> Any:
        v = data.get(key)
        if v is None:
            return None
        if (isinstance(v, bool) and bool not in types) or not isinstance(v, types):
            self.fail(where or key, f"must be {what}, got {_kind(v)} {v!r}")
        return v

    def string(self, data: dict[str, Any], key: str, where: str = "") -> str | None:
        return self._get(data, key, (str,), "a string", where)  # type: ignore[no-any-return]

    def strings(self, data: dict[str, Any], key: str) -> list[str]:
        v = self._get(data, key, (list,), "a list of strings", key) or []
        for i, item in enumerate(v):
            if not isinstance(item, str):
                self.fail(f"{key}[{i}]", f"must be a string, got {_kind(item)} {item!r}")
        return list(v)

    def integer(self, data: dict[str, Any], key: str, default: int, where: str = "") -> int:
        v = self._get(data, key, (int,), "an integer", where)
        return default if v is None else int(v)

    def optional_int(self, data: dict[str, Any], key: str, where: str = "") -> int | None:
        v = self._get(data, key, (int,), "an integer or null", where)
        return None if v is None else int(v)

    def optional_number(self, data: dict[str, Any], key: str, where: str = "") -> float | None:
        v = self._get(data, key, (int, float), "a number or null", where)
        if v is not None and not math.isfinite(v):
            self.fail(where or key, f"must be finite, got {v!r}")
        return None if v is None else float(v)

    def boolean(self, data: dict[str, Any], key: str, default: bool, where: str = "") -> bool:
        v = self._get(data, key, (bool,), "true or false", where)
        return default if v is None else bool(v)

    def path(self, data: dict[str, Any], key: str, default: Path) -> Path:
        v = self.string(data, key)
        return Path(v) if v else default

    def optional_path(self, data: dict[str, Any], key: str) -> Path | None:
        v = self.string(data, key)
        return Path(v) if v else None

    def lease(self, raw: object) -> LeaseInfo:
        if raw is None:
            return LeaseInfo()
        if not isinstance(raw, dict):
            self.fail("lease", f"must be an object, got {_kind(raw)}")
        assert isinstance(raw, dict)
        d = LeaseInfo()
        return LeaseInfo(
            namespace=self.string(raw, "namespace", "lease.namespace") or d.namespace,
            name=self.string(raw, "name", "lease.name") or d.name,
            duration_s=self.optional_number(raw, "duration_s", "lease.duration_s"),
        )

    def process(self, name: str, raw: object) -> ProcessEntry:
        where = f"processes.{name}"
        if not isinstance(raw, dict):
            self.fail(where, f"must be an object, got {_kind(raw)}")
        assert isinstance(raw, dict)
        pid = self.optional_int(raw, "pid", f"{where}.pid")
        return ProcessEntry(
            role=self.string(raw, "role", f"{where}.role") or "",
            pid=pid,
            running=self.boolean(raw, "running", pid is not None, f"{where}.running"),
            paused=self.boolean(raw, "paused", False, f"{where}.paused"),
            identity=self.string(raw, "identity", f"{where}.identity"),
            proxy=self.string(raw, "proxy", f"{where}.proxy"),
            rpc_error_log=self.string(raw, "rpc_error_log", f"{where}.rpc_error_log"),
            log=self.string(raw, "log", f"{where}.log"),
        )
