"""The rolling-upgrade fields of a scenario: `node-upgrade` faults and `cluster.deployments` /
`cluster.controller_managers`, their defaults, `--short`, and errors naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from chaos.node_upgrade import NodeUpgradeError, batches, drain_options, pick_nodes
from chaos.scenario import DeploymentSpec, FaultSpec, ScenarioError, parse_scenario
from chaos.upgrade_workload import deployment_object, pdb_object
from kse.objects.intstr import int_or_string


def scenario(fault: dict[str, Any] | None = None, **cluster: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "duration": 60,
        "cluster": {"nodes": 10, **cluster},
        "faults": [{"at": 5, "fault": "node-upgrade", "nodes": 4, **(fault or {})}],
    }


def error_of(data: object) -> str:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(data, source="x.yaml")
    return str(e.value)


def test_node_upgrade_defaults() -> None:
    s = parse_scenario(scenario())
    (f,) = s.faults
    assert f == FaultSpec("node-upgrade", "nodes", at=5.0, nodes=4, batch=1, pause=0.0)
    assert s.node_upgrades and s.controller_managers is None and s.deployments == ()
    assert "4 in batches of 1" in f.describe()


def test_node_upgrade_every_field() -> None:
    f = parse_scenario(
        scenario({"nodes": ["nodesim-1", "nodesim-3"], "batch": 2, "pause": 3, "grace": 5, "timeout": 30})
    ).faults[0]
    assert (f.nodes, f.batch, f.pause, f.grace, f.timeout) == (("nodesim-1", "nodesim-3"), 2, 3.0, 5, 30.0)
    opts = drain_options(f)
    assert opts.force and opts.ignore_daemonsets and opts.delete_emptydir_data
    assert (opts.grace_period, opts.timeout) == (5, 30.0)
    assert drain_options(parse_scenario(scenario()).faults[0]).grace_period == -1  # the pods' own


def test_deployments_and_controller_managers() -> None:
    s = parse_scenario(
        scenario(
            controller_managers=1,
            deployments=[
                {"name": "web", "replicas": 6, "pdb": {"minAvailable": 5}},
                {"name": "api", "replicas": 4, "pdb": {"maxUnavailable": "25%"}},
                {"name": "db"},
            ],
        )
    )
    assert s.controller_managers == 1
    assert s.deployments == (
        DeploymentSpec("web", 6, min_available=5),
        DeploymentSpec("api", 4, max_unavailable="25%"),
        DeploymentSpec("db", 1),
    )
    web, api, db = s.deployments
    d = deployment_object(web)
    assert d.spec.replicas == 6 and dict(d.spec.selector.match_labels) == {"app": "web"}
    assert dict(d.spec.template.metadata.labels) == {"app": "web"}
    b = pdb_object(web)
    assert (
        b is not None and int_or_string(b.spec.min_available) == 5 and not b.spec.HasField("max_unavailable")
    )
    b = pdb_object(api)
    assert b is not None and int_or_string(b.spec.max_unavailable) == "25%"
    assert pdb_object(db) is None


def test_short_keeps_the_upgrade_within_the_short_cluster() -> None:
    s = parse_scenario(scenario({"nodes": 8, "batch": 2, "pause": 10, "duration": 2})).short()
    (f,) = s.faults
    assert f.nodes == 5 and f.batch == 2  # at most the short form's 5 nodes
    assert f.duration == 2.0  # a kubelet's downtime is not scaled with the lease
    assert f.pause is not None and 0 < f.pause < 10  # scaled with the run


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (scenario({"nodes": None}), "faults[0].nodes: required"),
        (scenario({"nodes": 0}), "faults[0].nodes: must be >= 1"),
        (scenario({"nodes": 11}), "faults[0].nodes: the cluster has 10 nodes"),
        (scenario({"nodes": "all"}), "faults[0].nodes: must be an integer"),
        (scenario({"nodes": []}), "faults[0].nodes: a list of node names"),
        (scenario({"nodes": ["a", "a"]}), "faults[0].nodes: names a node twice"),
        (scenario({"batch": 0}), "faults[0].batch: must be >= 1"),
        (scenario({"pause": -1}), "faults[0].pause: must be >= 0"),
        (scenario({"grace": 1.5}), "faults[0].grace: must be an integer"),
        (scenario({"timeout": 0}), "faults[0].timeout: must be > 0"),
        (scenario({"target": "leader"}), "faults[0].target: a node-upgrade's target is `nodes`"),
        (scenario({"fault": "kill", "target": "nodes"}), "faults[0].nodes: only node-upgrade faults"),
        (
            scenario({"fault": "kill", "target": "nodes", "nodes": None}),
            "`nodes` is the target of node-upgrade only",
        ),
        (scenario(deployments=[{"name": "Web"}]), "cluster.deployments[0].name: must be a DNS-1123 label"),
        (scenario(deployments=[{"name": "a"}, {"name": "a"}]), "cluster.deployments[1].name: a second"),
        (
            scenario(deployments=[{"name": "a", "replicas": 0}]),
            "cluster.deployments[0].replicas: must be >= 1",
        ),
        (scenario(deployments=[{"name": "a", "pdb": {}}]), "cluster.deployments[0].pdb: needs exactly one"),
        (
            scenario(deployments=[{"name": "a", "pdb": {"minAvailable": 1, "maxUnavailable": 1}}]),
            "cluster.deployments[0].pdb: needs exactly one",
        ),
        (
            scenario(deployments=[{"name": "a", "pdb": {"minAvailable": "half"}}]),
            "cluster.deployments[0].pdb.minAvailable: must be an integer >= 0 or a percentage",
        ),
        (
            scenario(deployments=[{"name": "a", "pdb": {"min": 1}}]),
            "cluster.deployments[0].pdb.min: unknown field",
        ),
        (scenario(deployments=[{"name": "a", "size": 1}]), "cluster.deployments[0].size: unknown field"),
        (
            scenario(deployments=[{"name": "a"}], controller_managers=0),
            "cluster.controller_managers: deployments need",
        ),
        (scenario(controller_managers=-1), "cluster.controller_managers: must be >= 0"),
        (scenario(deployments={"name": "a"}), "cluster.deployments: must be a list"),
    ],
)
def test_errors_name_the_field(data: object, needle: str) -> None:
    assert needle in error_of(data)


def test_pick_nodes_and_batches() -> None:
    names = ["nodesim-10", "nodesim-2", "nodesim-1"]
    assert pick_nodes(2, names) == ["nodesim-1", "nodesim-2"]  # natural order
    assert pick_nodes(("nodesim-10",), names) == ["nodesim-10"]
    with pytest.raises(NodeUpgradeError, match="no such node"):
        pick_nodes(("nodesim-9",), names)
    with pytest.raises(NodeUpgradeError, match="the cluster has 3"):
        pick_nodes(4, names)
    assert batches(["a", "b", "c"], 2) == [["a", "b"], ["c"]]
