"""scheduler_perf's config format: parsing as upstream's decoder, $param substitution, validation,
selection (kse.schedperf.config) and the throughput sampler (kse.schedperf.metrics)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kse.schedperf.config import ConfigError, load_config, parse_config, select
from kse.schedperf.metrics import ThroughputSampler, summarize

REPO = Path(__file__).resolve().parents[2]

BASIC = """
- name: Basic
  defaultPodTemplatePath: templates/pod.yaml
  workloadTemplate:
  - opcode: createNodes
    countParam: $initNodes
  - Opcode: createPods
    CountParam: $measurePods
    collectmetrics: true
  workloads:
  - name: small
    labels: [integration-test, short]
    params: {initNodes: 5, measurePods: 10}
  - name: big
    labels: [performance]
    threshold: 680
    featureGates: {SchedulerQueueingHints: false}
    params: {initNodes: 5000, measurePods: 10000}
"""


def parse(text: str, base: Path = Path("/cfg")) -> list:  # type: ignore[type-arg]
    return parse_config(text, base, "test.yaml")


def test_parse_basic_matches_field_names_case_insensitively() -> None:
    (tc,) = parse(BASIC)
    assert tc.name == "Basic"
    assert [op.opcode for op in tc.workload_template] == ["createNodes", "createPods"]
    assert tc.workload_template[1]["CountParam"] == "$measurePods"
    assert tc.workload_template[1]["CollectMetrics"] is True
    assert tc.default_pod_template_path == "/cfg/templates/pod.yaml"  # relative to the config
    small, big = tc.workloads
    assert small.threshold == 0 and big.threshold == 680
    assert big.feature_gates == {"SchedulerQueueingHints": False}
    assert big.threshold_metric == {"Name": "SchedulingThroughput", "Labels": {}, "DataBucket": "Average",
                                    "ExpectLower": False}  # fmt: skip


def test_params_are_substituted() -> None:
    (tc,) = parse(BASIC)
    ops, params = tc.workloads[1].ops(tc)
    assert [op["Count"] for op in ops] == [5000, 10000]
    assert params.unused() == []


def test_unknown_field_names_it() -> None:
    with pytest.raises(ConfigError, match=r'op 1 \(createPods\): unknown field "collectMetric"'):
        parse(BASIC.replace("collectmetrics", "collectMetric"))


def test_unknown_test_case_field_names_it() -> None:
    with pytest.raises(ConfigError, match=r'test case 0 \(Basic\): unknown field "workload"'):
        parse(BASIC.replace("  workloads:", "  workload:"))


def test_unknown_opcode_names_it() -> None:
    with pytest.raises(ConfigError, match=r"unknown opcode 'createPod'"):
        parse(BASIC.replace("Opcode: createPods", "Opcode: createPod"))


def test_unsupported_upstream_opcode_is_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match=r"allocResourceClaims.*not supported: dynamic resource allocation"):
        parse(BASIC.replace("opcode: createNodes", "opcode: allocResourceClaims"))


def test_param_errors() -> None:
    (tc,) = parse(BASIC.replace("measurePods: 10}", "measurePod: 10}"))
    with pytest.raises(ConfigError, match="Basic/small: parameter measurePods is undefined"):
        tc.workloads[0].ops(tc)
    (tc,) = parse(BASIC.replace("measurePods: 10}", 'measurePods: "10"}'))
    with pytest.raises(ConfigError, match="parameter measurePods has the wrong type string"):
        tc.workloads[0].ops(tc)
    with pytest.raises(ConfigError, match=r"a parameter reference must start with \"\$\""):
        parse(BASIC.replace("countParam: $initNodes", "countParam: initNodes"))


def test_unused_params_are_reported() -> None:
    (tc,) = parse(BASIC.replace("measurePods: 10}", "measurePods: 10, extra: 1}"))
    _, params = tc.workloads[0].ops(tc)
    assert params.unused() == ["extra"]


CHURN_AND_STEADY = """
- name: T
  workloadTemplate:
  - opcode: createPods
    countParam: $n
    steadyStateParam: $steady
    durationParam: $duration
    collectMetrics: true
    templateParams: {color: $color, fixed: 3}
  - opcode: sleep
    durationParam: $pause
  - opcode: createPodSets
    countParam: $sets
    namespacePrefix: init-ns
    createPodsOp:
      opcode: createPods
      countParam: $perSet
  - opcode: barrier
  workloads:
  - name: w
    params: {n: 4, steady: true, duration: 1m30s, color: blue, pause: 250ms, sets: 2, perSet: 3}
