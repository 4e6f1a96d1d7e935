"""ControllerExpectations as upstream's TestControllerExpectations."""

from __future__ import annotations

from controllers.expectations import EXPECTATIONS_TIMEOUT_S, ControllerExpectations


def test_creations_and_deletions_must_be_observed_before_the_controller_acts() -> None:
    now = [0.0]
    e = ControllerExpectations(clock=lambda: now[0])
    assert e.satisfied("ns/rs")  # nothing recorded: a new controller may act
    e.expect_creations("ns/rs", 2)
    assert not e.satisfied("ns/rs")
    e.creation_observed("ns/rs")
    assert not e.satisfied("ns/rs")
    e.creation_observed("ns/rs")
    assert e.satisfied("ns/rs")
    e.expect_deletions("ns/rs", ["ns/p1", "ns/p2"])
    e.deletion_observed("ns/rs", "ns/p1")
    e.deletion_observed("ns/rs", "ns/p1")  # the same pod twice (terminating, then deleted): once
    assert not e.satisfied("ns/rs")
    e.deletion_observed("ns/rs", "ns/other")  # not one we deleted
    assert not e.satisfied("ns/rs")
    e.deletion_observed("ns/rs", "ns/p2")
    assert e.satisfied("ns/rs")


def test_expectations_expire_and_can_be_deleted() -> None:
    now = [0.0]
    e = ControllerExpectations(clock=lambda: now[0])
    e.expect_creations("ns/rs", 1)
    now[0] = EXPECTATIONS_TIMEOUT_S + 1
    assert e.satisfied("ns/rs")  # a lost event does not wedge the controller
    e.expect_creations("ns/rs", 1)
    e.delete("ns/rs")
    assert e.satisfied("ns/rs") and e.get("ns/rs") is None
