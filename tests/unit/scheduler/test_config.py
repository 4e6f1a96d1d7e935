# Expected error lines are quoted whole, so some lines are long.
# ruff: noqa: E501
"""KubeSchedulerConfiguration loading (scheduler/apis/config), checked against upstream.

Re-expresses cases of kube-scheduler's apis/config/v1/default_plugins_test.go (mergePlugins),
framework/runtime/framework_test.go (multiPoint expansion, score plugin init, framework errors),
apis/config/validation/validation_test.go and validation_pluginargs_test.go, then loads every
example in k8s-examples/scheduler-config unchanged. The plugin registry is stood in for by
upstream's facts about which extension points each in-tree plugin implements.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from scheduler.apis.config import (
    ConfigError,
    KubeSchedulerConfiguration,
    Plugin,
    PluginRef,
    Plugins,
    PluginSet,
    default_plugins,
    expand_profile,
    load_config,
    merge_plugin_set,
    merge_plugins,
    parse_duration,
)
from scheduler.apis.config.types import (
    InterPodAffinityArgs,
    NodeAffinity,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodTopologySpreadArgs,
    PreferredSchedulingTerm,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    TopologySpreadConstraint,
    UtilizationShapePoint,
)
from scheduler.apis.config.validation import (
    validate_balanced_allocation_args,
    validate_inter_pod_affinity_args,
    validate_node_affinity_args,
    validate_node_resources_fit_args,
    validate_pod_topology_spread_args,
)

EXAMPLES = Path(__file__).resolve().parents[4] / "shared" / "k8s-examples" / "scheduler-config"

# Upstream's in-tree plugins kse implements, and their extension points (as upstream's
# ExpandedPluginsV1 shows them). The real registry supplies this at runtime.
UPSTREAM_IMPLEMENTS: dict[str, set[str]] = {
    "SchedulingGates": {"preEnqueue"},
    "PrioritySort": {"queueSort"},
    "NodeUnschedulable": {"filter"},
    "NodeName": {"filter"},
    "TaintToleration": {"filter", "preScore", "score"},
    "NodeAffinity": {"preFilter", "filter", "preScore", "score"},
    "NodePorts": {"preFilter", "filter"},
    "NodeResourcesFit": {"preFilter", "filter", "preScore", "score"},
    "PodTopologySpread": {"preFilter", "filter", "preScore", "score"},
    "InterPodAffinity": {"preFilter", "filter", "preScore", "score"},
    "NodeResourcesBalancedAllocation": {"preScore", "score"},
    "ImageLocality": {"score"},
    "DefaultPreemption": {"preEnqueue", "postFilter"},
    "DefaultBinder": {"bind"},
}
KNOWN = set(UPSTREAM_IMPLEMENTS)
HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def load(
    body: str = "", *, known: set[str] | None = None, implements: dict[str, set[str]] | None = None
) -> Any:
    text = HEADER + textwrap.dedent(body)
    return load_config(
        text, known_plugins=KNOWN if known is None else known, implements=implements or UPSTREAM_IMPLEMENTS
    )


def errors_of(body: str, **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load(body, **kwargs)
    assert str(exc.value) == "\n".join(exc.value.errors)
    return exc.value.errors


def names(refs: list[PluginRef]) -> list[str]:
    return [r.name for r in refs]


def P(*entries: str | tuple[str, int]) -> list[Plugin]:
    return [Plugin(e) if isinstance(e, str) else Plugin(e[0], e[1]) for e in entries]


# ================================================================ defaults


def test_defaults_of_an_empty_configuration() -> None:
    """v1 defaults_test "empty config": every top-level default, one default-scheduler profile,
    the kse default plugins expanded as upstream's ExpandedPluginsV1 (minus what kse omits)."""
    cfg = load()
    assert cfg.parallelism == 16
    assert cfg.percentage_of_nodes_to_score == 0  # adaptive
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (1, 10)
    assert (cfg.enable_profiling, cfg.enable_contention_profiling) == (True, True)
    le = cfg.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (True, 15.0, 10.0, 2.0)
    assert (le.resource_lock, le.resource_namespace, le.resource_name) == (
        "leases",
        "kube-system",
        "kube-scheduler",
    )
    cc = cfg.client_connection
    assert (cc.content_type, cc.qps, cc.burst) == ("application/vnd.kubernetes.protobuf", 50.0, 100)
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler"]

    ex = cfg.profiles[0].expanded
    assert names(ex.pre_enqueue) == ["SchedulingGates", "DefaultPreemption"]
    assert names(ex.queue_sort) == ["PrioritySort"]
    assert names(ex.pre_filter) == [
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
    ]
    assert names(ex.filter) == [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
    ]
    assert names(ex.post_filter) == ["DefaultPreemption"]
    assert names(ex.pre_score) == [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ]
    assert [(r.name, r.weight) for r in ex.score] == [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
    ]
    assert names(ex.reserve) == names(ex.permit) == names(ex.pre_bind) == names(ex.post_bind) == []
    assert names(ex.bind) == ["DefaultBinder"]

    # PluginConfigsV1 minus VolumeBinding.
    args = {pc.name: pc.args_dict() for pc in cfg.profiles[0].plugin_config}
    assert args == {
        "DefaultPreemption": {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100},
        "InterPodAffinity": {"hardPodAffinityWeight": 1, "ignorePreferredTermsOfExistingPods": False},
        "NodeAffinity": {},
        "NodeResourcesBalancedAllocation": {
            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
        },
        "NodeResourcesFit": {
            "ignoredResources": [],
            "ignoredResourceGroups": [],
            "scoringStrategy": {
                "type": "LeastAllocated",
                "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
            },
        },
        "PodTopologySpread": {"defaultConstraints": [], "defaultingType": "System"},
    }
    assert cfg.profiles[0].plugin_args("NodeName") is None


