"""`SkewFileClock` (`kse scheduler --clock-skew-file`): the skew follows a JSON file, continuing from
the current skewed reading, on a fake base clock so every reading is exact."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kse.leaderelection.clock import SkewFileClock, SkewFileError, read_skew_file
from tests.fixtures.leaderelection import FakeClock
from tests.fixtures.polling import until


def write(path: Path, data: object) -> None:
    """Atomically, as the chaos backends write it (a reader never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(data if isinstance(data, str) else json.dumps(data))
    os.replace(tmp, path)


def wall_s(clock: SkewFileClock, base: FakeClock) -> float:
    """The skewed wall clock, in the base clock's seconds (the offset shows only here)."""
    return base.now() + (clock.wall() - base.wall()).total_seconds()


def test_offset_moves_only_the_wall_clock_and_rate_bends_both(tmp_path: Path) -> None:
    """A stepped clock changes the times written into the Lease, never a measured duration (Go's
    monotonic reading); a clock running fast or slow stretches both."""
    base = FakeClock(start=100.0)
    path = tmp_path / "skew.json"
    clock = SkewFileClock(base, path)
    write(path, {"offset_s": 30.0})
    assert clock.check()
    assert clock.now() == pytest.approx(100.0)
    assert wall_s(clock, base) == pytest.approx(130.0)
    write(path, {"offset_s": 30.0, "rate": 0.5})
    assert clock.check()
    base.set(110.0)
    assert clock.now() == pytest.approx(105.0)
    assert wall_s(clock, base) == pytest.approx(135.0)


def test_missing_file_means_no_skew(tmp_path: Path) -> None:
    base = FakeClock(start=100.0)
    clock = SkewFileClock(base, tmp_path / "skew.json")
    assert (clock.offset, clock.rate) == (0.0, 1.0)
    assert clock.now() == base.now() and clock.wall() == base.wall()
    assert not clock.check()


def test_missing_file_falls_back_to_the_flag_default(tmp_path: Path) -> None:
    base = FakeClock(start=100.0)
    clock = SkewFileClock(base, tmp_path / "skew.json", default=(3.0, 1.5))
    assert wall_s(clock, base) == pytest.approx(103.0)
    base.set(110.0)
    assert wall_s(clock, base) == pytest.approx(100.0 + 15.0 + 3.0)


def test_offset_and_rate_follow_the_file_continuing_from_the_skewed_reading(tmp_path: Path) -> None:
    base = FakeClock(start=100.0)
    path = tmp_path / "skew.json"
    clock = SkewFileClock(base, path)
    base.set(110.0)
    assert wall_s(clock, base) == pytest.approx(110.0)

    write(path, {"offset_s": 5.0})
    assert clock.check() and clock.changes == 1
    assert wall_s(clock, base) == pytest.approx(115.0)  # the offset is the only jump
    wall0 = clock.wall()
    base.set(120.0)
    assert wall_s(clock, base) == pytest.approx(125.0)
    assert (clock.wall() - wall0).total_seconds() == pytest.approx(10.0)

    write(path, {"offset_s": 5.0, "rate": 2.0})
    assert clock.check()
    assert wall_s(clock, base) == pytest.approx(125.0)  # a rate change does not move the clock...
    base.set(130.0)
    assert wall_s(clock, base) == pytest.approx(145.0)  # ...it bends it from then on

    assert not clock.check()  # unchanged file: nothing read, nothing applied

    path.unlink()  # gone: no skew, the offset is taken back (the clock steps back 5 s)
    assert clock.check()
    assert (clock.offset, clock.rate) == (0.0, 1.0)
    assert wall_s(clock, base) == pytest.approx(140.0)
    base.set(131.0)
    assert wall_s(clock, base) == pytest.approx(141.0)


def test_sleepers_follow_the_new_rate(tmp_path: Path) -> None:
    base = FakeClock(start=0.0)
    path = tmp_path / "skew.json"
    write(path, {"rate": 2.0})
    clock = SkewFileClock(base, path)
    assert clock._to_base(clock.now() + 10.0) == pytest.approx(5.0)  # 10 s at rate 2 = 5 base s


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("{not json", "not JSON"),
        ('{"offset_s": "5s"}', "offset_s"),
        ('{"offset_s": true}', "offset_s"),
        ('{"rate": 0}', "rate"),
        ('{"rate": -1.0}', "rate"),
        ('{"offset": 3}', "offset"),
        ("[1, 2]", "expected an object"),
    ],
)
def test_bad_file_is_reported_and_the_skew_kept(tmp_path: Path, content: str, field: str) -> None:
    base = FakeClock(start=0.0)
    path = tmp_path / "skew.json"
    write(path, {"offset_s": 2.0})
    clock = SkewFileClock(base, path)
    assert wall_s(clock, base) == pytest.approx(2.0)
    write(path, content)
    assert not clock.check()
    assert clock.last_error is not None and field in clock.last_error and str(path) in clock.last_error
    with pytest.raises(SkewFileError, match=field):
        read_skew_file(path)
    assert wall_s(clock, base) == pytest.approx(2.0)
    write(path, {"offset_s": 4.0})  # fixed: taken at the next look
    assert clock.check() and clock.last_error is None
    assert wall_s(clock, base) == pytest.approx(4.0)


def test_read_skew_file_defaults() -> None:
    assert read_skew_file(Path("/nonexistent/skew.json")) is None


async def test_background_check_picks_up_a_change(tmp_path: Path) -> None:
    base = FakeClock(start=50.0)
    path = tmp_path / "skew.json"
    clock = SkewFileClock(base, path, check_interval=0.05)
    clock.start()
    try:
        write(path, {"offset_s": -1.5, "rate": 1.02})
        await until(lambda: clock.changes == 1, "the file change applied", within=5)
        assert (clock.offset, clock.rate) == (-1.5, 1.02)
        assert wall_s(clock, base) == pytest.approx(48.5)
    finally:
        await clock.stop()


def test_rejects_a_bad_interval(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="check_interval"):
        SkewFileClock(FakeClock(), tmp_path / "x.json", check_interval=0)
