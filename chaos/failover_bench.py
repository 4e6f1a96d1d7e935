"""`kse bench failover`: how long the scheduler is leaderless when its leader fails, and whether
anything unsafe got through meanwhile.

The benchmark is a generator on the chaos pipeline that `kse chaos run` uses (DESIGN.md: a
generator, a nemesis, a checker reading the history afterwards):

1. `failover_rounds(cfg)` is the generator: `trials` rounds (`chaos.scenario.Round`), each
   - wait for a stable leader (`chaos.waits`: every replica ready, a live holder, binds by it, a
     renewal on its regular cycle), then a seeded random delay in [0, retryPeriod) so that faults
     land at every phase of the renew cycle;
   - fault the current leader (`chaos.scenario.FaultSpec`, target `leader`): `kill` SIGKILL;
     `term` SIGTERM (the leader hands over and releases the lease); `stop` SIGSTOP for
     leaseDuration + a margin, and until another replica holds the lease, then SIGCONT;
   - wait for a new holder and its first binds;
   - wait for the faulted replica to come back: restarted by its supervisor (short backoff), or,
     after a `stop` with `--on-lost-lease standby`, the same process reporting itself not leading;
     ready again.
2. `run` starts a `kse up` cluster (`harness.up.Cluster`: etcd, the API server with fencing and an
   audit log, 3 scheduler replicas, nodesim, a steady workload with churn) under a temp dir and
   hands it with the rounds to the run driver (`chaos.runner.Drive`, `chaos.runner.drive_cluster`),
   which injects each fault through the nemesis (`chaos.nemesis.Nemesis`, over a
   `chaos.local_backend.LocalBackend`) and writes the history files (`chaos.history`: faults.jsonl,
   the driver's watch deliveries and failed RPCs, final.json) beside the API server's audit log.
3. `chaos.failover_report.analyze` judges the history with the checkers (`chaos.checker`: the
   failover timings fault -> acquire, takeable -> acquire and the bind gap; stale writes accepted /
   rejected, double binds, over-committed nodes) and builds the result (the `--json` object);
   `chaos.failover_report` also renders the tables and the report. Timings come from the history
   only; the waits just pace the trials. Meanwhile `_Measurements` samples CPU, run-queue waits
   and etcd's disk latency (`chaos.host_probes`) for the diagnostics.

    kse bench failover --trials 10 --fault kill --json
    python -m chaos.failover_bench --trials 3 --fault stop --lease-duration 2 --renew-deadline 1.5 \
        --retry-period 0.5 --nodes 5 --rate 5

`register(sub)` adds the `failover` subparser to `kse bench`; `main(argv)` runs it stand-alone.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Only the standard library and the (stdlib-only) report module here: `kse bench` imports this module
# to build its parser, and `kse --help` must stay fast. The cluster, the client, the pipeline and
# the checker are imported by the functions that run the benchmark.
from chaos.cluster_setup import fencing_args
from chaos.failover_report import (
    Trial,
    analyze,
    format_compare,
    format_table,
    ratio,
    write_compare_report,
    write_report,
)
from kse.durations import DurationFlag
from kse.flags.argtypes import positive_float, positive_int
from kse.flags.election_args import ELECTION_FLAGS, add_election_flags, in_flag_words

if TYPE_CHECKING:
    from chaos.history import History
    from chaos.host_probes import RunQueueMeter
    from chaos.runner import RoundResult
    from chaos.scenario import FaultSpec, Round
    from harness.bench.common import CpuMeter
    from harness.shape import ClusterShape
    from harness.up import Cluster

    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = [
    "FAULTS",
    "BenchError",
    "FailoverBenchConfig",
    "build_parser",
    "failover_rounds",
    "main",
    "register",
    "run",
    "run_compare",
]

# CLI name -> FaultRecord.fault (chaos.history's KILL, TERMINATE, STOP)
# `zombie`: the leader's link to the API server held back (the partition proxy's delay mode) for
# longer than the lease while it keeps scheduling, so its binds land after a successor holds the
# lease: what fencing exists for (a paused leader, `stop`, never writes after it wakes).
FAULTS: dict[str, str] = {"kill": "kill", "term": "terminate", "stop": "stop", "zombie": "partition"}
# A field of the bench's cluster shape (harness.shape) -> the flag that sets it.
SHAPE_FLAGS: dict[str, str] = {"nodes": "--nodes", "rate": "--rate", **ELECTION_FLAGS}
SAFETY_EXIT_CODE = 3  # the run went through, and a write got past the safety checks
SETTLE_S = 5.0  # after the workload stops: how long the leader gets to bind what is pending
SETTLE_FRACTION = 0.8  # --settle: the share of --rate the new leader must bind at before the next fault


class BenchError(RuntimeError):
    """The benchmark could not be carried out (the cluster cannot serve it, or did not come up)."""


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class FailoverBenchConfig:
    """One run's settings (the CLI's flags), flat as the flags and the `--json` keys are. The
    cluster and election part is `shape()`, validated once by the harness's shape (construction
    raises its `ShapeError`, a ValueError naming the field); `problems()` adds the bench's own
    checks."""

    fault: str = "kill"
    election: str = "watch"
    trials: int = 10
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    nodes: int = 20
    rate: float = 20.0
    seed: int = 0
    fencing: bool = True
    on_lost_lease: str = "exit"
    stop_margin: float | None = None  # `stop`: paused for leaseDuration + this (default retry + 1 s)
    # --settle S: after each trial, wait until the new leader binds at SETTLE_FRACTION x rate over
    # S s before the next fault (0: the next trial starts once the hit replica is back).
    settle: float = 0.0
    keep: bool = False
    apiserver_args: tuple[str, ...] = ()  # extra flags, for experiments (e.g. --bookmark-interval)
    scheduler_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.shape()

    def shape(self) -> ClusterShape:
        """The cluster the bench runs (3 replicas) and its election, as `harness.shape` checks them."""
        from harness.shape import ClusterShape, election_from_flags

        return ClusterShape(replicas=3, nodes=self.nodes, rate=self.rate, election=election_from_flags(self))

    def problems(self) -> list[str]:
        """What the bench itself needs beyond a valid shape: a fault it knows, a trial, a fleet and
        a workload to fail over under."""
        out = []
        if self.fault not in FAULTS:
            out.append(f"fault must be one of {', '.join(FAULTS)}, got {self.fault!r}")
        if self.trials < 1:
            out.append(f"trials must be >= 1, got {self.trials}")
        if self.nodes < 1:
            out.append(f"nodes must be >= 1, got {self.nodes}")
        if self.rate <= 0:
            out.append(f"rate must be > 0, got {self.rate:g}")
        if self.stop_margin is not None and self.stop_margin < 0:
            out.append(f"stop margin must be >= 0, got {self.stop_margin:g}")
        if self.settle < 0:
            out.append(f"settle must be >= 0, got {self.settle:g}")
        return out

    @property
    def stop_for(self) -> float:
        """How long `stop` keeps the leader paused (at least; and until another replica holds the lease)."""
        margin = self.retry_period + 1.0 if self.stop_margin is None else self.stop_margin
        return self.lease_duration + margin

    @property
    def zombie_delay(self) -> float:
        """`zombie`: how long each byte of the leader's link is held back: past the lease and two
        retry periods, so even a bind sent the moment the fault starts lands after a takeover."""
        return self.lease_duration + 2 * self.retry_period + 1.0

    @property
    def delete_after(self) -> float:
        """Workload churn: each pod is deleted this long after it runs, so about half of the fleet's
        capacity (40 default pods a node: 4 CPU / 100m) is in use at the steady rate."""
        from chaos.cluster_setup import churn_delete_after

        return churn_delete_after(self.nodes, self.rate)

    @property
    def takeover_within(self) -> float:
        """The longest a takeover may take before the trial is declared stuck."""
        return self.lease_duration + 2.2 * self.retry_period * 3 + 15.0


# ---------------------------------------------------------------------------------------------- generator


def failover_rounds(cfg: FailoverBenchConfig) -> list[Round]:
    """The generator: `cfg.trials` leader faults, each after a stable leader (see the module doc)."""
    from chaos.scenario import (
        NEW_LEADER,
        RECOVERED,
        RESTARTED,
        STABLE_LEADER,
        STANDBY,
        STEADY_THROUGHPUT,
        FaultSpec,
        Round,
        WaitSpec,
    )

    stop = cfg.fault == "stop"
    if cfg.fault == "zombie":
        fault = FaultSpec(
            fault="partition",
            target="leader",
            mode="delay-up",
            delay=cfg.zombie_delay,
            duration=cfg.zombie_delay,
            until=NEW_LEADER,
        )
    else:
        fault = FaultSpec(
            fault=cfg.fault,
            target="leader",
            duration=cfg.stop_for if stop else None,
            until=NEW_LEADER if stop else None,
        )
    # A continued leader with --on-lost-lease standby stays the same process; otherwise every
    # faulted leader exits (or is killed) and its supervisor starts it again.
    back = STANDBY if stop and cfg.on_lost_lease == "standby" else RESTARTED
    steps: tuple[FaultSpec | WaitSpec, ...] = (
        WaitSpec(STABLE_LEADER, within=60.0 + cfg.lease_duration, jitter=cfg.retry_period),
        fault,
        WaitSpec(NEW_LEADER, within=max(cfg.takeover_within, 30.0 + cfg.lease_duration)),
        WaitSpec(RECOVERED, within=150.0, expect=back),
    )
    if cfg.settle > 0:
        rate = SETTLE_FRACTION * cfg.rate
        steps += (WaitSpec(STEADY_THROUGHPUT, within=60.0 + cfg.settle, rate=rate, window=cfg.settle),)
    return [Round(f"trial {i}/{cfg.trials}", steps) for i in range(1, cfg.trials + 1)]


def trials_from_rounds(rounds: Sequence[RoundResult]) -> list[Trial]:
    """One `Trial` per round whose fault was injected: the fault from its records (target, the
    leader's identity and term, the fault's time, a stop's SIGCONT), the rest from its waits."""
    from chaos.history import PHASE_END
    from chaos.scenario import NEW_LEADER, RECOVERED

    trials = []
    for n, r in enumerate(rounds, start=1):
        starts = [f for f in r.faults if f.detail.get("phase") != PHASE_END]
        if not starts:
            continue  # the round ended before its fault
        f = starts[0]
        ends = [e.ts for e in r.faults if e.detail.get("phase") == PHASE_END]
        trials.append(
            Trial(
                index=n,
                target=f.target,
                identity=str(f.detail.get("identity", "")),
                transitions=int(f.detail.get("lease_transitions", -1)),
                fault_ts=f.ts,
                new_identity=r.waits.get(NEW_LEADER, ""),
                resumed_ts=ends[0] if ends else None,
                back=r.waits.get(RECOVERED, ""),
                wall_s=r.wall_s if r.error is None else 0.0,
            )
        )
    return trials


# ---------------------------------------------------------------------------------------------- measurements


class _Measurements:
    """A `chaos.runner.DriveObserver` that samples the machine while the trials run: CPU per
    process, the schedulers' CPU, run-queue waits (before each fault, so a replica's pid is seen
    before it is killed, and after each trial), and etcd's disk latency before and after."""

    def __init__(self, cluster: Cluster, say: Callable[[str], None]) -> None:
        self.cluster = cluster
        self.say = say
        self.cpu: dict[str, float] = {}
        self.host: dict[str, Any] = {}
        self.notes: list[str] = []
        self._meter: CpuMeter | None = None
        self._run_queue: RunQueueMeter | None = None
        self._etcd0: dict[str, dict[float, float]] | None = None
        self._sched_cpu0 = 0.0
        self._began = time.monotonic()

    def _sample(self) -> None:
        from chaos.host_probes import cluster_pids

        if self._run_queue is not None:
            self._run_queue.sample(cluster_pids(self.cluster))

    async def started(self) -> None:
        from chaos.host_probes import RunQueueMeter, etcd_histograms, probe, scheduler_cpu_seconds
        from harness.bench.common import CpuMeter

        c = self.cluster
        self._meter = CpuMeter(
            {
                "apiserver": c.apiserver.pid if c.apiserver else None,
                **{m.name: m.managed.pid for m in c.etcd_members},
                "nodesim": c.nodesim.pid if c.nodesim else None,
                "workload": c.workload.pid if c.workload else None,
            }
        )
        self._sched_cpu0, self._began = scheduler_cpu_seconds(c), time.monotonic()
        self._run_queue = RunQueueMeter()
        self._sample()
        self._etcd0 = await probe(etcd_histograms(c), self.notes, "etcd metrics")

    async def before_fault(self, spec: FaultSpec) -> None:
        self._sample()

    async def round_done(self, result: RoundResult) -> None:
        from chaos.scenario import NEW_LEADER, RECOVERED

        self._sample()
        if result.error is None and result.faults:
            f = result.faults[0]
            self.say(
                f"{result.label}: {f.detail.get('identity')} -> {result.waits.get(NEW_LEADER)}; "
                f"{f.target} {result.waits.get(RECOVERED)} ({result.wall_s:.1f}s)"
            )

    async def finished(self) -> None:
        from chaos.host_probes import etcd_histograms, histogram_summary, probe, scheduler_cpu_seconds

        if self._meter is None or self._run_queue is None:
            return
        self.cpu = self._meter.percent()
        wall = max(time.monotonic() - self._began, 1e-9)
        used = scheduler_cpu_seconds(self.cluster) - self._sched_cpu0
        self.cpu["schedulers"] = round(100.0 * used / wall, 1)
        self._sample()
        self.host["run_queue"] = self._run_queue.summary()
        etcd1 = await probe(etcd_histograms(self.cluster), self.notes, "etcd metrics")
        if etcd1 is not None:
            before = self._etcd0 or {}
            self.host["etcd"] = {k: histogram_summary(before.get(k), v) for k, v in etcd1.items()}


# ---------------------------------------------------------------------------------------------- one run


async def run(
    cfg: FailoverBenchConfig,
    *,
    report_dir: Path | None = None,
    say: Callable[[str], None] = progress,
) -> dict[str, Any]:
    """One run (a cluster, `cfg.trials` trials); the result dict (the `--json` object)."""
    result, _ = await _run_with_history(cfg, report_dir=report_dir, say=say)
    return result


def _plan_kwargs(cfg: FailoverBenchConfig) -> dict[str, Any]:
    from harness.up import BackoffPolicy

    return {
        "replicas": 3,
        # The bench measures the scheduler's failover: no controller-manager load beside it.
        "controller_managers": 0,
        "nodes": cfg.nodes,
        "rate": cfg.rate,
        "election": cfg.shape().election,
        # Restarts within a second or two: the trials measure failover, not crash-loop backoff.
        "restart_policy": BackoffPolicy(initial=0.5, cap=2.0, reset_after=max(5.0, 2 * cfg.lease_duration)),
        "grace": 10.0,
        "log_level": "info",
        "apiserver_args": (*fencing_args(cfg.fencing), *cfg.apiserver_args),
        "scheduler_args": cfg.scheduler_args,
        "nodesim_args": ("--seed", str(cfg.seed)),
        "workload_args": ("--delete-after", f"{cfg.delete_after:g}s"),
        "partition_proxies": cfg.fault == "zombie",
    }


async def _run_with_history(
    cfg: FailoverBenchConfig,
    *,
    report_dir: Path | None = None,
    say: Callable[[str], None] = progress,
    write_report_now: bool = True,
) -> tuple[dict[str, Any], History | None]:
    from chaos.runner import Drive, RunError, drive_cluster, load_history
    from harness.bench.common import work_dir
    from harness.up import Cluster, ClusterPlan

    problems = cfg.problems()
    if problems:
        raise ValueError("; ".join(problems))
    began = time.monotonic()
    with work_dir(f"kse-failover-{cfg.fault}-{cfg.election}-", cfg.keep) as tmp:
        plan = ClusterPlan(data_dir=tmp / "kse", **_plan_kwargs(cfg))
        # Through the drive (built below, before the cluster starts): t= from t=0 on.
        cluster = Cluster(plan, progress=lambda m: drive.say(f"cluster: {m}"))
        chaos_dir = plan.data_dir / "chaos" / f"failover-{cfg.fault}-{cfg.election}"
        say(
            f"failover: {cfg.trials} trials of {cfg.fault}, election {cfg.election}, lease "
            f"{cfg.lease_duration:g}s/{cfg.renew_deadline:g}s/{cfg.retry_period:g}s, {cfg.nodes} nodes, "
            f"{cfg.rate:g} pods/s; data under {tmp}"
        )
        measurements = _Measurements(cluster, lambda m: drive.say(m))
        drive = Drive(
            rounds=failover_rounds(cfg),
            seed=cfg.seed,
            default_stop=cfg.stop_for,
            retry_period=cfg.retry_period,
            renew_deadline=cfg.renew_deadline,
            say=say,
            settle_s=SETTLE_S,
            observer=measurements,
        )
        errors: list[str] = []
        try:
            history = await drive_cluster(cluster, drive, chaos_dir, lease_duration=cfg.lease_duration)
        except RunError as e:
            if not drive.round_results:  # no trial ran: nothing to judge
                raise BenchError(str(e)) from e
            errors.append(str(e))  # the trials ran: judge what the history holds
            history = load_history(cluster.audit_logs, chaos_dir, plan.run_dir, since=None)
        errors = [*drive.errors, *errors]
        notes = list(measurements.notes)
        if cluster.leftovers:
            notes.append(f"processes left after shutdown (killed): {', '.join(cluster.leftovers)}")
        result = analyze(
            cfg,
            history,
            trials_from_rounds(drive.round_results),
            errors=errors,
            notes=notes,
            cpu=measurements.cpu,
            host=measurements.host,
        )
        result["details"]["wall_s"] = round(time.monotonic() - began, 1)
        if cfg.keep:
            result["details"]["history_dir"] = str(chaos_dir)
        if report_dir is not None and write_report_now:
            paths = write_report(report_dir, result, history)
            say(f"report: {', '.join(str(p) for p in paths.values())}")
        return result, history


# ---------------------------------------------------------------------------------------------- compare


async def run_compare(
    cfg: FailoverBenchConfig,
    *,
    report_dir: Path | None = None,
    say: Callable[[str], None] = progress,
) -> dict[str, Any]:
    """`poll` then `watch`, same settings, one cluster each; both results and poll/watch ratios."""
    results: dict[str, dict[str, Any]] = {}
    histories: dict[str, History | None] = {}
    for election in ("poll", "watch"):
        say(f"compare: {election}")
        results[election], histories[election] = await _run_with_history(
            replace(cfg, election=election), say=say, write_report_now=False
        )
    ratios = ratio(results["poll"], results["watch"])
    out = {
        "compare": ["poll", "watch"],
        "poll": results["poll"],
        "watch": results["watch"],
        "ratio_poll_over_watch": ratios,
    }
    if report_dir is not None:
        paths = write_compare_report(report_dir, results["poll"], results["watch"], ratios, histories)
        say(f"report: {', '.join(str(p) for p in paths.values())}")
    return out


# ---------------------------------------------------------------------------------------------- CLI


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = FailoverBenchConfig  # its defaults (not an instance: that would import the harness)
    p.add_argument(
        "--trials",
        type=positive_int,
        default=d.trials,
        metavar="N",
        help=f"faults injected, one per trial (default {d.trials})",
    )
    p.add_argument(
        "--fault",
        choices=tuple(FAULTS),
        default=d.fault,
        help="kill: SIGKILL the leader; term: SIGTERM (it releases the lease); stop: SIGSTOP it "
        "for leaseDuration + a margin, then SIGCONT; zombie: hold its link to the API server back "
        "(the partition proxy) for leaseDuration + 2 retryPeriods + 1 s while it keeps scheduling, "
        "so its binds land after a successor holds the lease (default kill)",
    )
    election = add_election_flags(p)
    election.add_argument(
        "--compare",
        action="store_true",
        help="run poll and watch one after the other with the same settings and show both "
        "with their ratio (poll/watch); --election is ignored",
    )
    p.add_argument(
        "--settle",
        action=DurationFlag,
        default=0.0,
        metavar="S",
        help=f"after each trial, wait until the new leader binds at {SETTLE_FRACTION:.0%} of --rate over S "
        "seconds before the next fault (default 0: once the hit replica is back)",
    )
    p.add_argument(
        "--stop-margin",
        action=DurationFlag,
        default=None,
        metavar="S",
        help="stop: pause for leaseDuration + this (default retryPeriod + 1)",
    )
    p.add_argument(
        "--nodes",
        type=positive_int,
        default=d.nodes,
        metavar="N",
        help=f"simulated nodes (default {d.nodes})",
    )
    p.add_argument(
        "--rate",
        type=positive_float,
        default=d.rate,
        metavar="W",
        help=f"pods created per second by the workload (default {d.rate:g})",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=d.seed,
        help="seed of the fault timing (a random delay in [0, retryPeriod) before each fault) "
        "and of nodesim (default 0)",
    )
    p.add_argument(
        "--fencing",
        choices=("on", "off"),
        default="on",
        help="the API server's fencing; off shows what it prevents (safety targets then do "
        "not apply) (default on)",
    )
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        metavar="DIR",
        help="write report.md and timeline.png (with --compare: timeline-poll.png and "
        "timeline-watch.png) into DIR",
    )
    p.add_argument(
        "--apiserver-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra flag for `kse apiserver`, for experiments (repeatable; e.g. "
        "--apiserver-arg=--bookmark-interval=0.1)",
    )
    p.add_argument(
        "--scheduler-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra flag for every `kse scheduler` replica (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of tables")
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the temp dir (cluster data, logs; the history under kse/chaos/ and kse/audit/)",
    )
    p.set_defaults(func=_cli)