def test_kse_default_plugin_set() -> None:
    want = [
        ("SchedulingGates", None),
        ("PrioritySort", None),
        ("NodeUnschedulable", None),
        ("NodeName", None),
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodePorts", None),
        ("NodeResourcesFit", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("DefaultPreemption", None),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("DefaultBinder", None),
    ]
    got = default_plugins(KNOWN).multi_point.enabled
    assert [(p.name, p.weight) for p in got] == want
    without_ipa = [p.name for p in default_plugins(KNOWN - {"InterPodAffinity"}).multi_point.enabled]
    assert without_ipa == [n for n, _ in want if n != "InterPodAffinity"]


def test_default_set_without_inter_pod_affinity_loads() -> None:
    impl = {k: v for k, v in UPSTREAM_IMPLEMENTS.items() if k != "InterPodAffinity"}
    cfg = load(known=set(impl), implements=impl)
    assert "InterPodAffinity" not in cfg.profiles[0].expanded.all_plugins()
    assert "InterPodAffinity" not in {pc.name for pc in cfg.profiles[0].plugin_config}
    errs = errors_of(
        """
        profiles:
        - plugins:
            filter:
              enabled:
              - name: InterPodAffinity
        """,
        known=set(impl),
        implements=impl,
    )
    assert errs == [
        'profiles[0].plugins.filter.enabled[0].name: Invalid value: "InterPodAffinity": plugin "InterPodAffinity" '
        "does not exist"
    ]


def test_explicit_plugin_args_are_defaulted() -> None:
    cfg = load(
        """
        profiles:
        - pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy:
                type: MostAllocated
                resources:
                - name: cpu
                - name: example.com/gpu
                  weight: 0
          - name: PodTopologySpread
            args: {}
          - name: NodeResourcesBalancedAllocation
            args:
              resources:
              - name: cpu
        """
    )
    fit = cfg.profiles[0].plugin_args("NodeResourcesFit")
    assert fit["scoringStrategy"]["resources"] == [
        {"name": "cpu", "weight": 1},
        {"name": "example.com/gpu", "weight": 1},
    ]
    assert cfg.profiles[0].plugin_args("PodTopologySpread")["defaultingType"] == "System"
    assert cfg.profiles[0].plugin_args("NodeResourcesBalancedAllocation") == {
        "resources": [{"name": "cpu", "weight": 1}]
    }
    # Default args are appended for enabled plugins without a pluginConfig entry, once.
    assert sorted(pc.name for pc in cfg.profiles[0].plugin_config) == [
        "DefaultPreemption",
        "InterPodAffinity",
        "NodeAffinity",
        "NodeResourcesBalancedAllocation",
        "NodeResourcesFit",
        "PodTopologySpread",
    ]


def test_top_level_fields_are_read() -> None:
    cfg = load(
        """
        parallelism: 4
        percentageOfNodesToScore: 35
        podInitialBackoffSeconds: 2
        podMaxBackoffSeconds: 20
        leaderElection:
          leaderElect: true
          leaseDuration: 1m30s
          renewDeadline: 45s
          retryPeriod: 500ms
        clientConnection:
          kubeconfig: /etc/kse/kubeconfig
          qps: 20
        profiles:
        - schedulerName: a
          percentageOfNodesToScore: 50
        """
    )
    assert (cfg.parallelism, cfg.percentage_of_nodes_to_score) == (4, 35)
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (2, 20)
    le = cfg.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (90.0, 45.0, 0.5)
    assert cfg.client_connection.kubeconfig == "/etc/kse/kubeconfig" and cfg.client_connection.qps == 20.0
    assert cfg.profiles[0].percentage_of_nodes_to_score == 50
    assert cfg.profile("a") is cfg.profiles[0] and cfg.profile("b") is None


def test_load_from_a_path(tmp_path: Path) -> None:
    f = tmp_path / "sched.yaml"
    f.write_text(HEADER + "profiles:\n- schedulerName: from-file\n")
    for arg in (f, str(f)):
        cfg = load_config(arg, known_plugins=KNOWN, implements=UPSTREAM_IMPLEMENTS)
        assert cfg.profiles[0].scheduler_name == "from-file"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("250ms", 0.25),
        ("1.5s", 1.5),
        ("0", 0.0),
        ("2h3m4s", 7384.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "s", "1x", "1s2"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


# ================================================================ mergePlugins (default_plugins_test.go)


def _filter(*entries: str | tuple[str, int], disabled: tuple[str, ...] = ()) -> Plugins:
    return Plugins(filter=PluginSet(enabled=P(*entries), disabled=P(*disabled)))


def _multi(
    *entries: str | tuple[str, int], disabled: tuple[str, ...] = (), score_disabled: tuple[str, ...] = ()
) -> Plugins:
    return Plugins(
        multi_point=PluginSet(enabled=P(*entries), disabled=P(*disabled)),
        score=PluginSet(disabled=P(*score_disabled)),
    )


MERGE_CASES: list[tuple[str, Plugins | None, Plugins, Plugins]] = [
    (
        "AppendCustomPlugin",
        _filter("CustomPlugin"),
        _filter("DefaultPlugin1", "DefaultPlugin2"),
        _filter("DefaultPlugin1", "DefaultPlugin2", "CustomPlugin"),
    ),
    (
        "InsertAfterDefaultPlugins2",
        _filter("CustomPlugin", "DefaultPlugin2", disabled=("DefaultPlugin2",)),
        _filter("DefaultPlugin1", "DefaultPlugin2"),
        _filter("DefaultPlugin1", "CustomPlugin", "DefaultPlugin2", disabled=("DefaultPlugin2",)),
    ),
    (
        "InsertBeforeAllPlugins",
        _filter("CustomPlugin", "DefaultPlugin1", "DefaultPlugin2", disabled=("*",)),
        _filter("DefaultPlugin1", "DefaultPlugin2"),
        _filter("CustomPlugin", "DefaultPlugin1", "DefaultPlugin2", disabled=("*",)),
    ),
    (
        "ReorderDefaultPlugins",
        _filter("DefaultPlugin2", "DefaultPlugin1", disabled=("*",)),
        _filter("DefaultPlugin1", "DefaultPlugin2"),
        _filter("DefaultPlugin2", "DefaultPlugin1", disabled=("*",)),
    ),
    (
        "ApplyNilCustomPlugin",
        None,
        _filter("DefaultPlugin1", "DefaultPlugin2"),
        _filter("DefaultPlugin1", "DefaultPlugin2"),
    ),
    (
        "CustomPluginOverrideDefaultPlugin",
        _filter(("Plugin1", 2), ("Plugin3", 3)),
        _filter("Plugin1", "Plugin2", "Plugin3"),
        _filter(("Plugin1", 2), "Plugin2", ("Plugin3", 3)),
    ),
    (
        "OrderPreserveAfterOverride",
        _filter(("Plugin2", 2), ("Plugin1", 1)),
        _filter("Plugin1", "Plugin2", "Plugin3"),
        _filter(("Plugin1", 1), ("Plugin2", 2), "Plugin3"),
    ),
    (
        "RepeatedCustomPlugin",
        _filter("Plugin1", ("Plugin2", 2), "Plugin3", ("Plugin2", 4)),
        _filter("Plugin1", "Plugin2", "Plugin3"),
        _filter("Plugin1", ("Plugin2", 4), "Plugin3", ("Plugin2", 2)),
    ),
    (
        "Append custom MultiPoint plugin",
        _multi("CustomPlugin"),
        _multi("DefaultPlugin1", "DefaultPlugin2"),
        _multi("DefaultPlugin1", "DefaultPlugin2", "CustomPlugin"),
    ),
    (
        "Append disabled Multipoint plugins",
        _multi(
            "CustomPlugin", "CustomPlugin2", disabled=("DefaultPlugin2",), score_disabled=("CustomPlugin2",)
        ),
        _multi("DefaultPlugin1", "DefaultPlugin2"),
        _multi(
            "DefaultPlugin1",
            "CustomPlugin",
            "CustomPlugin2",
            disabled=("DefaultPlugin2",),
            score_disabled=("CustomPlugin2",),
        ),
    ),
    (
        "override default MultiPoint plugins with custom value",
        _multi(("DefaultPlugin", 5)),
        _multi("DefaultPlugin"),
        _multi(("DefaultPlugin", 5)),
    ),
    (
        "disabled MultiPoint plugin in default set",
        _multi("CustomPlugin"),
        _multi("DefaultPlugin", disabled=("DefaultPlugin2",)),
        _multi("DefaultPlugin", "CustomPlugin", disabled=("DefaultPlugin2",)),
    ),
    (
        "disabled MultiPoint plugin in default set for specific extension point",
        _multi("CustomPlugin"),
        _multi("DefaultPlugin", score_disabled=("DefaultPlugin2",)),
        _multi("DefaultPlugin", "CustomPlugin", score_disabled=("DefaultPlugin2",)),
    ),
    (
        "multipoint with only disabled gets merged",
        _multi(disabled=("DefaultPlugin",)),
        _multi("DefaultPlugin"),
        _multi(disabled=("DefaultPlugin",)),
    ),
]


@pytest.mark.parametrize(("name", "custom", "default", "want"), MERGE_CASES, ids=[c[0] for c in MERGE_CASES])
def test_merge_plugins(name: str, custom: Plugins | None, default: Plugins, want: Plugins) -> None:
    """TestMergePlugins."""
    assert merge_plugins(default, custom) == want


def test_merge_plugin_set_keeps_the_defaults_untouched() -> None:
    default = PluginSet(enabled=P("A", "B"))
    merged = merge_plugin_set(default, PluginSet(enabled=P(("A", 7))))
    merged.enabled[0].weight = 99
    assert default.enabled == P("A", "B")


# ================================================================ expansion (framework_test.go)

TEST_PLUGIN, SCORE1, SCORE2, NORMALIZE1 = (
    "test-plugin",
    "score-plugin-1",
    "score-plugin-2",
    "score-with-normalize-plugin-1",
)
QUEUE_SORT, BIND = "no-op-queue-sort-plugin", "bind-plugin"
ALL_POINTS = {
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
}
FRAMEWORK_REGISTRY = {
    TEST_PLUGIN: ALL_POINTS,  # TestPlugin implements every interface but PreEnqueue
    SCORE1: {"preScore", "score"},
    SCORE2: {"preScore", "score"},
    NORMALIZE1: {"score"},
    "score-with-normalize-plugin-2": {"score"},
    "plugin-not-implementing-score": set(),
    "duplicate-plugin": {"preFilter"},
    QUEUE_SORT: {"queueSort"},
    BIND: {"bind"},
}


def _all(name: str, score_weight: int = 1) -> dict[str, list[tuple[str, int]]]:
    return {p: [(name, score_weight if p == "score" else 0)] for p in ALL_POINTS}


def _expanded(plugins: Plugins) -> dict[str, list[tuple[str, int]]]:
    ex = expand_profile(plugins, FRAMEWORK_REGISTRY)
    out = {}
    for point in ("preEnqueue", *sorted(ALL_POINTS)):
        refs = ex.point(point)
        if refs:
            out[point] = [(r.name, r.weight) for r in refs]
    return out


MULTI_CASES: list[tuple[str, Plugins, dict[str, list[tuple[str, int]]]]] = [
    ("plugin expansion", Plugins(multi_point=PluginSet(enabled=P((TEST_PLUGIN, 5)))), _all(TEST_PLUGIN, 5)),
    (
        "disable MultiPoint plugin at some extension points",
        Plugins(
            multi_point=PluginSet(enabled=P(TEST_PLUGIN)),
            pre_score=PluginSet(disabled=P(TEST_PLUGIN)),
            score=PluginSet(disabled=P(TEST_PLUGIN)),
        ),
        {k: v for k, v in _all(TEST_PLUGIN).items() if k not in ("preScore", "score")},
    ),
    (
        "Multiple MultiPoint plugins",
        Plugins(multi_point=PluginSet(enabled=P(TEST_PLUGIN, SCORE1))),
        {
            **_all(TEST_PLUGIN),
            "preScore": [(TEST_PLUGIN, 0), (SCORE1, 0)],
            "score": [(TEST_PLUGIN, 1), (SCORE1, 1)],
        },
    ),
    (
        "disable MultiPoint extension",
        Plugins(multi_point=PluginSet(enabled=P(TEST_PLUGIN, SCORE1)), pre_score=PluginSet(disabled=P("*"))),
        {
            **{k: v for k, v in _all(TEST_PLUGIN).items() if k != "preScore"},
            "score": [(TEST_PLUGIN, 1), (SCORE1, 1)],
        },
    ),
    (
        "Reorder MultiPoint plugins (specified extension takes precedence)",
        Plugins(
            multi_point=PluginSet(enabled=P(NORMALIZE1, TEST_PLUGIN, SCORE1)),
            score=PluginSet(enabled=P(SCORE1, TEST_PLUGIN)),
        ),
        {
            **_all(TEST_PLUGIN),
            "preScore": [(TEST_PLUGIN, 0), (SCORE1, 0)],
            "score": [(SCORE1, 1), (TEST_PLUGIN, 1), (NORMALIZE1, 1)],
        },
    ),
    (
        "Reorder MultiPoint plugins (specified extension only takes precedence when it exists in MultiPoint)",
        Plugins(
            multi_point=PluginSet(enabled=P(TEST_PLUGIN, SCORE1)),
            score=PluginSet(enabled=P(NORMALIZE1, SCORE1, TEST_PLUGIN)),
        ),
        {
            **_all(TEST_PLUGIN),
            "preScore": [(TEST_PLUGIN, 0), (SCORE1, 0)],
            "score": [(SCORE1, 1), (TEST_PLUGIN, 1), (NORMALIZE1, 1)],
        },
    ),
    (
        "Override MultiPoint plugins weights",
        Plugins(
            multi_point=PluginSet(enabled=P(TEST_PLUGIN, SCORE1)),
            score=PluginSet(enabled=P((SCORE1, 5), (TEST_PLUGIN, 3))),
        ),
        {
            **_all(TEST_PLUGIN),
            "preScore": [(TEST_PLUGIN, 0), (SCORE1, 0)],
            "score": [(SCORE1, 5), (TEST_PLUGIN, 3)],
        },
    ),
    (
        "disable and enable MultiPoint plugins with '*'",
        Plugins(multi_point=PluginSet(enabled=P(QUEUE_SORT, BIND, SCORE1), disabled=P("*"))),
        {
            "bind": [(BIND, 0)],
            "preScore": [(SCORE1, 0)],
            "queueSort": [(QUEUE_SORT, 0)],
            "score": [(SCORE1, 1)],
        },
    ),
    (
        "disable and enable MultiPoint plugin by name",
        Plugins(multi_point=PluginSet(enabled=P(BIND, QUEUE_SORT, SCORE1), disabled=P(SCORE1))),
        {
            "bind": [(BIND, 0)],
            "preScore": [(SCORE1, 0)],
            "queueSort": [(QUEUE_SORT, 0)],
            "score": [(SCORE1, 1)],
        },
    ),
    (
        "Override MultiPoint plugins weights and avoid a plugin being loaded multiple times",
        Plugins(
            multi_point=PluginSet(enabled=P(TEST_PLUGIN, SCORE1)),
            score=PluginSet(enabled=P((SCORE1, 5), (SCORE2, 5), (TEST_PLUGIN, 3))),
        ),
        {
            **_all(TEST_PLUGIN),
            "preScore": [(TEST_PLUGIN, 0), (SCORE1, 0)],
            "score": [(SCORE1, 5), (TEST_PLUGIN, 3), (SCORE2, 5)],
        },
    ),
    (
        "single Score plugin with MultiPointExpansion (TestRunScorePlugins)",
        Plugins(
            multi_point=PluginSet(enabled=P(SCORE1, QUEUE_SORT, BIND)),
            score=PluginSet(enabled=P((SCORE1, 3))),
        ),
        {
            "bind": [(BIND, 0)],
            "preScore": [(SCORE1, 0)],
            "queueSort": [(QUEUE_SORT, 0)],
            "score": [(SCORE1, 3)],
        },
    ),
]


@pytest.mark.parametrize(("name", "plugins", "want"), MULTI_CASES, ids=[c[0] for c in MULTI_CASES])
def test_multi_point_expansion(name: str, plugins: Plugins, want: dict[str, list[tuple[str, int]]]) -> None:
    """TestNewFrameworkMultiPointExpansion."""
    assert _expanded(plugins) == want


def test_multi_point_expansion_already_registered() -> None:
    """TestNewFrameworkMultiPointExpansion "Expect 'already registered' error"."""
    with pytest.raises(ConfigError, match="already registered"):
        expand_profile(
            Plugins(multi_point=PluginSet(enabled=P(TEST_PLUGIN, TEST_PLUGIN))), FRAMEWORK_REGISTRY
        )


def _score_config(*score: str) -> Plugins:
    """framework_test's buildScoreConfigDefaultWeights + newFrameworkWithQueueSortAndBind."""
    return Plugins(
        queue_sort=PluginSet(enabled=P(QUEUE_SORT)),
        bind=PluginSet(enabled=P(BIND)),
        score=PluginSet(enabled=P(*score)),
    )


@pytest.mark.parametrize(
    ("score", "error"),
    [
        (("notExist",), 'plugin "notExist" does not exist'),
        (
            ("plugin-not-implementing-score",),
            'plugin "plugin-not-implementing-score" does not extend the score extension point',
        ),
        ((), None),
        ((SCORE1,), None),
        ((NORMALIZE1,), None),
    ],
    ids=[
        "enabled Score plugin doesn't exist in registry",
        "enabled Score plugin doesn't extend the ScorePlugin interface",
        "enabled Score plugin list is empty",
        "enabled plugin only implements ScorePlugin interface",
        "enabled plugin implements ScoreWithNormalizePlugin interface",
    ],
)
def test_init_framework_with_score_plugins(score: tuple[str, ...], error: str | None) -> None:
    """TestInitFrameworkWithScorePlugins."""
    if error is None:
        ex = expand_profile(_score_config(*score), FRAMEWORK_REGISTRY)
        assert names(ex.score) == list(score)
    else:
        with pytest.raises(ConfigError, match=error):
            expand_profile(_score_config(*score), FRAMEWORK_REGISTRY)


def test_framework_errors() -> None:
    """TestNewFrameworkErrors and the queue sort / bind requirements of NewFramework."""
    dup = _score_config()
    dup.pre_filter = PluginSet(enabled=P(("duplicate-plugin", 1), ("duplicate-plugin", 1)))
    with pytest.raises(ConfigError, match="already registered"):
        expand_profile(dup, FRAMEWORK_REGISTRY)
    with pytest.raises(ConfigError, match="only one queue sort plugin required"):
        expand_profile(Plugins(bind=PluginSet(enabled=P(BIND))), FRAMEWORK_REGISTRY)
    with pytest.raises(ConfigError, match="at least one bind plugin is needed"):
        expand_profile(Plugins(queue_sort=PluginSet(enabled=P(QUEUE_SORT))), FRAMEWORK_REGISTRY)
    errs = errors_of(
        """
        profiles:
        - pluginConfig:
          - name: NodeAffinity
          - name: NodeAffinity
        """
    )
    assert errs == ['profiles[0].pluginConfig[1]: Duplicate value: "NodeAffinity"']


def test_extension_point_names_are_normalized() -> None:
    impl = {QUEUE_SORT: {"QueueSort"}, BIND: {"bind"}, SCORE1: {"pre_score", "Score", "EnqueueExtensions"}}
    ex = expand_profile(Plugins(multi_point=PluginSet(enabled=P(QUEUE_SORT, BIND, SCORE1))), impl)
    assert (names(ex.queue_sort), names(ex.pre_score), names(ex.score)) == ([QUEUE_SORT], [SCORE1], [SCORE1])


# ================================================================ validation (validation_test.go)

GOOD = """
parallelism: 8
clientConnection:
  acceptContentTypes: application/json
  contentType: application/json
  qps: 10
  burst: 10
leaderElection:
  resourceLock: leases
  leaderElect: true
  leaseDuration: 30s
  renewDeadline: 15s
  retryPeriod: 5s
  resourceNamespace: name
  resourceName: name
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
percentageOfNodesToScore: 35
profiles:
- schedulerName: me
  plugins:
    queueSort:
      enabled:
      - name: PrioritySort
    score:
      disabled:
      - name: '*'
  pluginConfig:
  - name: InterPodAffinity
    args:
      hardPodAffinityWeight: 10
- schedulerName: other
  plugins:
    queueSort:
      enabled:
      - name: PrioritySort
    bind:
      enabled:
      - name: DefaultBinder
"""


def _good(*replacements: tuple[str, str]) -> str:
    text = GOOD
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new, 1)
    return text


VALIDATION_CASES = [
    ("good", GOOD, []),
    (
        "bad-parallelism-invalid-value",
        _good(("parallelism: 8", "parallelism: 0")),
        ["parallelism: Invalid value: 0: should be an integer value greater than zero"],
    ),
    (
        "bad-resource-lock",
        _good(("resourceLock: leases", "resourceLock: configmap")),
        ['leaderElection.resourceLock: Invalid value: "configmap": resourceLock value must be "leases"'],
    ),
    (
        "bad-lease-not-longer-than-renew",
        _good(("leaseDuration: 30s", "leaseDuration: 15s")),
        [
            'leaderElection.leaseDuration: Invalid value: "15s": LeaseDuration must be greater than RenewDeadline'
        ],
    ),
    (
        "bad-percentage-of-nodes-to-score",
        _good(("percentageOfNodesToScore: 35", "percentageOfNodesToScore: 101")),
        ["percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"],
    ),
    (
        "bad-profile-percentage",
        _good(("- schedulerName: other\n", "- schedulerName: other\n  percentageOfNodesToScore: -1\n")),
        ["profiles[1].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]"],
    ),
    (
        "scheduler-name-not-set",
        _good(("- schedulerName: other\n", "- plugins:\n")).replace(
            "  plugins:\n    queueSort:\n      enabled:\n      - name: PrioritySort\n    bind",
            "    queueSort:\n      enabled:\n      - name: PrioritySort\n    bind",
        ),
        ["profiles[1].schedulerName: Required value"],
    ),
    (
        "repeated-scheduler-name",
        _good(("schedulerName: me", "schedulerName: other")),
        ['profiles[1].schedulerName: Duplicate value: "other" (also profiles[0].schedulerName)'],
    ),
    (
        "different-queue-sort",
        _good(("    bind:", "    queueSort_placeholder:")).replace(
            "queueSort:\n      enabled:\n      - name: PrioritySort\n    queueSort_placeholder:",
            "queueSort:\n      disabled:\n      - name: '*'\n    bind:",
        ),
        [
            'profiles[1].plugins.queueSort: Invalid value: {"enabled": [], "disabled": [{"name": "*"}]}: must be the same for all profiles',
            "profiles[1].plugins.queueSort: Invalid value: 0: only one queue sort plugin required for profile with scheduler name 'other', "
            "but got 0",
        ],
    ),
    (
        "bad-backoff",
        _good(
            ("podMaxBackoffSeconds: 1", "podMaxBackoffSeconds: 0"),
            ("podInitialBackoffSeconds: 1", "podInitialBackoffSeconds: 0"),
        ),
        ["podInitialBackoffSeconds: Invalid value: 0: must be greater than 0"],
    ),
    (
        "max-backoff-below-initial",
        _good(("podInitialBackoffSeconds: 1", "podInitialBackoffSeconds: 5")),
        ["podMaxBackoffSeconds: Invalid value: 1: must be greater than or equal to PodInitialBackoffSeconds"],
    ),
    (
        "invalid-plugin-args",
        _good(("hardPodAffinityWeight: 10", "hardPodAffinityWeight: 101")),
        [
            "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"
        ],
    ),
    (
        "bad-removed-plugins",
        _good(
            (
                "      - name: '*'\n",
                "      - name: '*'\n      enabled:\n      - name: EBSLimits\n        weight: 2\n",
            )
        ),
        [
            'profiles[0].plugins.score.enabled[0]: Invalid value: "EBSLimits": was invalid in version '
            '"kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is version "kubescheduler.config.k8s.io/v1")'
        ],
    ),
    (
        "good-removed-plugins-2",
        _good(
            (
                "      - name: '*'\n",
                "      - name: '*'\n      enabled:\n      - name: PodTopologySpread\n        weight: 2\n",
            )
        ),
        [],
    ),
    # Extenders: upstream validation_test.go's extender cases, then kse's stricter ones.
    (
        "good-extender",
        GOOD + "extenders:\n- urlPrefix: http://127.0.0.1:8888/\n  prioritizeVerb: prioritize\n  weight: 1\n",
        [],
    ),
    (
        "extender-negative-weight",
        GOOD + "extenders:\n- urlPrefix: http://127.0.0.1:8888/\n  prioritizeVerb: prioritize\n  weight: -2\n",
        ["extenders[0].weight: Invalid value: -2: must have a positive weight applied to it"],
    ),
    (
        "extender-duplicate-managed-resources",
        GOOD
        + "extenders:\n- urlPrefix: http://127.0.0.1:8888/\n  managedResources:\n"
        + "  - name: example.com/foo\n  - name: example.com/foo\n",
        [
            'extenders[0].managedResources[1].name: Invalid value: "example.com/foo": '
            "duplicate extender managed resource name"
        ],
    ),
    (
        "extender-native-managed-resource",
        GOOD + "extenders:\n- urlPrefix: http://127.0.0.1:8888/\n  managedResources:\n  - name: cpu\n",
        ['extenders[0].managedResources[0].name: Invalid value: "cpu": is an invalid extended resource name'],
    ),
    (
        "extender-duplicate-bind",
        GOOD
        + "extenders:\n- urlPrefix: http://127.0.0.1:8888/\n  bindVerb: bind\n"
        + "- urlPrefix: http://127.0.0.1:8889/\n  bindVerb: bind\n",
        ['extenders: Invalid value: "found 2 extenders implementing bind": only one extender can implement bind'],
    ),
    (
        "extender-without-url",
        GOOD + "extenders:\n- filterVerb: filter\n",
        ["extenders[0].urlPrefix: Required value: the extender's base URL, e.g. http://127.0.0.1:8888/scheduler"],
    ),
    (
        "extender-bad-url",
        GOOD + "extenders:\n- urlPrefix: 127.0.0.1:8888\n  filterVerb: filter\n",
        ['extenders[0].urlPrefix: Invalid value: "127.0.0.1:8888": must be an http:// or https:// URL with a host'],
    ),
    (
        "extender-https-over-http",
        GOOD + "extenders:\n- urlPrefix: http://127.0.0.1:8888\n  enableHTTPS: true\n",
        [
            'extenders[0].urlPrefix: Invalid value: "http://127.0.0.1:8888": must be an https:// URL when '
            "enableHTTPS is set"
        ],
    ),
    (
        "extender-tls-config",
        GOOD
        + "extenders:\n- urlPrefix: https://127.0.0.1:8888\n  tlsConfig:\n    caData: not-base64!\n"
        + "    certFile: /c.pem\n    keyFile: /k.pem\n    keyData: a2V5\n",
        [
            'extenders[0].tlsConfig.keyData: Forbidden: keyFile and keyData are exclusive',
            'extenders[0].tlsConfig.caData: Invalid value: "not-base64!": must be base64 '
            "(Only base64 data is allowed)",
        ],
    ),
    (
        "extender-cert-without-key",
        GOOD + "extenders:\n- urlPrefix: https://127.0.0.1:8888\n  tlsConfig:\n    certFile: /c.pem\n",
        ["extenders[0].tlsConfig.keyFile: Required value: a client certificate needs its key (keyFile or keyData)"],
    ),
    (
        "extender-negative-timeout",
        GOOD + "extenders:\n- urlPrefix: http://127.0.0.1:8888\n  filterVerb: filter\n  httpTimeout: -1s\n",
        ['extenders[0].httpTimeout: Invalid value: "-1s": must not be negative'],
    ),
]


@pytest.mark.parametrize(("name", "body", "want"), VALIDATION_CASES, ids=[c[0] for c in VALIDATION_CASES])
def test_validate_kube_scheduler_configuration(name: str, body: str, want: list[str]) -> None:
    """TestValidateKubeSchedulerConfiguration, as YAML through load_config."""
    if not want:
        load(body)
    else:
        assert errors_of(body) == want


def test_mismatched_queue_sort() -> None:
    """validation_test "mismatch-queue-sort" and "one-empty-queue-sort", plus kse's check of
    the effective (expanded) queue sort."""
    impl = {**UPSTREAM_IMPLEMENTS, "CustomSort": {"queueSort"}}
    errs = errors_of(
        """
        profiles:
        - schedulerName: me
        - schedulerName: other
          plugins:
            queueSort:
              enabled:
              - name: CustomSort
        """,
        known=set(impl),
        implements=impl,
    )
    assert errs == [
        'profiles[1].plugins.queueSort: Invalid value: {"enabled": [{"name": "CustomSort"}], "disabled": []}: '
        "must be the same for all profiles",
        # PrioritySort still comes from the defaults: upstream's framework refuses that too.
        "profiles[1].plugins.queueSort: Invalid value: 2: only one queue sort plugin required for profile with "
        "scheduler name 'other', but got 2",
    ]
    errs = errors_of(
        """
        profiles:
        - schedulerName: me
        - schedulerName: other
          plugins:
            multiPoint:
              enabled:
              - name: CustomSort
              disabled:
              - name: PrioritySort
        """,
        known=set(impl),
        implements=impl,
    )
    assert errs == [
        'profiles[1].plugins: Invalid value: "CustomSort": the queue sort plugin must be the same for all '
        'profiles (profiles[0] uses "PrioritySort")'
    ]


def test_score_weight_must_be_positive() -> None:
    errs = errors_of(
        """
        profiles:
        - schedulerName: a
        - schedulerName: b
          plugins:
            score:
              enabled:
              - name: NodeResourcesFit
                weight: 0
            multiPoint:
              enabled:
              - name: ImageLocality
                weight: -2
        """
    )
    assert errs == [
        "profiles[1].plugins.multiPoint.enabled[0].weight: Invalid value: -2: must be greater than 0 (a score weight "
        "of zero is not permitted; disable the plugin at score instead)",
        "profiles[1].plugins.score.enabled[0].weight: Invalid value: 0: must be greater than 0 (a score weight "
        "of zero is not permitted; disable the plugin at score instead)",
    ]


def test_plugin_checks_name_the_entry() -> None:
    errs = errors_of(
        """
        profiles:
        - plugins:
            preScore:
              enabled:
              - name: ImageLocality
            filter:
              enabled:
              - name: VolumeBinding
              - name: NodeName
              - name: NodeName
            postFilter:
              enabled:
              - name: DefaultPreemption
            bind:
              enabled:
              - name: ""
          pluginConfig:
          - name: MyPlugin
            args: {a: 1}
          - name: DefaultPreemption
            args: {minCandidateNodesAbsolute: -1}
        """
    )
    assert errs == [
        'profiles[0].plugins.filter.enabled[0].name: Invalid value: "VolumeBinding": plugin "VolumeBinding" is an '
        "upstream kube-scheduler plugin that kse does not implement (kse does not emulate volumes)",
        'profiles[0].plugins.filter.enabled[2].name: Duplicate value: "NodeName"',
        'profiles[0].plugins.preScore.enabled[0].name: Invalid value: "ImageLocality": plugin "ImageLocality" does '
        "not extend the preScore extension point (it implements: score)",
        "profiles[0].plugins.bind.enabled[0].name: Required value",
        'profiles[0].pluginConfig[0].name: Invalid value: "MyPlugin": plugin "MyPlugin" does not exist',
        "profiles[0].pluginConfig[1].args.minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)",
    ]


def test_default_preemption_args() -> None:
    """Upstream TestValidateDefaultPreemptionArgs and SetDefaults_DefaultPreemptionArgs."""
    cfg = load(
        """
        profiles:
        - pluginConfig:
          - name: DefaultPreemption
            args: {minCandidateNodesPercentage: 50}
        """
    )
    assert cfg.profiles[0].plugin_args("DefaultPreemption") == {
        "minCandidateNodesPercentage": 50,
        "minCandidateNodesAbsolute": 100,
    }
    errs = errors_of(
        """
        profiles:
        - pluginConfig:
          - name: DefaultPreemption
            args: {minCandidateNodesPercentage: 0, minCandidateNodesAbsolute: 0}
        """
    )
    assert errs == [
        "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the "
        "same time as minCandidateNodesAbsolute",
        "profiles[0].pluginConfig[0].args.minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the "
        "same time as minCandidateNodesPercentage",
    ]
    assert errors_of(
        """
        profiles:
        - pluginConfig:
          - name: DefaultPreemption
            args: {minCandidateNodesPercentage: 101}
        """
    ) == [
        "profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 101: not in valid range "
        "[0, 100]"
    ]


def test_disabling_every_bind_plugin_is_refused() -> None:
    errs = errors_of(
        """
        profiles:
        - plugins:
            bind:
              disabled:
              - name: '*'
        """
    )
    assert errs == [
        "profiles[0].plugins.bind: Required value: at least one bind plugin is needed for profile with "
        "scheduler name 'default-scheduler'"
    ]


def test_placement_fields_are_refused() -> None:
    errs = errors_of(
        """
        percentageOfPlacementsToScore: 10
        delayCacheUntilActive: true
        profiles:
        - percentageOfPlacementsToScore: 5
          plugins:
            placementGenerate:
              enabled:
              - name: X
        """
    )
    assert [e.split(": Forbidden:")[0] for e in errs] == [
        "profiles[0].plugins.placementGenerate",
        "profiles[0].percentageOfPlacementsToScore",
        "percentageOfPlacementsToScore",
        "delayCacheUntilActive",
    ]


# ================================================================ strict decoding


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (
            "foo: 1\n",
            "foo: Unknown field: KubeSchedulerConfiguration in kubescheduler.config.k8s.io/v1 has no field 'foo'",
        ),
        (
            "profiles:\n- schedulername: x\n",
            "profiles[0].schedulername: Unknown field: KubeSchedulerProfile in "
            "kubescheduler.config.k8s.io/v1 has no field 'schedulername' (did you mean \"schedulerName\"?)",
        ),
        ("profiles:\n- plugins:\n    scores: {}\n", "profiles[0].plugins.scores: Unknown field: Plugins in"),
        (
            "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: A\n        wieght: 2\n",
            "profiles[0].plugins.score.enabled[0].wieght: Unknown field",
        ),
        ("parallelism: two\n", "parallelism: Invalid value: 'two': must be an integer"),
        ("parallelism: true\n", "parallelism: Invalid value: True: must be an integer"),
        (
            "percentageOfNodesToScore: 1.5\n",
            "percentageOfNodesToScore: Invalid value: 1.5: must be an integer",
        ),
        ("profiles: {}\n", "profiles: Invalid value: must be a list, not a mapping"),
        (
            "leaderElection:\n  leaseDuration: 15\n",
            "leaderElection.leaseDuration: Invalid value: must be a duration string",
        ),
        (
            "leaderElection:\n  leaseDuration: 15 seconds\n",
            'leaderElection.leaseDuration: Invalid value: "15 seconds"',
        ),
        (
            "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        typ: MostAllocated\n",
            "profiles[0].pluginConfig[0].args.scoringStrategy.typ: Unknown field: ScoringStrategy",
        ),
        (
            "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n    args:\n      kind: InterPodAffinityArgs\n",
            'profiles[0].pluginConfig[0].args.kind: Invalid value: "InterPodAffinityArgs": args for plugin NodeAffinity '
            "must be of kind NodeAffinityArgs",
        ),
        (
            "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n    args: [1]\n",
            "profiles[0].pluginConfig[0].args: Invalid value: must be a mapping, not a list",
        ),
    ],
)
def test_strict_decoding(body: str, want: str) -> None:
    errs = errors_of(body)
    assert len(errs) == 1 and errs[0].startswith(want), errs


