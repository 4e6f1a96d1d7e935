"""Label selectors and node affinity, with cases from upstream's selector_test.go and nodeaffinity_test.go."""

from __future__ import annotations

import pytest

from kse.objects import labels as L
from kse.objects.labels import (
    NodeSelectorMatcher,
    Operator,
    PreferredSchedulingTerms,
    RequiredNodeAffinity,
    Requirement,
    Selector,
    SelectorError,
    label_selector_as_selector,
    new_requirement,
    node_selector_matches,
    node_selector_requirement_matches,
    node_selector_term_matches,
    optional_label_selector,
    parse_selector,
    selector_from_set,
)
from proto import kse_pb2 as pb

# ---------------------------------------------------------------- string syntax


@pytest.mark.parametrize(
    "text", ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"]
)
def test_good_strings_restring_without_spaces(text: str) -> None:
    assert str(parse_selector(text)) == text.replace(" ", "")


@pytest.mark.parametrize(
    "text", ["x=a||y=b", "x==a==b", "!x=a", "x<a", "x in (a", "x in a", "a,", ",a", "x notin", "(", "x=(a)"]
)
def test_bad_strings(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_selector(text)


def test_deterministic_order() -> None:
    assert str(parse_selector("x=a,a=x")) == str(parse_selector("a=x,x=a")) == "a=x,x=a"


def test_the_brief_example() -> None:
    sel = parse_selector("a=b,c!=d,e in (x,y),f notin (z),g,!h")
    ok = {"a": "b", "c": "q", "e": "y", "f": "w", "g": ""}
    assert sel.matches(ok)
    assert not sel.matches({**ok, "h": "1"})
    assert not sel.matches({**ok, "e": "z"})
    assert not sel.matches({**ok, "f": "z"})
    assert sel.matches({k: v for k, v in ok.items() if k != "f"})  # notin matches a missing key
    assert not sel.matches({k: v for k, v in ok.items() if k != "g"})
    assert str(sel) == "a=b,c!=d,e in (x,y),f notin (z),g,!h"


@pytest.mark.parametrize(
    ("text", "labels", "want"),
    [
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x==y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),
        ("x", {"x": "z"}, True),
        ("!x", {"y": "z"}, True),
        ("x>1", {"x": "2"}, True),
        ("x<1", {"x": "0"}, True),
        ("x=z", {}, False),
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("x", {"y": "z"}, False),
        ("!x", {"x": "z"}, False),
        ("x>1", {"x": "0"}, False),
        ("x<1", {"x": "2"}, False),
        ("x>1", {"x": "two"}, False),
        ("x>1", {}, False),
        ("x in (a,,b)", {"x": ""}, True),
        ("x in ()", {"x": ""}, True),
        ("x in (in,notin)", {"x": "notin"}, True),
        ("in in (x)", {"in": "x"}, True),
        ("x=", {"x": ""}, True),
        ("x=", {}, False),
    ],
)
def test_matches(text: str, labels: dict[str, str], want: bool) -> None:
    assert parse_selector(text).matches(labels) is want


def test_parse_errors_name_the_offending_part() -> None:
    with pytest.raises(SelectorError, match=r"found '', expected: ',' or '\)'") as info:
        parse_selector("x in (a")
    assert '"x in (a"' in str(info.value)
    with pytest.raises(SelectorError, match="found '=', expected: ',' or 'end of string'"):
        parse_selector("!x=a")
    with pytest.raises(SelectorError, match=r"found 'B', expected: in, notin"):
        parse_selector("A B=c")
    with pytest.raises(SelectorError, match=r'key: Invalid value: "-bad": name part must consist'):
        parse_selector("-bad=c")
    with pytest.raises(SelectorError, match=r'values\[0\]\[x\]: Invalid value: "-v"'):
        parse_selector("x=-v")
    with pytest.raises(SelectorError, match=r"for 'Gt', 'Lt' operators, the value must be an integer"):
        parse_selector("x<a")
    with pytest.raises(SelectorError, match="expected: in, notin, =, ==, !=, gt, lt"):
        parse_selector("x y")