"""


def test_duration_bool_template_params_and_pod_sets() -> None:
    (tc,) = parse(CHURN_AND_STEADY)
    ops, params = tc.workloads[0].ops(tc)
    create, sleep, set0, set1, barrier = ops
    assert create["Count"] == 4 and create["SteadyState"] is True and create["Duration"] == 90.0
    assert create["TemplateParams"] == {"color": "blue", "fixed": 3}
    assert sleep["Duration"] == 0.25
    assert (set0["Namespace"], set0["Count"]) == ("init-ns-0", 3)
    assert (set1["Namespace"], set1["Count"]) == ("init-ns-1", 3)
    assert [o.index for o in ops] == [0, 1, 2, 3, 4]  # positions in the unrolled list
    assert barrier["StageRequirement"] == "Scheduled"
    assert params.unused() == []


def test_bad_duration_param() -> None:
    (tc,) = parse(CHURN_AND_STEADY.replace("pause: 250ms", "pause: soon"))
    with pytest.raises(ConfigError, match="parsing duration parameter \\$pause"):
        tc.workloads[0].ops(tc)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (("collectmetrics: true", "collectmetrics: true\n    skipWaitToCompletion: true"),
         "collectMetrics and skipWaitToCompletion cannot be true"),
        (("collectmetrics: true", "collectmetrics: false"), "no op in the workload template collects"),
        (("  - name: big", "  - name: small"), "workload name small is not unique"),
        (("threshold: 680", "threshold: -1"), "invalid Threshold=-1.0"),
        (("CountParam: $measurePods", "count: -1"), "invalid Count=-1"),
    ],
)  # fmt: skip
def test_validation_as_upstream(edit: tuple[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse(BASIC.replace(*edit))


def test_churn_validation() -> None:
    text = BASIC.replace(
        "  - Opcode: createPods",
        "  - opcode: churn\n    mode: sometimes\n    templatePaths: [a.yaml]\n  - Opcode: createPods",
    )
    with pytest.raises(ConfigError, match="invalid mode: 'sometimes'"):
        parse(text)
    with pytest.raises(ConfigError, match="number cannot be 0 when mode is recreate"):
        parse(text.replace("sometimes", "recreate"))


def test_threshold_by_topic() -> None:
    (tc,) = parse(BASIC.replace("threshold: 680", "threshold: {ci: 100, local: 50}"))
    assert tc.workloads[1].threshold_by_topic == {"ci": 100.0, "local": 50.0}


def test_select_by_name_and_labels() -> None:
    cases = parse(BASIC)
    assert [w.name for _, w in select(cases, ["Basic/big"])] == ["big"]
    assert [w.name for _, w in select(cases, ["Basic"])] == ["small", "big"]
    assert [w.name for _, w in select(cases, [], "integration-test,short")] == ["small"]
    assert [w.name for _, w in select(cases, [], "-performance")] == ["small"]
    with pytest.raises(ConfigError, match="no such TEST/WORKLOAD"):
        select(cases, ["Basic/huge"])


def test_not_a_list_and_bad_yaml() -> None:
    with pytest.raises(ConfigError, match="want a list of test cases"):
        parse("name: x")
    with pytest.raises(ConfigError, match="not valid YAML"):
        parse("- [")
    with pytest.raises(ConfigError, match="no test cases defined"):
        parse("")


def test_shipped_configs_parse() -> None:
    for path in sorted((REPO / "bench" / "scheduler_perf").glob("*/performance-config.yaml")):
        cases = load_config(path)
        for tc in cases:
            if tc.default_pod_template_path:
                assert Path(tc.default_pod_template_path).is_file(), tc.default_pod_template_path
            for w in tc.workloads:
                ops, params = w.ops(tc)
                assert params.unused() == [], (tc.name, w.name)
                for op in ops:
                    for key in ("PodTemplatePath", "NodeTemplatePath"):
                        if op.get(key):
                            assert Path(op[key]).is_file(), op[key]
            assert select(cases, [], "integration-test"), f"{path}: no integration-test workload"


# ---------------------------------------------------------------- SchedulingThroughput


def test_sampler_skips_the_first_sample_and_merges_empty_intervals() -> None:
    s = ThroughputSampler()
    s.tick(1.0, 0)  # nothing scheduled yet: no sample
    s.tick(2.0, 50)  # first with pods: skipped (an outlier)
    s.tick(3.0, 150)  # 100 pods in 1 s
    s.tick(4.0, 150)  # nothing new: merged into the next
    s.tick(5.0, 250)  # 100 pods in 2 s: 50/s, recorded twice
    assert s.samples == [100.0, 50.0, 50.0]


def test_summary_as_upstream() -> None:
    got = summarize([10.0, 30.0, 20.0, 40.0])
    assert got == {"Average": 25.0, "Perc50": 20.0, "Perc90": 40.0, "Perc95": 40.0, "Perc99": 40.0}
    assert summarize([]) is None
