"""harness.progress: plain lines off a terminal (byte for byte what the benches and chaos runs
always printed), a live bar on one."""

from __future__ import annotations

import io

import pytest

from harness.bench.common import progress as bench_progress
from harness.progress import Reporter


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_only_the_plain_lines() -> None:
    out = io.StringIO()
    say = Reporter("chaos", lambda: out)
    say("scenario x: 10s, 2 faults")
    with say.phase("faults and workload", total_s=10, faults=2) as phase:
        say("kill scheduler-1")
        phase.fault()
    say("scenario x: PASS")
    assert out.getvalue() == (
        "[chaos] scenario x: 10s, 2 faults\n[chaos] kill scheduler-1\n[chaos] scenario x: PASS\n"
    )
    assert phase.faults == 1


def test_bench_progress_keeps_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    bench_progress("starting etcd")
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "[bench] starting etcd\n")


def test_on_a_terminal_a_bar_with_time_left_and_faults_so_far() -> None:
    term = FakeTerminal()
    say = Reporter("chaos", lambda: term)
    other = Reporter("bench", lambda: io.StringIO())  # another reporter prints through the bar
    with say.phase("faults and workload", total_s=60, faults=2) as phase:
        phase.fault()
        say("kill scheduler-1")
        other("kept /tmp/x")
        with say.phase("nested") as inner:  # one display at a time: the inner one shows nothing
            inner.fault()
    text = term.getvalue()
    assert "[chaos] kill scheduler-1\n" in text and "[bench] kept /tmp/x\n" in text
    assert "[chaos] faults and workload" in text and "faults 1/2" in text and "left" in text
    assert "nested" not in text
    say("after")  # the display is gone: a plain line again
    assert term.getvalue().endswith("[chaos] after\n")