def test_parse_is_memoised() -> None:
    assert parse_selector("app=web") is parse_selector("app=web")


def test_requires_exact_match() -> None:
    sel = parse_selector("a=1,b in (2),c in (3,4),d!=5")
    assert sel.requires_exact_match("a") == "1"
    assert sel.requires_exact_match("b") == "2"
    assert sel.requires_exact_match("c") is None
    assert sel.requires_exact_match("d") is None


def test_new_requirement_validation() -> None:
    assert new_requirement("k", "in", ["a", "b"]).matches({"k": "b"})
    for op, vals in [("in", []), ("=", ["a", "b"]), ("exists", ["a"]), ("gt", ["1", "2"]), ("gt", ["x"])]:
        with pytest.raises(SelectorError):
            new_requirement("k", op, vals)
    with pytest.raises(SelectorError, match="Unsupported value"):
        new_requirement("k", "near", ["a"])
    with pytest.raises(SelectorError, match=r"spec\.x\.key"):
        new_requirement("bad key", "exists", path="spec.x")


def test_everything_and_nothing() -> None:
    assert Selector.everything().empty and Selector.everything().matches({"a": "b"})
    assert not Selector.nothing().empty and not Selector.nothing().matches({})
    assert Selector.nothing().matches_nothing
    assert selector_from_set({}).empty
    assert selector_from_set({"a": "b"}).matches({"a": "b", "c": "d"})
    assert not selector_from_set({"a": "b"}).matches({"a": "c"})
    assert Selector.nothing().add(Requirement("a", Operator.EXISTS)) is Selector.nothing()


# ---------------------------------------------------------------- LabelSelector (metav1)


def test_label_selector_nil_matches_nothing_empty_matches_everything() -> None:
    assert label_selector_as_selector(None).matches_nothing
    assert label_selector_as_selector(pb.LabelSelector()).empty
    term = pb.PodAffinityTerm(topology_key="zone")
    assert optional_label_selector(term).matches_nothing  # unset
    term.label_selector.SetInParent()
    assert optional_label_selector(term).empty  # set but empty
    assert optional_label_selector(term, "namespace_selector").matches_nothing


def test_label_selector_expressions() -> None:
    ls = pb.LabelSelector(
        match_labels={"app": "web"},
        match_expressions=[
            pb.LabelSelectorRequirement(key="tier", operator="In", values=["fe", "be"]),
            pb.LabelSelectorRequirement(key="env", operator="NotIn", values=["prod"]),
            pb.LabelSelectorRequirement(key="team", operator="Exists"),
            pb.LabelSelectorRequirement(key="legacy", operator="DoesNotExist"),
        ],
    )
    sel = label_selector_as_selector(ls)
    assert sel.matches({"app": "web", "tier": "fe", "team": "x"})
    assert not sel.matches({"app": "web", "tier": "fe", "team": "x", "legacy": "1"})
    assert not sel.matches({"app": "web", "tier": "fe", "team": "x", "env": "prod"})
    assert not sel.matches({"app": "web", "tier": "db", "team": "x"})
    assert str(sel) == "app=web,env notin (prod),!legacy,team,tier in (be,fe)"


def test_label_selector_errors() -> None:
    with pytest.raises(SelectorError, match='"Gt" is not a valid label selector operator'):
        label_selector_as_selector(
            pb.LabelSelector(
                match_expressions=[pb.LabelSelectorRequirement(key="a", operator="Gt", values=["1"])]
            )
        )
    with pytest.raises(SelectorError, match="values set can't be empty"):
        label_selector_as_selector(
            pb.LabelSelector(match_expressions=[pb.LabelSelectorRequirement(key="a", operator="In")])
        )


