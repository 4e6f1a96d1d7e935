"""A keyed binary heap with a caller-supplied ``less``, as upstream's ``backend/heap/heap.go``.

Unlike :mod:`heapq`, items are addressed by a key, so an item can be updated in place (its
position is fixed after the update) or deleted from the middle in O(log n). It does no locking;
the scheduling queue owns it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

LessFunc = Callable[[T, T], bool]
KeyFunc = Callable[[T], str]


class Heap(Generic[T]):
    """A heap ordered by ``less`` whose items are identified by ``key``.

    ``less(a, b)`` is True when ``a`` must come out before ``b``. Equal items (neither less than
    the other) come out in no particular order, as upstream.
    """

    def __init__(self, key: KeyFunc[T], less: LessFunc[T]) -> None:
        self._key = key
        self._less = less
        self._items: list[T] = []
        self._keys: list[str] = []
        self._index: dict[str, int] = {}

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[T]:
        """Items in heap order (not sorted)."""
        return iter(list(self._items))

    def has(self, item: T) -> bool:
        return self._key(item) in self._index

    def get(self, item: T) -> T | None:
        return self.get_by_key(self._key(item))

    def get_by_key(self, key: str) -> T | None:
        i = self._index.get(key)
        return None if i is None else self._items[i]

    def peek(self) -> T | None:
        return self._items[0] if self._items else None

    def items(self) -> list[T]:
        return list(self._items)

    # ------------------------------------------------------------------ updates

    def add_or_update(self, item: T) -> None:
        """Insert ``item``, or replace the item with the same key and restore heap order."""
        key = self._key(item)
        i = self._index.get(key)
        if i is not None:
            self._items[i] = item
            self._fix(i)
            return
        self._items.append(item)
        self._keys.append(key)
        self._index[key] = len(self._items) - 1
        self._up(len(self._items) - 1)

    def fix(self, item: T) -> None:
        """Restore heap order after the ordering fields of a stored item changed in place."""
        i = self._index.get(self._key(item))
        if i is not None:
            self._fix(i)

    def delete(self, item: T) -> T | None:
        """Remove the item with ``item``'s key; return the stored item, or None if absent."""
        return self.delete_by_key(self._key(item))

    def delete_by_key(self, key: str) -> T | None:
        i = self._index.get(key)
        if i is None:
            return None
        return self._remove_at(i)

    def pop(self) -> T | None:
        """Remove and return the head, or None when empty."""
        if not self._items:
            return None
        return self._remove_at(0)

    def clear(self) -> None:
        self._items.clear()
        self._keys.clear()
        self._index.clear()

    # ------------------------------------------------------------------ internals

    def _remove_at(self, i: int) -> T:
        last = len(self._items) - 1
        if i != last:
            self._swap(i, last)
        item = self._items.pop()
        key = self._keys.pop()
        del self._index[key]
        if i != last:
            self._fix(i)
        return item

    def _fix(self, i: int) -> None:
        if not self._down(i):
            self._up(i)

    def _swap(self, i: int, j: int) -> None:
        items, keys = self._items, self._keys
        items[i], items[j] = items[j], items[i]
        keys[i], keys[j] = keys[j], keys[i]
        self._index[keys[i]] = i
        self._index[keys[j]] = j

    def _up(self, j: int) -> None:
        while j > 0:
            parent = (j - 1) // 2
            if not self._less(self._items[j], self._items[parent]):
                break
            self._swap(parent, j)
            j = parent

    def _down(self, i0: int) -> bool:
        """Sift down from ``i0``; return whether the item moved (as container/heap's down)."""
        i = i0
        n = len(self._items)
        while True:
            left = 2 * i + 1
            if left >= n:
                break
            j = left
            right = left + 1
            if right < n and self._less(self._items[right], self._items[left]):
                j = right
            if not self._less(self._items[j], self._items[i]):
                break
            self._swap(i, j)
            i = j
        return i > i0
