"""Storage over etcd: keys, and conditional writes (every write is one compare-guarded txn)."""

from apiserver_mock.storage.results import WriteResult
from apiserver_mock.storage.store import KeyWrite, ManyWriteResult, Store

__all__ = ["KeyWrite", "ManyWriteResult", "Store", "WriteResult"]
