"""Benchmark settings, one dataclass per benchmark. Kept free of heavy imports: the CLI reads the
defaults for its `--help` without importing grpc or the benchmark itself."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiServerBenchConfig:
    """`kse bench apiserver` (see harness.bench.apiserver for what each phase does)."""

    duration: float = 10.0  # seconds of the etcd phase and of the watch phase
    pods: int = 3000  # pre-created, then bound
    inflight: int = 64  # concurrent calls in the etcd and bind phases (split over client_procs)
    watchers: int = 3
    rate: float = 500.0  # writes per second in the watch phase
    nodes: int = 10
    # Processes generating the etcd and bind load. None (auto): one, and a phase whose single client
    # process saturates a core is repeated with two, keeping the higher figure.
    client_procs: int | None = None
    value_size: int = 256  # bytes per etcd value in the CAS phase
    # The bind phase's calls: "batch" through the clientset, as the scheduler binds (binds in
    # flight coalesced into BindBatch calls, kse.client.batcher); "unary": one Bind per pod.
    bind_call: str = "batch"
    # The watch phase's writer: "batch" through a clientset that coalesces the creates in flight
    # into CreateBatch calls (kse.client.batcher); "unary": one raw Create call per write.
    write_call: str = "batch"
    list_pods: int = 5000  # pods in the namespace LISTed over HTTP (topped up past `pods`)
    list_repeats: int = 10  # LISTs timed; http_list_ms_p50 is their median
    keep: bool = False  # keep the temp dir
    apiserver_args: tuple[str, ...] = ()  # extra flags for the API server (A/B of its settings)

    def __post_init__(self) -> None:
        for name in ("duration", "rate"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("pods", "inflight", "watchers", "nodes", "value_size", "list_pods", "list_repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("bind_call", "write_call"):
            if getattr(self, name) not in ("batch", "unary"):
                raise ValueError(f"{name} must be 'batch' or 'unary', got {getattr(self, name)!r}")
        if self.client_procs is not None and self.client_procs < 1:
            raise ValueError(f"client_procs must be >= 1 (or None: auto), got {self.client_procs}")
        if self.inflight < (self.client_procs or 2):
            raise ValueError(
                f"inflight ({self.inflight}) must be >= client processes ({self.client_procs or 2})"
            )