def test_strict_decoding_accepts_args_type_meta_and_nulls() -> None:
    cfg = load(
        """
        parallelism: null
        profiles:
        - pluginConfig:
          - name: InterPodAffinity
            args:
              apiVersion: kubescheduler.config.k8s.io/v1
              kind: InterPodAffinityArgs
              hardPodAffinityWeight: 5
        """
    )
    assert cfg.parallelism == 16
    assert cfg.profiles[0].plugin_args("InterPodAffinity")["hardPodAffinityWeight"] == 5


def test_duplicate_keys_are_refused() -> None:
    errs = errors_of("profiles:\n- schedulerName: a\n  schedulerName: b\n")
    assert errs == ['line 5, column 3: duplicate field "schedulerName"']


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (
            "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
            'apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v1beta3": removed from kube-scheduler in v1.29',
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v2\nkind: KubeSchedulerConfiguration\n",
            'apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v2": supported values: "kubescheduler.config.k8s.io/v1"',
        ),
        (
            "kind: KubeSchedulerConfiguration\n",
            'apiVersion: Required value: must be "kubescheduler.config.k8s.io/v1"',
        ),
        (
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: Pod\n",
            'kind: Unsupported value: "Pod": supported values: "KubeSchedulerConfiguration"',
        ),
        ("", "the file holds no KubeSchedulerConfiguration"),
        ("- a\n", "the document must be a mapping"),
        (HEADER + "---\n" + HEADER, "expected one KubeSchedulerConfiguration, found 2 YAML documents"),
        ("a: [\n", "invalid YAML"),
    ],
)
def test_document_errors(text: str, want: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(text, known_plugins=KNOWN, implements=UPSTREAM_IMPLEMENTS)
    assert exc.value.errors[0].startswith(want), exc.value.errors


def test_every_problem_is_reported() -> None:
    errs = errors_of(
        """
        parallelism: -1
        percentageOfNodesToScore: 200
        profiles:
        - plugins:
            score:
              enabled:
              - name: MyPlugin
          pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy:
                type: Random
        """
    )
    assert [e.split(":")[0] for e in errs] == [
        "profiles[0].plugins.score.enabled[0].name",
        "parallelism",
        "profiles[0].pluginConfig[0].args.scoringStrategy.type",
        "percentageOfNodesToScore",
    ]


# ================================================================ plugin args (validation_pluginargs_test.go)


def _fields(errs: list[str]) -> list[str]:
    return [e.split(": ")[0] for e in errs]


def _spread(
    *cs: tuple[int, str, str], selector: bool = False, defaulting: str = "List"
) -> PodTopologySpreadArgs:
    return PodTopologySpreadArgs(
        default_constraints=[
            TopologySpreadConstraint(
                m, k, w, label_selector={"matchLabels": {"a": "b"}} if selector else None
            )
            for m, k, w in cs
        ],
        defaulting_type=defaulting,
    )


SPREAD_CASES = [
    ("valid config", _spread((1, "node", "DoNotSchedule"), (2, "zone", "ScheduleAnyway")), []),
    ("maxSkew less than zero", _spread((-1, "node", "DoNotSchedule")), ["a.defaultConstraints[0].maxSkew"]),
    ("empty topology key", _spread((1, "", "DoNotSchedule")), ["a.defaultConstraints[0].topologyKey"]),
    ("whenUnsatisfiable is empty", _spread((1, "node", "")), ["a.defaultConstraints[0].whenUnsatisfiable"]),
    (
        "whenUnsatisfiable contains unsupported action",
        _spread((1, "node", "unknown action")),
        ["a.defaultConstraints[0].whenUnsatisfiable"],
    ),
    (
        "duplicated constraints",
        _spread((1, "node", "DoNotSchedule"), (2, "node", "DoNotSchedule")),
        ["a.defaultConstraints[1]"],
    ),
    (
        "label selector present",
        _spread((1, "key", "DoNotSchedule"), selector=True),
        ["a.defaultConstraints[0].labelSelector"],
    ),
    ("list default constraints, no constraints", _spread(), []),
    ("system default constraints", _spread(defaulting="System"), []),
    ("wrong constraints", _spread(defaulting="unknown"), ["a.defaultingType"]),
    (
        "system default constraints, but has constraints",
        _spread((1, "key", "DoNotSchedule"), defaulting="System"),
        ["a.defaultingType"],
    ),
    ("invalid topology key", _spread((1, "a/b/c", "DoNotSchedule")), ["a.defaultConstraints[0].topologyKey"]),
]


@pytest.mark.parametrize(("name", "args", "want"), SPREAD_CASES, ids=[c[0] for c in SPREAD_CASES])
def test_validate_pod_topology_spread_args(name: str, args: PodTopologySpreadArgs, want: list[str]) -> None:
    """TestValidatePodTopologySpreadArgs."""
    assert _fields(validate_pod_topology_spread_args("a", args)) == want


@pytest.mark.parametrize(
    ("resources", "want"),
    [
        ([("cpu", 1), ("memory", 1)], []),
        ([("cpu", 2), ("memory", 1)], ["a.resources[0].weight"]),
        ([("cpu", 1), ("cpu", 1)], ["a.resources[1].name"]),
    ],
    ids=["valid config", "invalid config", "repeated resources"],
)
def test_validate_balanced_allocation_args(resources: list[tuple[str, int]], want: list[str]) -> None:
    """TestValidateNodeResourcesBalancedAllocationArgs."""
    args = NodeResourcesBalancedAllocationArgs([ResourceSpec(n, w) for n, w in resources])
    assert _fields(validate_balanced_allocation_args("a", args)) == want


@pytest.mark.parametrize(
    ("weight", "want"),
    [(10, []), (-1, ["a.hardPodAffinityWeight"]), (101, ["a.hardPodAffinityWeight"])],
    ids=["valid args", "hardPodAffinityWeight less than min", "hardPodAffinityWeight more than max"],
)
def test_validate_inter_pod_affinity_args(weight: int, want: list[str]) -> None:
    """TestValidateInterPodAffinityArgs."""
    assert _fields(validate_inter_pod_affinity_args("a", InterPodAffinityArgs(weight))) == want


def _affinity(
    key: str, op: str, values: list[str], field_values: list[str], field_op: str = "In"
) -> NodeAffinityArgs:
    return NodeAffinityArgs(
        NodeAffinity(
            required_during_scheduling_ignored_during_execution=NodeSelector(
                [NodeSelectorTerm(match_expressions=[NodeSelectorRequirement(key, op, values)])]
            ),
            preferred_during_scheduling_ignored_during_execution=[
                PreferredSchedulingTerm(
                    1,
                    NodeSelectorTerm(
                        match_fields=[NodeSelectorRequirement("metadata.name", field_op, field_values)]
                    ),
                )
            ],
        )
    )


REQ = (
    "a.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"
)
PREF = "a.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].matchFields[0]"
AFFINITY_CASES = [
    ("empty", NodeAffinityArgs(), []),
    ("valid added affinity", _affinity("label-1", "In", ["label-1-val"], ["node-1"]), []),
    (
        "invalid added affinity",
        _affinity("invalid/label/key", "In", ["label-1-val"], ["node-1", "node-2"]),
        [f"{REQ}.key", f"{PREF}.values"],
    ),
    (
        "unsupported operator",
        _affinity("k", "Equals", ["v"], ["n"], field_op="Exists"),
        [f"{REQ}.operator", f"{PREF}.operator"],
    ),
    ("In without values", _affinity("k", "In", [], ["n"]), [f"{REQ}.values"]),
    ("Exists with values", _affinity("k", "Exists", ["v"], ["n"]), [f"{REQ}.values"]),
    ("Gt with a non-integer", _affinity("k", "Gt", ["ten"], ["n"]), [f"{REQ}.values[0]"]),
    ("invalid label value", _affinity("k", "In", ["-bad-"], ["n"]), [f"{REQ}.values[0][k]"]),
]


@pytest.mark.parametrize(("name", "args", "want"), AFFINITY_CASES, ids=[c[0] for c in AFFINITY_CASES])
def test_validate_node_affinity_args(name: str, args: NodeAffinityArgs, want: list[str]) -> None:
    """TestValidateNodeAffinityArgs (+ labels.NewRequirement's rules)."""
    assert _fields(validate_node_affinity_args("a", args)) == want


_DEFAULT_STRATEGY = ScoringStrategy("LeastAllocated", [ResourceSpec("cpu", 1), ResourceSpec("memory", 1)])
FIT_CASES = [
    (
        "IgnoredResources: too long value",
        NodeResourcesFitArgs(["longvalue" + "a" * 64], [], _DEFAULT_STRATEGY),
        "name part must be no more than 63",
    ),
    (
        "IgnoredResources: name is empty",
        NodeResourcesFitArgs(["example.com/"], [], _DEFAULT_STRATEGY),
        "name part must be non-empty",
    ),
    (
        "IgnoredResources: name has too many slash",
        NodeResourcesFitArgs(["example.com/aaa/bbb"], [], _DEFAULT_STRATEGY),
        "must consist of alphanumeric characters",
    ),
    ("IgnoredResources: valid args", NodeResourcesFitArgs(["example.com"], [], _DEFAULT_STRATEGY), None),
    ("IgnoredResourceGroups: valid args", NodeResourcesFitArgs([], ["example.com"], _DEFAULT_STRATEGY), None),
    (
        "IgnoredResourceGroups: illegal args",
        NodeResourcesFitArgs([], ["example.com/"], _DEFAULT_STRATEGY),
        "name part must be non-empty",
    ),
    (
        "IgnoredResourceGroups: name is too long",
        NodeResourcesFitArgs([], ["a" * 64], _DEFAULT_STRATEGY),
        "name part must be no more than 63",
    ),
    (
        "IgnoredResourceGroups: name cannot be contain slash",
        NodeResourcesFitArgs([], ["example.com/aa"], _DEFAULT_STRATEGY),
        "resource group name can't contain '/'",
    ),
    ("ScoringStrategy: field is required", NodeResourcesFitArgs(), "ScoringStrategy field is required"),
    (
        "ScoringStrategy: unsupported type",
        NodeResourcesFitArgs(scoring_strategy=ScoringStrategy("Random")),
        'Unsupported value: "Random": supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"',
    ),
    (
        "ScoringStrategy: shape given for MostAllocated",
        NodeResourcesFitArgs(
            scoring_strategy=ScoringStrategy("MostAllocated", [], RequestedToCapacityRatioParam([]))
        ),
        "requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio",
    ),
]


@pytest.mark.parametrize(("name", "args", "want"), FIT_CASES, ids=[c[0] for c in FIT_CASES])
def test_validate_fit_args(name: str, args: NodeResourcesFitArgs, want: str | None) -> None:
    """TestValidateFitArgs."""
    errs = validate_node_resources_fit_args("a", args)
    if want is None:
        assert errs == []
    else:
        assert any(want in e for e in errs), errs


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize(
    ("resources", "want"),
    [
        (None, []),
        ([("cpu", 1), ("memory", 10)], []),
        ([("cpu", 0)], ["resources[0].weight"]),
        ([("cpu", 101)], ["resources[0].weight"]),
        ([("cpu", 0), ("memory", 101)], ["resources[0].weight", "resources[1].weight"]),
    ],
    ids=[
        "default config",
        "multi valid resources",
        "weight less than min",
        "weight greater than max",
        "multi invalid resources",
    ],
)
def test_validate_allocated_scoring_strategy(strategy: str, resources: Any, want: list[str]) -> None:
    """TestValidateLeastAllocatedScoringStrategy and TestValidateMostAllocatedScoringStrategy."""
    res = [ResourceSpec(n, w) for n, w in resources or []]
    errs = validate_node_resources_fit_args(
        "a", NodeResourcesFitArgs(scoring_strategy=ScoringStrategy(strategy, res))
    )
    assert _fields(errs) == [f"a.scoringStrategy.{w}" for w in want]


_SHAPE = [(30, 3)]
RTCR_CASES = [
    ("no shapes", None, [], ["requestedToCapacityRatio.shape"]),
    ("weight greater than max", [("cpu", 101)], _SHAPE, ["resources[0].weight"]),
    ("weight less than min", [("cpu", 0)], _SHAPE, ["resources[0].weight"]),
    ("valid shapes", None, _SHAPE, []),
    ("utilization less than min", None, [(-1, 3)], ["requestedToCapacityRatio.shape[0].utilization"]),
    ("utilization greater than max", None, [(101, 3)], ["requestedToCapacityRatio.shape[0].utilization"]),
    (
        "duplicated utilization values",
        None,
        [(10, 3), (10, 3)],
        ["requestedToCapacityRatio.shape[1].utilization"],
    ),
    ("increasing utilization values", None, [(10, 3), (20, 3), (30, 3)], []),
    (
        "non-increasing utilization values",
        None,
        [(10, 3), (20, 3), (15, 3)],
        ["requestedToCapacityRatio.shape[2].utilization"],
    ),
    ("score less than min", None, [(10, -1)], ["requestedToCapacityRatio.shape[0].score"]),
    ("score greater than max", None, [(10, 11)], ["requestedToCapacityRatio.shape[0].score"]),
]


@pytest.mark.parametrize(("name", "resources", "shape", "want"), RTCR_CASES, ids=[c[0] for c in RTCR_CASES])
def test_validate_requested_to_capacity_ratio(name: str, resources: Any, shape: Any, want: list[str]) -> None:
    """TestValidateRequestedToCapacityRatioScoringStrategy."""
    strategy = ScoringStrategy(
        "RequestedToCapacityRatio",
        [ResourceSpec(n, w) for n, w in resources or []],
        RequestedToCapacityRatioParam([UtilizationShapePoint(u, s) for u, s in shape]),
    )
    errs = validate_node_resources_fit_args("a", NodeResourcesFitArgs(scoring_strategy=strategy))
    assert _fields(errs) == [f"a.scoringStrategy.{w}" for w in want]


def test_requested_to_capacity_ratio_needs_its_param() -> None:
    errs = errors_of(
        """
        profiles:
        - pluginConfig:
          - name: NodeResourcesFit
            args:
              scoringStrategy:
                type: RequestedToCapacityRatio
        """
    )
    assert errs == [
        "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio: Required value: must be "
        "specified when type is RequestedToCapacityRatio"
    ]


# ================================================================ the Kubernetes documentation's examples

# File -> None (loads) or the exact error lines kse gives.
EXAMPLE_OUTCOMES: dict[str, list[str] | None] = {
    "resource-bin-packing-1.yaml": None,
    "resource-bin-packing-2.yaml": None,
    "scheduling-config-1.yaml": None,
    "scheduling-config-2.yaml": [
        'profiles[0].plugins.score.enabled[0].name: Invalid value: "MyCustomPluginA": plugin "MyCustomPluginA" does not exist',
        'profiles[0].plugins.score.enabled[1].name: Invalid value: "MyCustomPluginB": plugin "MyCustomPluginB" does not exist',
    ],
    "scheduling-config-3.yaml": None,
    "scheduling-config-4.yaml": [
        'profiles[0].plugins.multiPoint.enabled[0].name: Invalid value: "MyPlugin": plugin "MyPlugin" does not exist'
    ],
    "scheduling-config-5.yaml": [
        f'profiles[0].plugins.{p}.enabled[0].name: Invalid value: "MyPlugin": plugin "MyPlugin" does not exist'
        for p in ("preFilter", "filter", "preScore", "score")
    ],
    "scheduling-config-6.yaml": [
        'profiles[0].plugins.multiPoint.enabled[0].name: Invalid value: "MyPlugin": plugin "MyPlugin" does not exist'
    ],
    "scheduling-config-7.yaml": [
        'profiles[0].plugins.score.enabled[0].name: Invalid value: "DefaultScore2": plugin "DefaultScore2" does not exist'
    ],
    "scheduling-config-8.yaml": [
        'profiles[0].plugins.multiPoint.enabled[0].name: Invalid value: "CustomQueueSort": plugin "CustomQueueSort" does not exist',
        'profiles[0].plugins.multiPoint.enabled[1].name: Invalid value: "CustomPlugin1": plugin "CustomPlugin1" does not exist',
        'profiles[0].plugins.multiPoint.enabled[2].name: Invalid value: "CustomPlugin2": plugin "CustomPlugin2" does not exist',
        'profiles[0].plugins.score.enabled[0].name: Invalid value: "DefaultPlugin2": plugin "DefaultPlugin2" does not exist',
    ],
    # The newest v1 API has placementScore (alpha), so strict decoding accepts it; kse refuses it.
    "topology-aware-scheduling-1.yaml": [
        "profiles[0].plugins.placementScore: Forbidden: the placementScore extension point belongs to alpha "
        "workload-aware (pod group) scheduling, feature gate TopologyAwareWorkloadScheduling, which kse does not implement"
    ],
    "topology-spread-constraints-1.yaml": None,
    "topology-spread-constraints-2.yaml": None,
}


def _example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.y*ml")) if EXAMPLES.is_dir() else []


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"the Kubernetes examples are not at {EXAMPLES}")
@pytest.mark.parametrize("path", _example_files(), ids=lambda p: p.name)
def test_kubernetes_example(path: Path) -> None:
    """Every scheduler-config example loads, or is refused naming what kse does not support."""
    want = EXAMPLE_OUTCOMES.get(path.name, "unknown")
    try:
        cfg = load_config(path, known_plugins=KNOWN, implements=UPSTREAM_IMPLEMENTS)
    except ConfigError as e:
        assert e.source == str(path)
        if want == "unknown":  # a new example: at least every line must name a field
            assert all(": " in line for line in e.errors), e.errors
        else:
            assert e.errors == want
        return
    assert want in (None, "unknown"), f"expected ConfigError {want}"
    assert isinstance(cfg, KubeSchedulerConfiguration)
    for profile in cfg.profiles:
        assert profile.expanded is not None and profile.expanded.bind


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"the Kubernetes examples are not at {EXAMPLES}")
def test_kubernetes_examples_in_detail() -> None:
    def ex(name: str) -> KubeSchedulerConfiguration:
        return load_config(EXAMPLES / name, known_plugins=KNOWN, implements=UPSTREAM_IMPLEMENTS)

    assert (
        ex("scheduling-config-1.yaml").client_connection.kubeconfig
        == "/etc/srv/kubernetes/kube-scheduler/kubeconfig"
    )
    fit = ex("resource-bin-packing-1.yaml").profiles[0].plugin_args("NodeResourcesFit")
    assert fit["scoringStrategy"]["type"] == "MostAllocated"
    assert [r["weight"] for r in fit["scoringStrategy"]["resources"]] == [1, 1, 3, 3]
    rtcr = ex("resource-bin-packing-2.yaml").profiles[0].plugin_args("NodeResourcesFit")
    assert rtcr["scoringStrategy"]["requestedToCapacityRatio"]["shape"] == [
        {"utilization": 0, "score": 0},
        {"utilization": 100, "score": 10},
    ]
    two = ex("scheduling-config-3.yaml")
    assert [p.scheduler_name for p in two.profiles] == ["default-scheduler", "no-scoring-scheduler"]
    no_scoring = two.profiles[1].expanded
    assert no_scoring.score == [] and no_scoring.pre_score == [] and names(no_scoring.filter)
    spread = ex("topology-spread-constraints-1.yaml").profiles[0].plugin_args("PodTopologySpread")
    assert (
        spread["defaultingType"] == "List"
        and spread["defaultConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    )
    assert (
        ex("topology-spread-constraints-2.yaml")
        .profiles[0]
        .plugin_args("PodTopologySpread")["defaultConstraints"]
        == []
    )


@pytest.mark.skipif(not EXAMPLES.is_dir(), reason=f"the Kubernetes examples are not at {EXAMPLES}")
def test_placeholder_examples_load_once_their_plugins_exist() -> None:
    """With placeholder plugins registered, the docs' plugin examples expand as upstream says."""
    impl = {
        **UPSTREAM_IMPLEMENTS,
        "MyPlugin": {"preFilter", "filter", "preScore", "score"},
        "MyCustomPluginA": {"score"},
        "MyCustomPluginB": {"score"},
        "CustomQueueSort": {"queueSort"},
        "CustomPlugin1": {"filter", "score"},
        "CustomPlugin2": {"filter"},
        "DefaultPlugin2": {"score"},
    }

    def ex(name: str) -> Any:
        return load_config(EXAMPLES / name, known_plugins=set(impl), implements=impl).profiles[0].expanded

    two = ex("scheduling-config-2.yaml")
    assert ("PodTopologySpread" not in names(two.score)) and names(two.score)[-2:] == [
        "MyCustomPluginA",
        "MyCustomPluginB",
    ]
    assert two.score_weights()["MyCustomPluginA"] == 2
    four, five = ex("scheduling-config-4.yaml"), ex("scheduling-config-5.yaml")
    for point in ("preFilter", "filter", "preScore", "score"):
        assert names(four.point(point))[-1] == "MyPlugin" and names(five.point(point))[-1] == "MyPlugin"
    six = ex("scheduling-config-6.yaml")
    assert names(six.score) == [] and "MyPlugin" in names(six.filter)
    # Block 8 disables "DefaultQueueSort", a placeholder: PrioritySort stays, so two queue sorts.
    with pytest.raises(ConfigError) as exc:
        ex("scheduling-config-8.yaml")
    assert exc.value.errors == [
        "profiles[0].plugins.queueSort: Invalid value: 2: only one queue sort plugin required for profile "
        "with scheduler name 'multipoint-scheduler', but got 2"
    ]
