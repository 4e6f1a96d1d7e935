"""Live objects by type (``/debug/pprof/heap``): the gc's tracked objects counted per type, with
their shallow sizes. Not allocation sites (that needs tracemalloc from the start, which slows
every allocation): enough to see what grows, by taking two and comparing. Costs one walk of the
gc's objects while it runs (tens of ms for a few hundred thousand objects), nothing otherwise."""

from __future__ import annotations

import gc
import sys
from collections import Counter


def by_type(limit: int = 50) -> str:
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for obj in gc.get_objects():
        t = type(obj)
        name = f"{t.__module__}.{t.__qualname__}"
        counts[name] += 1
        try:
            sizes[name] += sys.getsizeof(obj)
        except TypeError:
            pass
    total = sum(counts.values())
    lines = [
        f"{total} objects tracked by the gc, {sum(sizes.values()) / 2**20:.1f} MiB shallow; gc counts "
        f"{gc.get_count()}, collections {[s['collections'] for s in gc.get_stats()]}",
        f"{'objects':>10} {'shallow bytes':>14}  type",
    ]
    for name, n in counts.most_common(limit):
        lines.append(f"{n:>10} {sizes[name]:>14}  {name}")
    return "\n".join(lines) + "\n"
