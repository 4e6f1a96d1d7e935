"""Storage over etcd: keys, and conditional writes (every write is one compare-guarded txn)."""

from apiserver_mock.storage.store import Store, WriteResult

__all__ = ["Store", "WriteResult"]
