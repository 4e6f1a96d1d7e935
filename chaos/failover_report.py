"""Targets, tables and the Markdown report of `kse bench failover` (pure functions of its result).

    checks = evaluate_targets(result)       # [{"name", "metric", "value", "target", "passed"}]
    print(format_table(result))             # the targets table, per-trial table, notes
    print(format_compare(poll, watch, ratio))
    write_report(out_dir, result, history)  # report.md + timeline.png
    write_compare_report(out_dir, poll, watch, ratio, histories)

A result is the dict `analyze(cfg, history, trials, ...)` builds from a run's history (the
`--json` object of `kse bench failover`): timings are summarized as nearest-rank percentiles
{"p50", "p95", "p99", "max"} in milliseconds (None where no trial gave a value); safety counts are
ints over the whole run. The timings and counts come from the checkers (`chaos.checker`); `trials`
only say which fault records were the benchmark's trials and what the driver's waits saw.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chaos.checker.failover import FailoverEvent
    from chaos.failover_bench import FailoverBenchConfig
    from chaos.history import History
    from kse.audit import AuditRecord

__all__ = [
    "GAP_SLACK_MS",
    "METRIC_LABELS",
    "SAFETY_COUNTS",
    "TERM_FAULT_TO_ACQUIRE_P99_MS",
    "TIMINGS",
    "WATCH_EXPIRY_TO_ACQUIRE_P99_MS",
    "Trial",
    "analyze",
    "diagnostics",
    "evaluate_targets",
    "format_compare",
    "format_table",
    "how_to_read",
    "ratio",
    "to_markdown",
    "write_compare_report",
    "write_report",
]

TIMINGS = ("fault_to_acquire_ms", "expiry_to_acquire_ms", "gap_ms")
PERCENTILES = ("p50", "p95", "p99", "max")
SAFETY_COUNTS = ("stale_writes_accepted", "stale_writes_rejected", "double_binds", "overcommitted_nodes")
# The checker's other invariants: not counted in the result, a note when one fails.
UNCOUNTED_INVARIANTS = ("watch_integrity", "no_rotation_rpc_errors")
# Safety counts that must be 0 with fencing on (rejected stale writes are the fencing at work).
MUST_BE_ZERO = ("stale_writes_accepted", "double_binds", "overcommitted_nodes")

# Targets (watch strategy): the standby acts within 50 ms of the lease becoming takeable; a SIGTERMed
# leader hands over within 100 ms; scheduling resumes within 200 ms of the acquisition.
WATCH_EXPIRY_TO_ACQUIRE_P99_MS = 50.0
TERM_FAULT_TO_ACQUIRE_P99_MS = 100.0
GAP_SLACK_MS = 200.0

METRIC_LABELS = {
    "fault_to_acquire_ms": "fault → acquire (ms)",
    "expiry_to_acquire_ms": "takeable → acquire (ms)",
    "gap_ms": "bind gap (ms)",
}
FAULT_NAMES = {"kill": "SIGKILL", "term": "SIGTERM", "stop": "SIGSTOP past the lease, then SIGCONT"}


def _p(result: Mapping[str, Any], metric: str, pct: str = "p99") -> float | None:
    summary = result.get(metric) or {}
    value = summary.get(pct)
    return float(value) if isinstance(value, int | float) else None


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def evaluate_targets(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The benchmark's targets for this result, each with the value measured and pass/fail.

    * every trial is a timed failover (a fault that missed the leader, or a leader that survived it,
      measures nothing);
    * `watch`: expiry_to_acquire_ms p99 <= 50; and with `term`, fault_to_acquire_ms p99 <= 100;
    * gap_ms p99 <= fault_to_acquire_ms p99 + 200;
    * fencing on: stale_writes_accepted, double_binds and overcommitted_nodes are 0.
    A missing value fails its check.
    """
    checks: list[dict[str, Any]] = []
    details = result.get("details") or {}
    trials = int(result.get("trials") or 0)
    failovers = int(details.get("failovers", 0))
    requested = int(details.get("trials_requested", trials))
    checks.append(
        {
            "name": "every trial failed over",
            "metric": "failovers",
            "value": failovers,
            "target": f"= {requested}",
            "passed": failovers == requested and requested > 0,
        }
    )
    if result.get("election") == "watch":
        v = _p(result, "expiry_to_acquire_ms")
        checks.append(
            {
                "name": "standby reacts at takeable (watch)",
                "metric": "expiry_to_acquire_ms p99",
                "value": v,
                "target": f"<= {WATCH_EXPIRY_TO_ACQUIRE_P99_MS:g}",
                "passed": v is not None and v <= WATCH_EXPIRY_TO_ACQUIRE_P99_MS,
            }
        )
        if result.get("fault") == "term":
            v = _p(result, "fault_to_acquire_ms")
            checks.append(
                {
                    "name": "graceful handover (watch, term)",
                    "metric": "fault_to_acquire_ms p99",
                    "value": v,
                    "target": f"<= {TERM_FAULT_TO_ACQUIRE_P99_MS:g}",
                    "passed": v is not None and v <= TERM_FAULT_TO_ACQUIRE_P99_MS,
                }
            )
    gap, f2a = _p(result, "gap_ms"), _p(result, "fault_to_acquire_ms")
    limit = None if f2a is None else f2a + GAP_SLACK_MS
    checks.append(
        {
            "name": "scheduling resumes right after the takeover",
            "metric": "gap_ms p99",
            "value": gap,
            "target": f"<= fault_to_acquire p99 + {GAP_SLACK_MS:g}"
            + ("" if limit is None else f" = {limit:.1f}"),
            "passed": gap is not None and limit is not None and gap <= limit,
        }
    )
    if details.get("fencing", True):
        for name in MUST_BE_ZERO:
            v = result.get(name)
            checks.append(
                {
                    "name": "safety (fencing on)",
                    "metric": name,
                    "value": v,
                    "target": "= 0",
                    "passed": v == 0,
                }
            )
    return checks