def test_matches_protobuf_maps_without_inserting_keys() -> None:
    pod = pb.Pod()
    pod.metadata.labels["app"] = "web"
    assert not parse_selector("tier=fe").matches(pod.metadata.labels)
    assert parse_selector("!tier").matches(pod.metadata.labels)
    assert dict(pod.metadata.labels) == {"app": "web"}


# ---------------------------------------------------------------- node affinity


def node(name: str = "", **labels: str) -> pb.Node:
    n = pb.Node()
    n.metadata.name = name
    n.metadata.labels.update(labels)
    return n


def req(key: str, op: str, *values: str) -> pb.NodeSelectorRequirement:
    return pb.NodeSelectorRequirement(key=key, operator=op, values=list(values))


def test_requirement_operators() -> None:
    labels = {"kernel-version": "0206", "zone": "a", "gpu": "true"}
    assert node_selector_requirement_matches(req("kernel-version", "Gt", "0204"), labels)
    assert not node_selector_requirement_matches(req("kernel-version", "Lt", "0204"), labels)
    assert node_selector_requirement_matches(req("kernel-version", "Lt", "300"), labels)
    assert not node_selector_requirement_matches(req("zone", "Gt", "1"), labels)  # not an integer label
    assert not node_selector_requirement_matches(req("missing", "Gt", "1"), labels)
    assert not node_selector_requirement_matches(req("zone", "Gt", "1", "2"), labels)  # one value only
    assert not node_selector_requirement_matches(req("zone", "Gt", "1_000"), labels)  # Go's ParseInt
    assert node_selector_requirement_matches(req("zone", "In", "a", "b"), labels)
    assert node_selector_requirement_matches(req("zone", "NotIn", "b"), labels)
    assert node_selector_requirement_matches(req("other", "NotIn", "b"), labels)
    assert node_selector_requirement_matches(req("gpu", "Exists"), labels)
    assert node_selector_requirement_matches(req("tpu", "DoesNotExist"), labels)
    assert not node_selector_requirement_matches(req("zone", "Near", "a"), labels)
    # An invalid value makes the requirement (and its term) match nothing.
    assert not node_selector_requirement_matches(req("zone", "NotIn", "invalid value: ___@#$%^"), labels)


def test_empty_term_matches_nothing() -> None:
    assert not node_selector_term_matches(pb.NodeSelectorTerm(), node("n1", a="b"))
    assert not node_selector_matches(pb.NodeSelector(), node("n1"))


def test_match_fields() -> None:
    term = pb.NodeSelectorTerm(match_fields=[req("metadata.name", "In", "host_1")])
    assert node_selector_term_matches(term, node("host_1"))
    assert not node_selector_term_matches(term, node("host_2"))
    term = pb.NodeSelectorTerm(match_fields=[req("metadata.name", "NotIn", "host_1")])
    assert node_selector_term_matches(term, node("host_2"))
    # Two values, or an operator other than In/NotIn, is a parse error: no match.
    assert not node_selector_term_matches(
        pb.NodeSelectorTerm(match_fields=[req("metadata.name", "In", "h1", "h2")]), node("h1")
    )
    assert not node_selector_term_matches(
        pb.NodeSelectorTerm(match_fields=[req("metadata.name", "Exists")]), node("h1")
    )
    # Upstream skips the field check for a node without a name.
    assert node_selector_term_matches(
        pb.NodeSelectorTerm(match_fields=[req("metadata.name", "In", "h1")]), node()
    )


def test_fields_and_expressions_are_anded_terms_ored() -> None:
    both = pb.NodeSelectorTerm(
        match_expressions=[req("label_1", "In", "label_1_val")],
        match_fields=[req("metadata.name", "In", "host_1")],
    )
    assert not node_selector_term_matches(both, node("host_1"))
    assert node_selector_term_matches(both, node("host_1", label_1="label_1_val"))
    ns = pb.NodeSelector(
        node_selector_terms=[
            pb.NodeSelectorTerm(match_fields=[req("metadata.name", "In", "host_1")]),
            pb.NodeSelectorTerm(match_expressions=[req("label_1", "In", "label_1_val")]),
        ]
    )
    assert node_selector_matches(ns, node("host_2", label_1="label_1_val"))


