"""The image-locality study's inputs: the spec parser, the seeded catalog and pods, the configs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from harness.bench.image_locality import result_row
from harness.bench.image_workload import (
    SpecError,
    default_catalog,
    make_pods,
    parse_image_spec,
    scheduler_config,
)
from scheduler.profile import load_scheduler_config, new_framework

Mi = 1024 * 1024


def test_spec_inline_and_file(tmp_path: Path) -> None:
    want = {"nginx:1.27": 150 * Mi, "redis:latest": 1024 * Mi}
    assert parse_image_spec("nginx:1.27=150Mi, redis=1Gi") == want
    f = tmp_path / "images"
    f.write_text("# catalog\na:1=1Mi\nb:2=2Mi, c:3=3Mi  # trailing comment\n\n")
    assert parse_image_spec(str(f)) == {"a:1": Mi, "b:2": 2 * Mi, "c:3": 3 * Mi}


@pytest.mark.parametrize(
    ("spec", "needle"), [("nosize", "want NAME=SIZE"), ("a=lots", "image a size"), (" , ", "no images")]
)
def test_bad_spec_names_the_item(spec: str, needle: str) -> None:
    with pytest.raises(SpecError, match=needle):
        parse_image_spec(spec)


def test_same_seed_same_workload() -> None:
    assert default_catalog(7) == default_catalog(7) != default_catalog(8)
    cat = default_catalog(7)
    a, b = make_pods(50, cat, 7), make_pods(50, cat, 7)
    assert [p.SerializeToString(deterministic=True) for p in a] == [
        p.SerializeToString(deterministic=True) for p in b
    ]
    assert all(c.image in cat and c.image_pull_policy == "IfNotPresent" for p in a for c in p.spec.containers)
    # Popularity is skewed: the most used image serves more pods than an even share would.
    used = Counter(p.spec.containers[0].image for p in make_pods(1000, cat, 7))
    assert used.most_common(1)[0][1] > 1000 / len(cat) * 2


@pytest.mark.parametrize("weight", [0, 1, 10])
def test_scheduler_config_sets_image_locality_weight(weight: int) -> None:
    fwk = new_framework(load_scheduler_config(scheduler_config(weight)).profiles[0])
    if weight == 0:
        assert "ImageLocality" not in fwk.score_weights
    else:
        assert fwk.score_weights["ImageLocality"] == weight
    assert fwk.score_weights["NodeResourcesFit"] == 1  # the rest are the defaults


def test_result_row() -> None:
    row = result_row(2, [0.1, 0.2, 0.3, 0.4, 1.0], 5 * Mi, Counter({"n1": 3, "n2": 2}), nodes=4)
    assert row["weight"] == 2 and row["pods"] == 5 and row["nodes_used"] == 2
    assert row["startup_ms_p50"] == 300.0 and row["max_pods_per_node"] == 3
    assert row["startup_ms_p50"] <= row["startup_ms_p90"] <= row["startup_ms_p99"] <= 1000.0
