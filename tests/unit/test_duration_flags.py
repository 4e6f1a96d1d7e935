"""Every duration flag of every `kse` command is declared with kse.durations' DurationFlag, so `15`,
`15s` and `0.25m` mean the same everywhere and a bad value reads the same everywhere."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from cli.main import COMPONENTS, build_parser
from kse.durations import DurationFlag

# Flags that look like durations by name but are not: a path, a composite value, byte sizes.
NOT_DURATIONS = {
    ("kse scheduler", "--clock-skew"),  # OFFSET[,RATE]: its offset goes through kse.durations too
    ("kse scheduler", "--clock-skew-file"),
    ("kse delete", "--grace-period"),  # kubectl's integer seconds, where -1 means "the pod's own"
    ("kse drain", "--grace-period"),  # the same, as kubectl drain's
    ("kse drain", "--skip-wait-for-delete-timeout"),  # kubectl drain's integer seconds
    ("kse fuzz apiserver", "--seed"),  # an integer, whose help mentions durations
}
# Flags not yet on the convention (empty: every command is).
PENDING: set[tuple[str, str]] = set()
_LOOKS_LIKE_A_DURATION = re.compile(
    r"duration|interval|timeout|period|deadline|ttl|-age$|grace|lifetime|after|skew"
)


def _walk(p: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, f"{path} {name}")
        elif action.option_strings:
            yield path, action


def _every_flag() -> Iterator[tuple[str, argparse.Action]]:
    yield from _walk(build_parser(), "kse")
    for name, component in COMPONENTS.items():
        make = getattr(component.module(), "build_parser", None)
        if make is not None:
            yield from _walk(make(), f"kse {name}")


def test_every_duration_flag_follows_the_convention() -> None:
    found, wrong = 0, []
    for path, action in _every_flag():
        flag = action.option_strings[-1]
        looks = _LOOKS_LIKE_A_DURATION.search(flag) or action.metavar in ("DURATION", "S", "SECONDS")
        if not looks or (path, flag) in NOT_DURATIONS | PENDING:
            continue
        found += 1
        if not isinstance(action, DurationFlag):
            wrong.append(f"{path} {flag}")
    assert not wrong, f"declare these with action=DurationFlag (kse.durations): {wrong}"
    assert found >= 35  # the walk really saw the commands


@pytest.mark.parametrize(
    ("argv", "dest"),
    [
        (["scheduler", "--leader-elect-lease-duration"], "leader_elect_lease_duration"),
        (["nodesim", "--heartbeat-interval"], "heartbeat_interval"),
        (["apiserver", "--etcd-endpoints", "http://x:1", "--bookmark-interval"], "bookmark_interval"),
        (["health", "--http", "http://x", "--timeout"], "timeout"),
    ],
)
def test_seconds_and_go_durations_are_one_value_everywhere(argv: list[str], dest: str) -> None:
    parser = COMPONENTS[argv[0]].module().build_parser()
    for text in ("15", "15s", "0.25m", "15000ms"):
        assert getattr(parser.parse_args([*argv[1:], text]), dest) == pytest.approx(15.0)


def test_own_commands_take_the_same_values() -> None:
    p = build_parser()
    for text in ("15", "15s", "0.25m"):
        args = p.parse_args(["up", "--lease-duration", text, "--duration", text])
        assert args.lease_duration == args.duration == pytest.approx(15.0)
