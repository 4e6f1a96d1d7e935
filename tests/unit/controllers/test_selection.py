"""`--controllers` as kube-controller-manager reads it (IsControllerEnabled)."""

from __future__ import annotations

import pytest

from controllers.selection import ControllerSelectionError, parse_controllers, select_controllers

KNOWN = ["replicaset", "deployment", "daemonset"]


@pytest.mark.parametrize(
    ("flag", "want"),
    [
        ("*", KNOWN),
        ("*,-daemonset", ["replicaset", "deployment"]),
        ("deployment", ["deployment"]),
        ("-deployment,*", ["replicaset", "daemonset"]),
        ("deployment,-deployment", ["deployment"]),  # the first entry that names it decides
        (" replicaset , deployment ", ["replicaset", "deployment"]),
        ("", []),
    ],
)
def test_selection(flag: str, want: list[str]) -> None:
    assert select_controllers(parse_controllers(flag), KNOWN) == want


def test_off_by_default_controllers_need_naming() -> None:
    assert select_controllers(["*"], KNOWN, disabled_by_default={"daemonset"}) == ["replicaset", "deployment"]
    assert select_controllers(["*", "daemonset"], KNOWN, disabled_by_default={"daemonset"}) == KNOWN


@pytest.mark.parametrize("flag", ["bogus", "*,-bogus"])
def test_unknown_names_are_refused_naming_the_flag(flag: str) -> None:
    with pytest.raises(ControllerSelectionError, match=r"--controllers: 'bogus' is not in the list"):
        select_controllers(parse_controllers(flag), KNOWN)
