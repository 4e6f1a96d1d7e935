"""The image-locality study's outputs: the table on stdout, and `--report DIR`'s `report.md`,
`results.json` and `latency.png`.

matplotlib is imported inside `plot_latency` only (Agg canvas, no pyplot state), as the chaos
report does; without it the PNG is skipped with a note.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kse.fileio import write_atomic

if TYPE_CHECKING:
    from harness.bench.image_locality import ImageBenchConfig

GiB = float(1 << 30)
COLUMNS = (
    ("weight", "ImageLocality weight", "{}"),
    ("startup_ms_p50", "start-up p50 (ms)", "{:.0f}"),
    ("startup_ms_p90", "p90 (ms)", "{:.0f}"),
    ("startup_ms_p99", "p99 (ms)", "{:.0f}"),
    ("bytes_pulled", "pulled (GiB)", None),
    ("max_pods_per_node", "max pods/node", "{}"),
    ("nodes_used", "nodes used", "{}"),
)


def _cell(key: str, fmt: str | None, row: dict[str, Any]) -> str:
    if key == "bytes_pulled":
        return f"{row[key] / GiB:.2f}"
    return (fmt or "{}").format(row[key])


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    header = [title for _, title, _ in COLUMNS]
    body = [[_cell(k, f, r) for k, _, f in COLUMNS] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for b in body:
        print("  ".join(c.rjust(w) for c, w in zip(b, widths, strict=True)))


def to_markdown(cfg: ImageBenchConfig, rows: Sequence[dict[str, Any]]) -> str:
    catalog = cfg.catalog()
    lines = [
        "# Image locality: pod start-up against ImageLocality's weight",
        "",
        f"{cfg.nodes} nodes ({cfg.node_cpu} CPU, {cfg.node_memory}), {cfg.pod_count} pods created at "
        f"{cfg.rate:g}/s, seed {cfg.seed}; each node starts with each image with probability "
        f"{cfg.image_fraction:g}; node links {cfg.node_bandwidth / (1 << 20):g} MiB/s (serial pulls), "
        f"registry {cfg.registry_bandwidth / (1 << 20):g} MiB/s shared by every pull in flight.",
        "",
        "| " + " | ".join(title for _, title, _ in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += ["| " + " | ".join(_cell(k, f, r) for k, _, f in COLUMNS) + " |" for r in rows]
    lines += [
        "",
        "Start-up is created (create answered) -> Running (seen on a watch); weight 0 is ImageLocality "
        "disabled. Catalog:",
        "",
        "| image | size (MiB) |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {size / (1 << 20):.0f} |" for name, size in catalog.items()]
    return "\n".join(lines) + "\n"


def plot_latency(rows: Sequence[dict[str, Any]], out: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    weights = [r["weight"] for r in rows]
    for key, label, style in (
        ("startup_ms_p50", "p50", "o-"),
        ("startup_ms_p90", "p90", "s-"),
        ("startup_ms_p99", "p99", "^-"),
    ):
        ax.plot(weights, [r[key] / 1000.0 for r in rows], style, label=label)
    ax.set_xlabel("ImageLocality weight (0: disabled)")
    ax.set_ylabel("pod start-up, created -> Running (s, log scale)")
    ax.set_yscale("log")  # the tails span milliseconds to minutes
    ax.set_xticks(weights)
    ax.grid(True, alpha=0.3)
    bytes_ax = ax.twinx()
    bytes_ax.bar(weights, [r["bytes_pulled"] / GiB for r in rows], width=0.4, alpha=0.2, color="gray",
                 label="bytes pulled")  # fmt: skip
    bytes_ax.set_ylabel("pulled from the registry (GiB)")
    handles, labels = ax.get_legend_handles_labels()
    h2, l2 = bytes_ax.get_legend_handles_labels()
    ax.legend(handles + h2, labels + l2, loc="upper right")
    ax.set_zorder(bytes_ax.get_zorder() + 1)
    ax.patch.set_visible(False)
    fig.suptitle("Start-up latency and bytes pulled against ImageLocality weight")
    fig.tight_layout()
    fig.savefig(out, format="png")


def write_report(directory: Path, cfg: ImageBenchConfig, rows: Sequence[dict[str, Any]]) -> list[Path]:
    """Write the report files; returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    md = directory / "report.md"
    write_atomic(md, to_markdown(cfg, rows))
    results = directory / "results.json"
    settings = {k: v for k, v in asdict(cfg).items() if k != "images"}
    settings["catalog"] = cfg.catalog()
    write_atomic(results, json.dumps({"config": settings, "weights": list(rows)}, indent=2) + "\n")
    written = [md, results]
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        md.write_text(md.read_text() + "\n(matplotlib is not installed: no latency.png)\n")
        return written
    png = directory / "latency.png"
    plot_latency(rows, png)
    written.append(png)
    return written
