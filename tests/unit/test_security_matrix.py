"""The hand-written security matrix (tests/fixtures/security_matrix.py) against the policy and the README.

The integration suite runs the same table against a live server over both doors; here the
Authorizer answers it directly, so a policy edit that the table does not reflect fails in a second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from apiserver_mock.auth.authz import Authorizer
from apiserver_mock.auth.policy import ALL_VERBS, POLICY
from apiserver_mock.errors import Forbidden
from apiserver_mock.http.routes import SUBRESOURCES
from kse.objects.kinds import BY_RESOURCE, KINDS
from proto import kse_pb2 as pb
from tests.fixtures.security_matrix import IDENTITIES, ROWS, Row, identity_of, render_markdown

README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN, END = "<!-- security-matrix:begin -->", "<!-- security-matrix:end -->"
SUBRESOURCE_VERB = {"status": "update", "binding": "create", "eviction": "create"}


def policy_allows(authz: Authorizer, row: Row, column: str) -> bool:
    """What the policy answers, with an object check (a pod's node) run on the pod the row names."""
    name = row.name or ("matrix-pod" if row.pod_on is not None else "")
    kind = BY_RESOURCE[row.kind_resource]
    try:
        check = authz.authorize(identity_of(column), row.verb, kind, row.subresource, row.namespace, name)
        if check is not None:
            assert row.pod_on is not None, f"{row.label()}: the policy needs a stored pod, the row has none"
            check.check(pb.Pod(spec=pb.PodSpec(node_name=row.pod_on)))
    except Forbidden:
        return False
    return True


def test_every_cell_is_what_the_policy_decides():
    authz = Authorizer()
    wrong = [
        f"{row.label()} as {col}: table says {'allowed' if want else 'denied'}, policy.py "
        f"{'allows' if not want else 'denies'}"
        for row in ROWS
        for col, want in row.cells().items()
        if policy_allows(authz, row, col) != want
    ]
    assert not wrong, "\n".join(wrong)


def test_every_verb_and_resource_has_a_row():
    have = {(r.verb, r.resource) for r in ROWS}
    want = {(verb, kind.resource) for kind in KINDS for verb in ALL_VERBS}
    want |= {(SUBRESOURCE_VERB[s], f"{res}/{s}") for res, subs in SUBRESOURCES.items() for s in subs}
    assert want <= have, f"no row for {sorted(want - have)}"


def test_every_grant_has_a_column():
    idents = [identity_of(col) for col in IDENTITIES]
    unused = [g for g in POLICY if not any(g.applies_to(i) for i in idents)]
    assert not unused, f"grants no column exercises: {unused}"


def test_rows_are_well_formed_and_distinct():
    for row in ROWS:
        row.cells()  # raises on a malformed row
    labels = [r.label() for r in ROWS]
    assert len(set(labels)) == len(labels), "two rows make the same request"


def test_a_malformed_row_is_refused():
    with pytest.raises(ValueError, match="one Y or - per identity"):
        Row("get", "pods", "default", "Y Y").cells()


def test_readme_prints_the_matrix():
    text = README.read_text()
    assert BEGIN in text and END in text, f"README.md lacks the {BEGIN} ... {END} block"
    shown = text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"
    assert shown == render_markdown(), (
        "README.md's security matrix differs from the table; regenerate it with "
        "`python -m tests.fixtures.security_matrix`"
    )