def test_lazy_errors_as_upstream() -> None:
    ns = pb.NodeSelector(
        node_selector_terms=[
            pb.NodeSelectorTerm(match_fields=[req("metadata.name", "In", "host_1", "host_2")]),
            pb.NodeSelectorTerm(
                match_expressions=[req("label_1", "In", "label_1_val")],
                match_fields=[req("metadata.name", "In", "host_1")],
            ),
            pb.NodeSelectorTerm(match_expressions=[req("invalid key", "In", "label_value")]),
        ]
    )
    matcher = NodeSelectorMatcher(ns)
    errors = matcher.errors
    assert (
        errors[0]
        == "nodeSelectorTerms[0].matchFields[0].values: Invalid value: [host_1 host_2]: must have one element"
    )
    assert errors[1].startswith(
        'nodeSelectorTerms[2].matchExpressions[0].key: Invalid value: "invalid key": name part'
    )
    ok, errs = matcher.match(node("host_1", label_1="label_1_val"))
    assert ok and errs == []  # a matching term hides the others' errors
    ok, errs = matcher.match(node("host_9"))
    assert not ok and len(errs) == 2


def test_required_node_affinity() -> None:
    pod = pb.Pod()
    pod.spec.node_selector["disktype"] = "ssd"
    assert RequiredNodeAffinity.from_pod(pod).matches(node("n", disktype="ssd"))
    assert not RequiredNodeAffinity.from_pod(pod).matches(node("n", disktype="hdd"))
    required = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    required.node_selector_terms.add().match_expressions.append(req("zone", "In", "a"))
    rna = RequiredNodeAffinity.from_pod(pod)
    assert rna.matches(node("n", disktype="ssd", zone="a"))
    assert not rna.matches(node("n", disktype="ssd", zone="b"))
    assert not rna.matches(node("n", disktype="hdd", zone="a"))
    # No affinity and no nodeSelector: every node.
    assert RequiredNodeAffinity.from_pod(pb.Pod()).matches(node("n"))
    # Affinity present, required selector with no terms: no node.
    empty = pb.Pod()
    empty.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.SetInParent()
    assert not RequiredNodeAffinity.from_pod(empty).matches(node("n"))
    # Affinity but no required part: every node.
    preferred_only = pb.Pod()
    preferred_only.spec.affinity.node_affinity.SetInParent()
    assert RequiredNodeAffinity.from_pod(preferred_only).matches(node("n"))


def test_preferred_scheduling_terms_score() -> None:
    terms = [
        pb.PreferredSchedulingTerm(
            weight=1, preference=pb.NodeSelectorTerm(match_expressions=[req("a", "Exists")])
        ),
        pb.PreferredSchedulingTerm(
            weight=50, preference=pb.NodeSelectorTerm(match_expressions=[req("b", "In", "x")])
        ),
        pb.PreferredSchedulingTerm(
            weight=0, preference=pb.NodeSelectorTerm(match_expressions=[req("bad key", "In")])
        ),
        pb.PreferredSchedulingTerm(weight=7, preference=pb.NodeSelectorTerm()),
        pb.PreferredSchedulingTerm(
            weight=5, preference=pb.NodeSelectorTerm(match_fields=[req("metadata.name", "In", "n1")])
        ),
    ]
    scorer = PreferredSchedulingTerms(terms)
    assert scorer.score(node("n1", a="1", b="x")) == 56
    assert scorer.score(node("n2", b="x")) == 50
    assert scorer.score(node("n2")) == 0
    with pytest.raises(SelectorError):
        PreferredSchedulingTerms(
            [
                pb.PreferredSchedulingTerm(
                    weight=1, preference=pb.NodeSelectorTerm(match_expressions=[req("k", "In")])
                )
            ]
        )


def test_module_exports() -> None:
    for name in L.__all__:
        assert hasattr(L, name), name
