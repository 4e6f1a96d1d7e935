"""kse's etcd v3 client: KV, transactions, watches that never lose an event, over mTLS.

Our own client on etcd's generated stubs (see `client` for why and for the retry rules, `watch` for
the watch guarantees). Everything a caller needs is importable from here.
"""

from kse.etcdclient.client import DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_TIMEOUT, EtcdClient
from kse.etcdclient.errors import (
    CompactedError,
    EtcdClosedError,
    EtcdError,
    EtcdOutcomeUnknownError,
    EtcdUnavailableError,
    FutureRevisionError,
)
from kse.etcdclient.model import (
    Compare,
    CompareTarget,
    EtcdTLS,
    KeyValue,
    Op,
    RangeResult,
    TxnResult,
    WatchBatch,
    WatchEvent,
    prefix_range_end,
)
from kse.etcdclient.watch import Watch, progress_request_is_ordered

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_TIMEOUT",
    "CompactedError",
    "Compare",
    "CompareTarget",
    "EtcdClient",
    "EtcdClosedError",
    "EtcdError",
    "EtcdOutcomeUnknownError",
    "EtcdTLS",
    "EtcdUnavailableError",
    "FutureRevisionError",
    "KeyValue",
    "Op",
    "RangeResult",
    "TxnResult",
    "Watch",
    "WatchBatch",
    "WatchEvent",
    "prefix_range_end",
    "progress_request_is_ordered",
]