def register(sub: SubParsers) -> None:
    """Add `failover` to `kse bench`'s subparsers."""
    p = sub.add_parser(
        "failover",
        help="leader failover: time to a new leader and to the next bind, and safety, per fault",
        description=(__doc__ or "").split("\n\n", 1)[0],
    )
    add_arguments(p)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kse bench failover", description=(__doc__ or "").split("\n\n", 1)[0])
    add_arguments(p)
    return p


def _config(args: argparse.Namespace) -> FailoverBenchConfig:
    return FailoverBenchConfig(
        fault=args.fault,
        election=args.election,
        trials=args.trials,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        nodes=args.nodes,
        rate=args.rate,
        seed=args.seed,
        fencing=args.fencing == "on",
        on_lost_lease=args.on_lost_lease,
        stop_margin=args.stop_margin,
        settle=args.settle,
        keep=args.keep,
        apiserver_args=tuple(args.apiserver_arg),
        scheduler_args=tuple(args.scheduler_arg),
    )


def _cli(args: argparse.Namespace) -> int:
    from chaos.runner import RunError
    from harness.stoppable import Stopped, run_stoppable
    from harness.up import UpError

    # The cluster's progress lines already say when a replica exited and was restarted.
    logging.getLogger("harness.up.supervisor").setLevel(logging.ERROR)
    try:
        cfg = _config(args)
    except ValueError as e:  # harness.shape's ShapeError, in its fields' words: say the flags
        print(f"kse bench failover: error: {in_flag_words(str(e), SHAPE_FLAGS)}", file=sys.stderr)
        return 2
    problems = cfg.problems()
    if problems:
        print(f"kse bench failover: error: {'; '.join(problems)}", file=sys.stderr)
        return 2

    async def bench() -> dict[str, Any]:
        if args.compare:
            return await run_compare(cfg, report_dir=args.report)
        return await run(cfg, report_dir=args.report)

    try:
        result = run_stoppable(bench)  # SIGTERM stops the cluster in order, as Ctrl-C does
    except Stopped as e:
        print(f"kse bench failover: {e.how}", file=sys.stderr)
        return e.exit_code
    except (BenchError, UpError, RunError, ValueError, OSError) as e:
        print(f"kse bench failover: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    elif args.compare:
        print(format_compare(result["poll"], result["watch"], result["ratio_poll_over_watch"]))
    else:
        print(format_table(result))
    sys.stdout.flush()
    runs = [result["poll"], result["watch"]] if args.compare else [result]
    unsafe = [v for r in runs for v in r.get("safety_violations", [])]
    for v in unsafe:
        print(f"kse bench failover: SAFETY VIOLATION: {v}", file=sys.stderr)
    if any(r["details"]["errors"] for r in runs):
        return 1
    return SAFETY_EXIT_CODE if unsafe else 0


def main(argv: Sequence[str] | None = None) -> int:
    """`kse bench failover` stand-alone: `argv` are its flags."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
