"""Reports of a checked run: JSON, Markdown tables, and a PNG timeline.

    to_json(result)            the CheckResult as JSON (violations capped per invariant)
    to_markdown(result)        a table of invariants (pass/fail, detail) and of failover timings
    plot_timeline(history, p)  PNG: lease holder per replica, binds per second, faults
    write_report(result, history, out_dir)   all three, as report.json / report.md / timeline.png

matplotlib is imported inside `plot_timeline` only (Agg canvas, no pyplot state), so everything else
works without it.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.checker.failover import DEFAULT_LEASE_DURATION_S, METRICS
from chaos.history import SCHEDULER_LEASE, History, fault_windows

if TYPE_CHECKING:
    from chaos.checker import CheckResult

__all__ = ["plot_timeline", "to_json", "to_markdown", "write_report"]

_METRIC_LABELS = {
    "fault_to_acquire_ms": "fault → acquire (ms)",
    "expiry_to_acquire_ms": "takeable → acquire (ms)",
    "gap_ms": "bind gap (ms)",
}


NA = "-"


def to_json(result: CheckResult, *, max_violations: int | None = 100, indent: int | None = 2) -> str:
    return json.dumps(result.to_dict(max_violations), indent=indent, sort_keys=True, default=str)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _num(v: float | None) -> str:
    return NA if v is None else f"{v:.1f}"


def _short(identity: str | None, n: int = 28) -> str:
    if not identity:
        return NA
    return identity if len(identity) <= n else identity[: n - 1] + "…"


def to_markdown(result: CheckResult) -> str:
    lines = [
        f"## Invariants: {'PASS' if result.passed else 'FAIL (' + ', '.join(result.failed()) + ')'}",
        "",
        "| invariant | result | detail |",
        "|---|---|---|",
    ]
    for name, r in result.invariants.items():
        lines.append(f"| `{name}` | {'pass' if r.passed else '**FAIL**'} | {_cell(r.detail)} |")
    fo = result.failover
    if fo is not None:
        lines += [
            "",
            f"## Failover (lease `{fo.lease}`: {len(fo.failovers)} failovers, {fo.terms} terms)",
            "",
        ]
        lines += ["| metric | n | p50 | p95 | p99 | max |", "|---|---|---|---|---|---|"]
        for m in METRICS:
            s = fo.summary.get(m)
            n = sum(1 for e in fo.failovers if getattr(e, m) is not None)
            if s is None:
                lines.append(f"| {_METRIC_LABELS[m]} | 0 |" + f" {NA} |" * 4)
            else:
                lines.append(
                    f"| {_METRIC_LABELS[m]} | {n} | {_num(s['p50'])} | {_num(s['p95'])} | "
                    f"{_num(s['p99'])} | {_num(s['max'])} |"
                )
        lines += ["", "Percentiles are nearest-rank (each value is an observed one)."]
        if fo.events:
            lines += [
                "",
                "| t (s) | fault | target | outcome | old → new holder | takeable by | "
                "fault→acquire ms | takeable→acquire ms | gap ms |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            t0 = result.meta.get("origin_ts") or result.meta.get("start_ts") or 0.0
            for e in fo.events:
                holders = f"{_short(e.old_holder)}#{e.old_transitions} → "
                holders += f"{_short(e.new_holder)}#{e.new_transitions}" if e.new_holder else NA
                cells = [
                    f"{e.fault_ts - t0:.3f}",
                    e.fault,
                    _cell(e.target),
                    e.outcome,
                    _cell(holders),
                    e.takeable_by or NA,
                    _num(e.fault_to_acquire_ms),
                    _num(e.expiry_to_acquire_ms),
                    _num(e.gap_ms),
                ]
                lines.append("| " + " | ".join(cells) + " |")
        if fo.skipped:
            lines += ["", f"{len(fo.skipped)} leader-kind faults did not hit the leader and were not timed."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- timeline


_FAULT_COLORS = {
    "kill": "tab:red",
    "terminate": "tab:orange",
    "stop": "tab:purple",
    "restart": "tab:brown",
    "partition": "tab:pink",
    "rotate_certs": "tab:green",
    "rotate_ca": "tab:olive",
    "expire_certs": "tab:gray",
}


def plot_timeline(
    history: History,
    path: Path | str,
    *,
    lease: str = SCHEDULER_LEASE,
    lease_duration_s: float | None = None,
    title: str | None = None,
) -> Path:
    """Draw the run's timeline as a PNG at `path`.

    Top: one row per replica identity, a solid bar for each term (labelled #transitions) from the
    acquiring write to the last renewal, and a pale bar from there to the term's end (another's
    acquisition or a release; for the last term, its expiry): the time the lease was held by a
    replica no longer renewing it. Fenced writes are marked on their fence holder's row: x for one
    refused (FAILED_PRECONDITION), a red dot for a stale one accepted. Bottom: accepted binds per
    second, pending pods on their own (red) scale, and every pause in the binds that stands out
    labelled with its length. Faults are dashed vertical lines across both (a shaded span for
    windowed faults such as partitions, pauses or rotations), labelled in the top panel. Time is
    seconds from the run's t=0 (`History.origin`: the first leader elected, as in the console and
    the tables); the set-up before it is on the negative side.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    out = Path(path)
    span = history.time_range()
    first, t1 = span if span else (0.0, 1.0)
    t0 = history.origin()  # the run's t=0, as in the console and the tables; set-up is before it
    t1 = max(t1, t0 + 1.0)
    lh = history.lease_history()
    terms = lh.terms(lease)
    lanes_of = replica_lanes(history, [t.holder for t in terms])
    lane_names = list(dict.fromkeys(lanes_of.values()))
    rows = max(1, len(lane_names))

    lease_h = 1.2 + 0.5 * rows
    fig = Figure(figsize=(12, lease_h + 3.2), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    gs = fig.add_gridspec(2, 1, height_ratios=[lease_h, 2.6])
    ax_l = fig.add_subplot(gs[0])
    ax_b = fig.add_subplot(gs[1], sharex=ax_l)
    fig.suptitle(title or f"lease {lease}: holder per replica, binds per second, faults", fontsize=11)

    # -- lease terms
    palette = ["tab:blue", "tab:orange", "tab:green", "tab:cyan", "tab:olive", "tab:brown", "tab:gray"]
    lives = [x for x in history.replica_lives if x.identity in lanes_of]
    for life in lives:  # each process start: a thin line while it ran (leading or standby)
        row = lane_names.index(lanes_of[life.identity])
        end = life.ended_at if life.ended_at is not None else t1
        ax_l.plot([life.started_at - t0, end - t0], [row, row], color="gray", linewidth=1, alpha=0.6)
        ax_l.plot([life.started_at - t0], [row], ">", color="gray", markersize=4)
    for t in terms:
        row = lane_names.index(lanes_of[t.holder])
        color = palette[row % len(palette)]
        solid = max(t.last_renew_ts - t.acquire_ts, 0.05)
        ax_l.broken_barh([(t.acquire_ts - t0, solid)], (row - 0.3, 0.6), facecolors=color)
        duration = t.duration_s or lease_duration_s or DEFAULT_LEASE_DURATION_S
        end = t.end_ts if t.end_ts is not None else min(t.last_renew_ts + duration, t1)
        if end > t.last_renew_ts:
            ax_l.broken_barh(
                [(t.last_renew_ts - t0, end - t.last_renew_ts)], (row - 0.3, 0.6), facecolors=color, alpha=0.3
            )
        ax_l.text(t.acquire_ts - t0, row - 0.33, f"#{t.transitions}", fontsize=7, va="bottom", ha="left")
    refused_x, refused_y, stale_x, stale_y = [], [], [], []
    for r in history.audit:
        if r.fence is None or r.resource == "leases" or r.fence.holder not in lanes_of:
            continue
        row = lane_names.index(lanes_of[r.fence.holder])
        if r.code == "FAILED_PRECONDITION":
            refused_x.append(r.ts - t0)
            refused_y.append(row)
        elif r.code == "OK" and r.revision is not None:
            st = lh.at_revision(r.fence.lease, r.revision)
            if st is None or (st.holder, st.transitions) != (r.fence.holder, r.fence.transitions):
                stale_x.append(r.ts - t0)
                stale_y.append(row)
    if refused_x:
        ax_l.plot(refused_x, refused_y, "x", color="black", markersize=6)
    if stale_x:
        ax_l.plot(stale_x, stale_y, "o", color="red", markersize=6)
    ax_l.set_yticks(range(len(lane_names)), [_short(h, 32) for h in lane_names])
    ax_l.grid(axis="x", alpha=0.3)
    ax_l.tick_params(labelbottom=False)
    if not terms:
        ax_l.text(0.5, 0.5, "no lease writes", transform=ax_l.transAxes, ha="center", va="center")

    # -- binds per second
    bind_ts = sorted(r.ts for r in history.audit if r.verb == "bind" and r.code == "OK")
    lo = min(first, t0)  # the bins start at the first record, which may be before t=0 (set-up)
    width = max(1.0, (t1 - lo) / 400)  # at most ~400 bins
    nbins = int((t1 - lo) // width) + 1
    counts = Counter(int((ts - lo) // width) for ts in bind_ts)
    xs = [lo - t0 + i * width for i in range(nbins + 1)]
    ys = [counts.get(i, 0) / width for i in range(nbins)] + [0.0]
    ax_b.step(xs, ys, where="post", color="tab:blue", linewidth=1.2)
    ax_b.fill_between(xs, ys, step="post", alpha=0.15, color="tab:blue")
    ax_b.set_ylabel("binds / s" if width == 1.0 else f"binds / s ({width:.1f} s bins)")
    ax_b.set_xlabel(
        "seconds from t=0 (the first leader elected)"
        if history.origin_ts is not None
        else "seconds since the first record"
    )
    ax_b.set_ylim(bottom=0)
    ax_b.grid(alpha=0.3)
    ax_b.set_xlim(lo - t0, t1 - t0)
    # Pending pods on their own scale, and each pause in the binds labelled with its length.
    pending = pending_over_time(history, lo, width, nbins)
    if any(pending):
        ax_p = ax_b.twinx()
        ax_p.step(xs, [*pending, 0], where="post", color="tab:red", linewidth=1.0, alpha=0.8)
        ax_p.set_ylabel("pending pods", color="tab:red")
        ax_p.set_ylim(bottom=0)
        ax_p.tick_params(axis="y", colors="tab:red")
    top = max(ys, default=0.0) or 1.0
    for start, length in bind_gaps(bind_ts):
        ax_b.annotate(
            "", xy=(start + length - t0, 0.9 * top), xytext=(start - t0, 0.9 * top),
            arrowprops={"arrowstyle": "<->", "color": "black", "linewidth": 0.8},
        )  # fmt: skip
        ax_b.text(start + length / 2 - t0, 0.93 * top, f"{length:.1f}s", fontsize=7, ha="center", va="bottom")

    # -- faults
    used: dict[str, str] = {}
    windows = sorted(
        (w for w in fault_windows(history.faults) if w.fault not in ("cont", "heal")), key=lambda w: w.start
    )
    labels = [f" {w.fault} {w.target}" for w in windows]
    # Seconds of the time axis one character of a label covers (12 in wide figure, ~85 % of it the
    # axes, 7 pt text at ~0.6 em a character): labels that would overlap go to another lane.
    per_char = (t1 - t0) / (12 * 0.85 / (0.6 * 7 / 72))
    lanes = _label_lanes([w.start - t0 for w in windows], [len(t) * per_char for t in labels])
    n_lanes = max(lanes, default=0) + 1
    for w, text, lane in zip(windows, labels, lanes, strict=True):
        color = _FAULT_COLORS.get(w.fault, "black")
        used[w.fault] = color
        for ax in (ax_l, ax_b):
            if w.end > w.start:
                ax.axvspan(w.start - t0, w.end - t0, color=color, alpha=0.12, linewidth=0)
            ax.axvline(w.start - t0, color=color, linestyle="--", linewidth=1)
        ax_l.text(w.start - t0, -0.95 - 0.35 * lane, text, fontsize=7, va="center", ha="left", color=color)
    # Inverted: the first holder on top, and above it one line per label lane.
    ax_l.set_ylim(rows - 0.4, -0.95 - 0.35 * (max(n_lanes, 2) - 1) - 0.25)

    handles: list[Any] = [Line2D([0], [0], color=c, linestyle="--", label=f) for f, c in used.items()]
    handles.append(Patch(facecolor="gray", alpha=0.3, label="lease held, not renewed"))
    if lives:
        handles.append(
            Line2D([0], [0], color="gray", marker=">", markersize=4, label="process start, running")
        )
    if refused_x:
        handles.append(
            Line2D([0], [0], marker="x", color="black", linestyle="", label="fenced write refused")
        )
    if stale_x:
        handles.append(Line2D([0], [0], marker="o", color="red", linestyle="", label="STALE write accepted"))
    fig.legend(
        handles=handles, loc="outside lower center", fontsize=8, ncols=min(6, len(handles)), frameon=False
    )

    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


def write_report(
    result: CheckResult,
    history: History,
    out_dir: Path | str,
    *,
    stem: str = "report",
    lease: str = SCHEDULER_LEASE,
    plot: bool = True,
    run: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Write `<stem>.json`, `<stem>.md` and (if matplotlib is available) `timeline.png`. `run`:
    what was run (`chaos.run_header.run_header`), the Markdown's first lines and the JSON's "run"."""
    from chaos.run_header import header_markdown

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = {"json": d / f"{stem}.json", "markdown": d / f"{stem}.md"}
    doc = result.to_dict(100) | ({"run": dict(run)} if run is not None else {})
    paths["json"].write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    head = "\n".join(header_markdown(run)) + "\n" if run is not None else ""
    paths["markdown"].write_text(head + to_markdown(result) + rpc_errors_markdown(history), encoding="utf-8")
    if plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return paths
        paths["png"] = plot_timeline(history, d / "timeline.png", lease=lease)
    return paths


def bind_gaps(bind_ts: list[float], *, at_least_s: float = 1.0, limit: int = 12) -> list[tuple[float, float]]:
    """(start, length) of the pauses between accepted binds that stand out: at least `at_least_s`
    and ten times the median spacing; the `limit` longest, in time order."""
    if len(bind_ts) < 3:
        return []
    ordered = sorted(bind_ts)
    spacing = sorted(b - a for a, b in itertools.pairwise(ordered))
    bar = max(at_least_s, 10 * spacing[len(spacing) // 2])
    gaps = [(a, b - a) for a, b in itertools.pairwise(ordered) if b - a >= bar]
    return sorted(sorted(gaps, key=lambda g: -g[1])[:limit])


def replica_lanes(history: History, holders: Sequence[str]) -> dict[str, str]:
    """The timeline's lane of each identity: its replica's name when the runner recorded the
    replicas' lives (so every replica of the lease's component has a lane, standbys that never
    led included, and a restart stays on its replica's lane), else one lane per holder identity.
    Insertion order is the lanes' order: replicas by name, then holders no life names."""
    lives = history.replica_lives
    by_identity = {x.identity: x for x in lives}
    components = {by_identity[h].component for h in holders if h in by_identity}
    if lives and not components:  # nobody held this lease yet: the schedulers' lanes
        components = {"scheduler"}
    out = {
        x.identity: x.replica
        for x in sorted(lives, key=lambda x: (x.replica, x.started_at))
        if x.component in components
    }
    for h in holders:
        out.setdefault(h, h)
    return out


def pending_over_time(history: History, t0: float, width: float, nbins: int) -> list[int]:
    """Pods created and neither bound nor deleted yet, at the start of each bin (bins of `width` s
    from `t0`; from the audit log: accepted creates, binds and deletes of pods)."""
    created: dict[tuple[str, str], float] = {}
    ended: dict[tuple[str, str], float] = {}
    for r in history.audit:
        if r.resource != "pods" or r.code != "OK" or r.subresource not in ("", "binding"):
            continue
        key = (r.namespace, r.name)
        if r.verb == "create":
            created[key] = r.ts
            ended.pop(key, None)  # a name used again
        elif r.verb in ("bind", "delete") and key in created and key not in ended:
            ended[key] = r.ts
    delta = [0] * (nbins + 1)
    for key, born in created.items():
        first = max(0, int((born - t0) // width) + 1)
        last = int((ended[key] - t0) // width) + 1 if key in ended else nbins
        if first < min(last, nbins):
            delta[first] += 1
            delta[min(last, nbins)] -= 1
    out, level = [], 0
    for i in range(nbins):
        level += delta[i]
        out.append(level)
    return out


def rpc_errors_markdown(history: History) -> str:
    """Failed RPCs the run's clients saw, by gRPC code and by client (empty when there were none)."""
    if not history.rpc_errors:
        return ""
    by_code = Counter(e.code for e in history.rpc_errors)
    by_client: dict[str, Counter[str]] = {}
    for e in history.rpc_errors:
        by_client.setdefault(e.client, Counter())[e.code] += 1
    codes = sorted(by_code)
    lines = [
        "",
        f"## RPC errors by code ({len(history.rpc_errors)})",
        "",
        "| client | " + " | ".join(codes) + " |",
        "|---|" + "---|" * len(codes),
    ]
    for client in sorted(by_client):
        lines.append(f"| {client} | " + " | ".join(str(by_client[client].get(c, 0)) for c in codes) + " |")
    lines.append("| **all** | " + " | ".join(f"**{by_code[c]}**" for c in codes) + " |")
    return "\n".join(lines) + "\n"


def _label_lanes(starts: list[float], widths: list[float], max_lanes: int = 6) -> list[int]:
    """A lane per label (in `starts` order) so that no two labels in a lane overlap: each goes to the
    first lane whose last label ends before it starts (past `max_lanes`, the lane that frees first)."""
    ends: list[float] = []
    out: list[int] = []
    for start, width in zip(starts, widths, strict=True):
        lane = next((i for i, end in enumerate(ends) if end <= start), None)
        if lane is None:
            if len(ends) < max_lanes:
                ends.append(0.0)
                lane = len(ends) - 1
            else:
                lane = min(range(len(ends)), key=ends.__getitem__)
        ends[lane] = start + width
        out.append(lane)
    return out