def ratio(poll: Mapping[str, Any], watch: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    """poll / watch per timing and percentile (None where either is missing or watch's is <= 0)."""
    out: dict[str, dict[str, float | None]] = {}
    for m in TIMINGS:
        out[m] = {}
        for pct in PERCENTILES:
            a, b = _p(poll, m, pct), _p(watch, m, pct)
            out[m][pct] = round(a / b, 2) if a is not None and b is not None and b > 0 else None
    return out


# ---------------------------------------------------------------- text


def _grid(rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _headline(result: Mapping[str, Any]) -> str:
    d = result.get("details") or {}
    return (
        f"kse bench failover: fault {result['fault']} ({FAULT_NAMES.get(result['fault'], '')}), "
        f"election {result['election']}, {result['trials']} trials; lease {result['lease_duration_s']:g}s "
        f"/ renew {result['renew_deadline_s']:g}s / retry {result['retry_period_s']:g}s; "
        f"fencing {'on' if d.get('fencing', True) else 'OFF'}; {d.get('nodes', '?')} nodes, "
        f"{d.get('rate', '?')} pods/s"
    )


def _timing_rows(result: Mapping[str, Any]) -> list[list[str]]:
    rows = [["timing", "n", "p50", "p95", "p99", "max"]]
    counts = (result.get("details") or {}).get("timed", {})
    for m in TIMINGS:
        s = result.get(m) or {}
        rows.append([METRIC_LABELS[m], str(counts.get(m, "-"))] + [_fmt(s.get(p)) for p in PERCENTILES])
    return rows


def _check_rows(checks: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    rows = [["target", "value", "wanted", "result"]]
    for c in checks:
        v = c["value"]
        shown = _fmt(v) if isinstance(v, float) else ("-" if v is None else str(v))
        rows.append([c["metric"], shown, c["target"], "PASS" if c["passed"] else "FAIL"])
    return rows


def _safety_rows(result: Mapping[str, Any]) -> list[list[str]]:
    rows = [["safety", "count"]]
    rows += [[name, str(result.get(name))] for name in SAFETY_COUNTS]
    return rows


def _trial_rows(result: Mapping[str, Any]) -> list[list[str]]:
    rows = [
        [
            "#",
            "target",
            "outcome",
            "by",
            "fault→acq ms",
            "takeable→acq ms",
            "attempt ms",
            "write ms",
            "gap ms",
            "rejected",
            "stale",
        ]
    ]
    for t in result.get("per_trial") or []:
        rows.append(
            [
                str(t["trial"]),
                t.get("target") or "-",
                t.get("outcome") or "-",
                t.get("takeable_by") or "-",
                _fmt(t.get("fault_to_acquire_ms")),
                _fmt(t.get("expiry_to_acquire_ms")),
                _fmt(t.get("acquire_attempt_ms")),
                _fmt(t.get("acquire_write_ms")),
                _fmt(t.get("gap_ms")),
                str(t.get("stale_writes_rejected", "-")),
                str(t.get("stale_writes_accepted", "-")),
            ]
        )
    return rows


def format_table(result: Mapping[str, Any]) -> str:
    """The human-readable report of one run: timings, targets with pass/fail, safety, trials."""
    checks = (result.get("targets") or {}).get("checks") or evaluate_targets(result)
    passed = all(c["passed"] for c in checks)
    d = result.get("details") or {}
    parts = [
        _headline(result),
        "",
        _grid(_timing_rows(result), right=(1, 2, 3, 4, 5)),
        "",
        _grid(_check_rows(checks), right=(1,)),
        "",
        f"targets: {'PASS' if passed else 'FAIL'}",
        "",
        _grid(_safety_rows(result), right=(1,)),
        "",
        _grid(_trial_rows(result), right=(4, 5, 6, 7, 8, 9, 10)),
        "",
        *diagnostics(result),
    ]
    cpu = d.get("cpu_percent")
    if cpu:
        parts += [
            "",
            "cpu % of one core during the trials: " + ", ".join(f"{k} {v:g}" for k, v in cpu.items()),
        ]
    for note in d.get("notes") or []:
        parts.append(f"note: {note}")
    for err in d.get("errors") or []:
        parts.append(f"ERROR: {err}")
    return "\n".join(parts)


def _compare_rows(
    poll: Mapping[str, Any], watch: Mapping[str, Any], ratios: Mapping[str, Mapping[str, float | None]]
) -> list[list[str]]:
    """The poll-vs-watch timing table (header first): each timing's percentiles and their ratio."""
    rows = [["timing", "pct", "poll", "watch", "poll/watch"]]
    for m in TIMINGS:
        for pct in PERCENTILES:
            r = ratios.get(m, {}).get(pct)
            rows.append(
                [
                    METRIC_LABELS[m] if pct == "p50" else "",
                    pct,
                    _fmt(_p(poll, m, pct)),
                    _fmt(_p(watch, m, pct)),
                    "-" if r is None else f"{r:.2f}x",
                ]
            )
    return rows


def format_compare(
    poll: Mapping[str, Any], watch: Mapping[str, Any], ratios: Mapping[str, Mapping[str, float | None]]
) -> str:
    """poll and watch side by side, with poll/watch per timing and percentile."""
    rows = _compare_rows(poll, watch, ratios)
    for name in SAFETY_COUNTS:
        rows.append([name, "", str(poll.get(name)), str(watch.get(name)), ""])
    head = _headline(watch).replace("election watch", "election poll vs watch")
    parts = [head, "", _grid(rows, right=(2, 3, 4))]
    for name, res in (("poll", poll), ("watch", watch)):
        checks = (res.get("targets") or {}).get("checks") or evaluate_targets(res)
        ok = all(c["passed"] for c in checks)
        parts += ["", f"targets, {name}: {'PASS' if ok else 'FAIL'}", _grid(_check_rows(checks), right=(1,))]
        for err in (res.get("details") or {}).get("errors") or []:
            parts.append(f"ERROR ({name}): {err}")
    return "\n".join(parts)


def _pcts(s: Mapping[str, Any] | None) -> str:
    if not s or s.get("p50") is None:
        return "-"
    return f"p50 {_fmt(s['p50'])}, p99 {_fmt(s['p99'])}, max {_fmt(s['max'])}"


def diagnostics(result: Mapping[str, Any]) -> list[str]:
    """Where the time went: the standby's reaction vs. the write, the write path over the whole run,
    CPU starvation of our processes, etcd's disk."""
    diag = (result.get("details") or {}).get("diagnostics") or {}
    lines = []
    if diag.get("acquire_attempt_ms") is not None:
        lines.append(
            "takeable → acquire = attempt ms (takeable → the winning standby starts its write: watch "
            "delivery, timer) + write ms (→ committed: API server and etcd); "
            "attempt (the standby's reaction) "
            f"[{_pcts(diag.get('acquire_attempt_ms'))}] + write (API server and etcd) "
            f"[{_pcts(diag.get('acquire_write_ms'))}] ms"
        )
    if diag.get("acquire_to_first_bind_ms") is not None:
        lines.append(
            "the new leader's start, acquire → its first bind (cache catch-up, first cycle): "
            f"{_pcts(diag.get('acquire_to_first_bind_ms'))} ms"
        )
    if diag.get("lease_write_ms") is not None:
        lines.append(f"every Lease write, attempt → committed: {_pcts(diag.get('lease_write_ms'))} ms")
    rq = diag.get("run_queue") or {}
    if rq:
        lines.append(
            "waiting for a CPU while runnable, mean per wake-up in ms (and % of the run): "
            + ", ".join(f"{k} {v['wait_per_slice_ms']:g} ({v['wait_pct']:g}%)" for k, v in rq.items())
        )
    for name, h in (diag.get("etcd") or {}).items():
        lines.append(
            f"etcd {name}: {h['count']} ops, p50 <= {_fmt(h['p50_le_ms'], 0)} ms, "
            f"p99 <= {_fmt(h['p99_le_ms'], 0)} ms, slowest <= {_fmt(h['max_le_ms'], 0)} ms"
        )
    return lines


# ---------------------------------------------------------------- Markdown


def how_to_read(result: Mapping[str, Any]) -> str:
    """The "how to read this" paragraphs for SREs: what each timing means and which setting drives it."""
    ld, rd, rp = result["lease_duration_s"], result["renew_deadline_s"], result["retry_period_s"]
    return f"""## How to read this

Each trial injects one fault into the replica that holds the scheduler Lease while pods are being
created at a steady rate, and times what follows from the API server's audit log (every accepted
write, stamped by the API server's clock) and the fault's own timestamp. Percentiles are
nearest-rank: every figure is one observed trial, never an interpolation.

* **fault → acquire**: from the signal to the write that made a standby the new holder: how long the
  cluster had no leader that could schedule. For `kill` and `stop` it is dominated by
  **leaseDuration** ({ld:g}s here): a standby may take the lease only once leaseDuration has passed
  on its own clock since it last saw the lease change, so expect leaseDuration minus the time since
  the last renewal (renewals every **retryPeriod**, {rp:g}s), plus the reaction below. For `term` the
  leader releases the lease when it stops (after letting its binds in flight finish), so this is the
  handover itself and does not depend on leaseDuration.
* **takeable → acquire**: from the moment the lease could be taken (the last renewal +
  leaseDuration, or the release write) to the acquiring write: the election's own reaction time.
  With `poll` (client-go) a standby reads the lease every retryPeriod x [1, 2.2): it sees the
  last renewal up to 2.2 x retryPeriod late and starts its leaseDuration countdown only then, and
  after the countdown it acts at its next read, so this can reach about 2 x 2.2 x retryPeriod.
  With `watch` the standby is told of every change at once and sets a timer for the expiry, so
  this is one watch delivery plus one write and does not depend on any setting.
* **bind gap**: from the old leader's last accepted bind to the new leader's first: the outage pods
  actually see. It is fault → acquire, plus the time between the old leader's last bind and the
  fault (up to about 1 / the pod rate: {_rate_note(result)}), plus the new leader's start (catching
  its caches up to the acquisition's revision and running its first scheduling cycle; see
  Diagnostics). The target allows {GAP_SLACK_MS:g} ms beyond fault → acquire, which a low pod rate
  alone can use up.
* **renewDeadline** ({rd:g}s) is how long a leader that cannot renew (API server slow or
  unreachable) keeps scheduling before it gives up; it must stay below leaseDuration, and the
  difference is the margin that keeps a deposed leader from overlapping its successor on timing
  alone. These faults do not exercise it directly.
* **Safety**: a *stale write accepted* is a write that landed under a fence token that no longer
  matched the lease (a deposed leader's write): it must be 0. A *stale write rejected* is the API
  server refusing such a write (FAILED_PRECONDITION): fencing doing its job. It can only appear
  when a deposed leader still tries to write, e.g. after `stop` when the paused leader wakes up with
  binds in flight; a leader that notices on its own clock that its renew deadline has passed stops
  before writing, so 0 is common too. *Double binds* (a pod bound twice) and *over-committed nodes*
  must be 0.

Lowering leaseDuration shortens crash failovers but makes a leader that is merely slow (GC pause,
overloaded node, slow API server) lose the lease more often; with `watch`, retryPeriod no longer
adds to the failover time, so it only sets how often the leader renews.
"""


def _rate_note(result: Mapping[str, Any]) -> str:
    rate = (result.get("details") or {}).get("rate")
    if not isinstance(rate, int | float) or rate <= 0:
        return "the workload's pace"
    return f"{1000.0 / rate:.0f} ms at {rate:g} pods/s"


def _md_table(rows: Sequence[Sequence[str]]) -> str:
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows[1:]]
    return "\n".join(out)


def _md_sections(result: Mapping[str, Any]) -> list[str]:
    checks = (result.get("targets") or {}).get("checks") or evaluate_targets(result)
    ok = all(c["passed"] for c in checks)
    d = result.get("details") or {}
    parts = [
        _md_table(_timing_rows(result)),
        "",
        f"### Targets: {'PASS' if ok else 'FAIL'}",
        "",
        _md_table(_check_rows(checks)),
        "",
        "### Safety",
        "",
        _md_table(_safety_rows(result)),
        "",
        "### Trials",
        "",
        _md_table(_trial_rows(result)),
        "",
        "### Diagnostics",
        "",
        *[f"* {line}" for line in diagnostics(result)],
    ]
    cpu = d.get("cpu_percent")
    if cpu:
        parts += [
            "",
            "CPU (% of one core) during the trials: " + ", ".join(f"{k} {v:g}" for k, v in cpu.items()),
        ]
    for note in d.get("notes") or []:
        parts += ["", f"Note: {note}"]
    for err in d.get("errors") or []:
        parts += ["", f"**Error**: {err}"]
    return parts


def to_markdown(result: Mapping[str, Any], *, timeline: str | None = "timeline.png") -> str:
    from chaos.run_header import run_header

    header = run_header("bench failover", str(result["fault"]), result.get("seed"), {})
    parts = [
        f"# Failover benchmark: {result['fault']}, {result['election']}",
        "",
        _headline(result),
        "",
        f"Report written {header['date']} with kse {header['version']}"
        + (f"; seed {result['seed']}." if result.get("seed") is not None else "."),
        "",
    ]
    parts += _md_sections(result)
    parts += ["", how_to_read(result)]
    if timeline:
        parts += [
            "## Timeline",
            "",
            f"![timeline]({timeline})",
            "",
            "Top: the lease holder per replica identity (solid: from the acquiring write to the last "
            "renewal; pale: held but no longer renewed), fenced writes refused (x) and stale writes "
            "accepted (red dot). Bottom: accepted binds per second. Faults are dashed lines (a shaded "
            "span for a pause).",
        ]
    return "\n".join(parts) + "\n"


def write_report(out_dir: Path | str, result: Mapping[str, Any], history: History | None) -> dict[str, Path]:
    """`report.md` and (with a history) `timeline.png` in `out_dir`."""
    from chaos.checker.report import plot_timeline

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    if history is not None:
        paths["timeline"] = plot_timeline(
            history,
            d / "timeline.png",
            lease_duration_s=float(result["lease_duration_s"]),
            title=f"kse bench failover: {result['fault']}, {result['election']} "
            f"(lease {result['lease_duration_s']:g}s / {result['renew_deadline_s']:g}s / "
            f"{result['retry_period_s']:g}s)",
        )
    paths["markdown"] = d / "report.md"
    paths["markdown"].write_text(
        to_markdown(result, timeline="timeline.png" if history is not None else None), encoding="utf-8"
    )
    return paths


def write_compare_report(
    out_dir: Path | str,
    poll: Mapping[str, Any],
    watch: Mapping[str, Any],
    ratios: Mapping[str, Mapping[str, float | None]],
    histories: Mapping[str, History | None],
) -> dict[str, Path]:
    """`report.md` (both runs and their ratio) and `timeline-poll.png`, `timeline-watch.png`."""
    from chaos.checker.report import plot_timeline

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    rows = _compare_rows(poll, watch, ratios)
    parts = [
        f"# Failover benchmark: {watch['fault']}, poll vs watch",
        "",
        "Two clusters with the same settings, one after the other.",
        "",
        _md_table(rows),
    ]
    for name, res in (("poll", poll), ("watch", watch)):
        h = histories.get(name)
        png = f"timeline-{name}.png"
        if h is not None:
            paths[name] = plot_timeline(
                h,
                d / png,
                lease_duration_s=float(res["lease_duration_s"]),
                title=f"kse bench failover: {res['fault']}, {name}",
            )
        parts += ["", f"## {name}", "", _headline(res), "", *_md_sections(res)]
        if h is not None:
            parts += ["", f"![timeline, {name}]({png})"]
    parts += ["", how_to_read(watch)]
    paths["markdown"] = d / "report.md"
    paths["markdown"].write_text("\n".join(parts) + "\n", encoding="utf-8")
    return paths


# ---------------------------------------------------------------------------------------------- the result


@dataclass
class Trial:
    """One trial: its fault (from the history's fault records) and what the driver's waits saw
    (the timings come from the history, in `analyze`)."""

    index: int
    target: str
    identity: str
    transitions: int
    fault_ts: float
    new_identity: str = ""
    resumed_ts: float | None = None  # `stop`: SIGCONT
    back: str = ""  # how the faulted replica came back: restarted | standby
    wall_s: float = 0.0


def _pct(values: Sequence[float | None]) -> dict[str, float | None]:
    from chaos.checker.failover import summarize

    s = summarize(values)
    if s is None:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    return {k: round(v, 3) for k, v in s.items()}


def analyze(
    cfg: FailoverBenchConfig,
    history: History,
    trials: Sequence[Trial],
    *,
    errors: Sequence[str] = (),
    notes: Sequence[str] = (),
    cpu: dict[str, float] | None = None,
    host: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The result object: timings per trial and their percentiles, safety counts, targets.

    Besides the checker's timings, each failover's takeable -> acquire is split at the acquiring
    write's renewTime, which the winning standby stamped (its wall clock, the same machine's) when
    it started the attempt: `acquire_attempt_ms` (takeable -> the attempt: the standby's reaction,
    watch delivery and timer included) and `acquire_write_ms` (the attempt -> the write committed:
    the API server and etcd). `lease_write_ms` is that stamp -> commit latency over every Lease
    write of the run: the write path's health."""
    from chaos.checker import check

    # The checkers of `kse chaos run`, over the same history files. Pods still pending at the final
    # snapshot are allowed: the benchmark judges failovers, not how a stopped workload drains.
    checked = check(history, allow_pending=True, lease_duration_s=cfg.lease_duration)
    assert checked.failover is not None
    fo = checked.failover
    stale = checked.invariants["no_stale_writes"]
    bound = checked.invariants["pods_bound_once"]
    over = checked.invariants["no_overcommit"]
    notes = [
        *notes,
        *(
            f"invariant {name} failed: {checked.invariants[name].detail}"
            for name in UNCOUNTED_INVARIANTS
            if not checked.invariants[name].passed
        ),
    ]

    # Safety events, timestamped, to attribute them to trials (a trial runs from its fault to the next).
    rejected_ts = [
        r.ts
        for r in history.audit
        if r.resource != "leases" and r.fence is not None and r.code == "FAILED_PRECONDITION"
    ]
    stale_ts = [v["ts"] for v in stale.violations if v["kind"] == "stale_write"]
    doubles = [v for v in bound.violations if v["kind"] == "double_bind"]
    double_ts = [max(b["ts"] for b in v["binds"]) for v in doubles]
    over_at = [v for v in over.violations if v["kind"] == "overcommit_at"]
    overcommitted = {v["node"] for v in over.violations if v["kind"] in ("overcommit", "overcommit_at")}

    events = {round(e.fault_ts, 6): e for e in fo.events}
    skipped = {round(s["fault_ts"], 6): s for s in fo.skipped}
    per_trial: list[dict[str, Any]] = []
    starts = [t.fault_ts for t in trials]
    for n, t in enumerate(trials):
        lo = t.fault_ts if n else float("-inf")
        hi = starts[n + 1] if n + 1 < len(starts) else float("inf")

        def within(ts: float, lo: float = lo, hi: float = hi) -> bool:
            return lo <= ts < hi

        e = events.get(round(t.fault_ts, 6))
        entry: dict[str, Any] = {
            "trial": t.index,
            "target": t.target,
            "old_identity": t.identity,
            "old_transitions": t.transitions,
            "new_identity": e.new_holder if e is not None else (t.new_identity or None),
            "fault_ts": round(t.fault_ts, 6),
            "outcome": e.outcome if e is not None else "not_timed",
            "takeable_by": e.takeable_by if e is not None else None,
            "fault_to_acquire_ms": e.fault_to_acquire_ms if e is not None else None,
            "expiry_to_acquire_ms": e.expiry_to_acquire_ms if e is not None else None,
            "gap_ms": e.gap_ms if e is not None else None,
            "stale_writes_accepted": sum(1 for ts in stale_ts if within(ts)),
            "stale_writes_rejected": sum(1 for ts in rejected_ts if within(ts)),
            "double_binds": sum(1 for ts in double_ts if within(ts)),
            "overcommitted_nodes": len({v["node"] for v in over_at if within(v["ts"])}),
            "came_back": t.back or None,
            "wall_s": t.wall_s,
        }
        split = _acquire_split(history, e) if e is not None else None
        entry["acquire_attempt_ms"], entry["acquire_write_ms"] = split or (None, None)
        # The new leader's start: its acquisition -> its first accepted bind (cache catch-up to the
        # acquisition's revision, then the first scheduling cycle).
        entry["acquire_to_first_bind_ms"] = (
            round((e.first_new_bind_ts - e.acquire_ts) * 1000.0, 3)
            if e is not None and e.first_new_bind_ts is not None and e.acquire_ts is not None
            else None
        )
        if e is None:
            s = skipped.get(round(t.fault_ts, 6))
            entry["why_not_timed"] = s["reason"] if s else "no failover event for this fault"
        if t.resumed_ts is not None:
            entry["stopped_s"] = round(t.resumed_ts - t.fault_ts, 3)
        per_trial.append(entry)

    failovers = [p for p in per_trial if p["outcome"] == "failover"]
    result: dict[str, Any] = {
        "fault": cfg.fault,
        "election": cfg.election,
        "trials": len(trials),
        "lease_duration_s": cfg.lease_duration,
        "renew_deadline_s": cfg.renew_deadline,
        "retry_period_s": cfg.retry_period,
    }
    for m in TIMINGS:
        result[m] = _pct([p[m] for p in failovers])
    result["stale_writes_accepted"] = int(stale.counts.get("stale_writes_accepted", 0))
    result["stale_writes_rejected"] = int(stale.counts.get("stale_writes_rejected", 0))
    result["double_binds"] = len(doubles)
    result["overcommitted_nodes"] = len(overcommitted)
    assert all(isinstance(result[k], int) for k in SAFETY_COUNTS)
    # What must never happen, whatever the settings (with --fencing off it is the expected proof
    # of what fencing prevents; the CLI exits 3 and says so).
    result["safety_violations"] = [f"{result[n]} {n.replace('_', ' ')}" for n in MUST_BE_ZERO if result[n]]
    result["per_trial"] = per_trial
    outcomes = Counter(p["outcome"] for p in per_trial)
    takeable_by = Counter(p["takeable_by"] for p in failovers if p["takeable_by"])
    result["details"] = {
        "trials_requested": cfg.trials,
        "failovers": len(failovers),
        "outcomes": dict(outcomes),
        "takeable_by": dict(takeable_by),
        "timed": {m: sum(1 for p in failovers if p[m] is not None) for m in TIMINGS},
        "nodes": cfg.nodes,
        "rate": cfg.rate,
        "seed": cfg.seed,
        "fencing": cfg.fencing,
        "on_lost_lease": cfg.on_lost_lease,
        "stop_s": cfg.stop_for if cfg.fault == "stop" else None,
        "settle_s": cfg.settle,
        "workload_delete_after_s": cfg.delete_after,
        "apiserver_args": list(cfg.apiserver_args),
        "scheduler_args": list(cfg.scheduler_args),
        "unfenced_scheduler_writes": int(stale.counts.get("unfenced_writes", 0)),
        "pods": {k: v for k, v in bound.counts.items()},
        "binds": sum(1 for r in history.audit if r.verb == "bind" and r.code == "OK"),
        "lease_terms": fo.terms,
        "cpu_percent": cpu or {},
        "diagnostics": {
            "acquire_attempt_ms": _pct([p["acquire_attempt_ms"] for p in failovers]),
            "acquire_write_ms": _pct([p["acquire_write_ms"] for p in failovers]),
            "acquire_to_first_bind_ms": _pct([p["acquire_to_first_bind_ms"] for p in failovers]),
            "lease_write_ms": _pct(_lease_write_latencies(history)),
            **(host or {}),
        },
        "errors": list(errors),
        "notes": list(notes),
    }
    checks = evaluate_targets(result)
    result["targets"] = {"passed": all(c["passed"] for c in checks) and not errors, "checks": checks}
    return result


def _stamp(r: AuditRecord) -> float | None:
    from kse.objects.timeutil import to_epoch

    try:
        return to_epoch(r.lease_renew_time) if r.lease_renew_time else None
    except ValueError:
        return None


def _acquire_split(history: History, e: FailoverEvent) -> tuple[float, float] | None:
    """(takeable -> attempt stamped, stamped -> committed) in ms for a failover event."""
    if e.new_holder is None or e.takeable_ts is None or e.acquire_ts is None:
        return None
    for r in history.audit:
        if (
            r.resource == "leases"
            and r.code == "OK"
            and r.lease_holder == e.new_holder
            and r.lease_transitions == e.new_transitions
            and r.ts == e.acquire_ts
        ):
            stamp = _stamp(r)
            if stamp is None:
                return None
            return round((stamp - e.takeable_ts) * 1000.0, 3), round((e.acquire_ts - stamp) * 1000.0, 3)
    return None


def _lease_write_latencies(history: History) -> list[float]:
    """Stamp (renewTime) -> commit (audit ts) of every accepted write of the scheduler Lease, ms."""
    from chaos.history import SCHEDULER_LEASE

    ns, _, name = SCHEDULER_LEASE.partition("/")
    out = []
    for r in history.audit:
        if r.resource == "leases" and r.namespace == ns and r.name == name and r.code == "OK":
            stamp = _stamp(r)
            if stamp is not None:
                out.append((r.ts - stamp) * 1000.0)
    return out
