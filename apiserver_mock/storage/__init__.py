"""Storage over etcd: keys, and conditional writes (every write is one compare-guarded txn)."""

from apiserver_mock.storage.store import KeyWrite, ManyWriteResult, Store, WriteResult

__all__ = ["KeyWrite", "ManyWriteResult", "Store", "WriteResult"]
