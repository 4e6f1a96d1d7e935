"""The watch cache's event ring: what it can replay, and when it must say "too old"."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from apiserver_mock.watchcache.ring import EventRing, TooOld


@dataclass
class G:
    revision: int
    size: int = 1

    def __len__(self) -> int:
        return self.size


def revs(groups):
    return [g.revision for g in groups]


def test_since_replays_exactly_the_later_revisions():
    ring: EventRing[G] = EventRing(100, floor=10)
    for r in (12, 13, 17):
        ring.append(G(r))
    assert revs(ring.since(10)) == [12, 13, 17]
    assert revs(ring.since(12)) == [13, 17]
    assert revs(ring.since(14)) == [17]
    assert revs(ring.since(17)) == []
    assert revs(ring.since(99)) == []
    with pytest.raises(TooOld) as e:
        ring.since(9)
    assert str(e.value) == "too old resource version: 9 (10)"


def test_capacity_counts_events_and_drops_whole_revisions():
    ring: EventRing[G] = EventRing(5, floor=0)
    ring.append(G(1, 2))
    ring.append(G(2, 2))
    assert ring.events == 4 and ring.floor == 0
    ring.append(G(3, 2))  # 6 > 5: revision 1 goes
    assert ring.events == 4 and ring.floor == 1
    assert revs(ring.since(1)) == [2, 3]
    with pytest.raises(TooOld):
        ring.since(0)


def test_a_single_revision_larger_than_capacity_is_kept():
    ring: EventRing[G] = EventRing(3, floor=0)
    ring.append(G(1, 10))
    assert revs(ring.since(0)) == [1]
    ring.append(G(2, 1))
    assert ring.floor == 1 and revs(ring.since(1)) == [2]


def test_revisions_must_increase():
    ring: EventRing[G] = EventRing(3, floor=5)
    with pytest.raises(ValueError):
        ring.append(G(5))
    ring.append(G(6))
    with pytest.raises(ValueError):
        ring.append(G(6))


def test_raise_floor_after_compaction():
    ring: EventRing[G] = EventRing(100, floor=0)
    for r in range(1, 11):
        ring.append(G(r))
    ring.raise_floor(4)
    assert ring.floor == 4 and revs(ring.since(4)) == [5, 6, 7, 8, 9, 10]
    ring.raise_floor(2)  # never lowers
    assert ring.floor == 4


def test_many_appends_stay_consistent():
    ring: EventRing[G] = EventRing(50, floor=0)
    for r in range(1, 5001):
        ring.append(G(r))
        assert len(ring) <= 50
    assert ring.floor == 4950 and ring.newest == 5000
    assert revs(ring.since(4990)) == list(range(4991, 5001))


def test_reset():
    ring: EventRing[G] = EventRing(10, floor=0)
    ring.append(G(1))
    ring.reset(40)
    assert len(ring) == 0 and ring.floor == 40 and ring.newest == 40
    ring.append(G(41))
    assert revs(ring.since(40)) == [41]


def test_a_dropped_revision_is_let_go_at_once() -> None:
    """The ring holds `capacity` events' objects, not up to twice that until its list is compacted."""
    import gc
    import weakref

    ring: EventRing[G] = EventRing(capacity=10)
    refs = []
    for rev in range(1, 31):
        group = G(rev)
        refs.append(weakref.ref(group))
        ring.append(group)
    gc.collect()
    alive = [r() for r in refs if r() is not None]
    assert [g.revision for g in alive] == list(range(21, 31))
    assert revs(ring.since(25)) == [26, 27, 28, 29, 30]
