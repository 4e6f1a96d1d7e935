"""The one module that imports etcd's generated v3 stubs; everything else goes through it.

The stubs come from the `etcd3aio` package (DEPENDENCIES.md: no third-party etcd *client* is used,
only its generated code, over our own `grpc.aio` channels). Keeping the import in one place means a
switch to another source of stubs (or to generating our own) touches one file.

Importing `etcd3aio.proto...` runs `etcd3aio/__init__.py`, which puts its `proto/` directory on
`sys.path` and registers the `.proto` files (etcd's stubs import each other as top-level `etcd.api...`
modules). The message classes are the same objects under both module names, which is what the stubs'
serializers require.

The modules are bound as `Any` on purpose: the generated code builds its classes at import time, so a
type checker sees no attributes, and a hand-written stub file would be one more thing to keep fresh.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

rpc_pb2: Any = importlib.import_module("etcd3aio.proto.etcd.api.etcdserverpb.rpc_pb2")
rpc_pb2_grpc: Any = importlib.import_module("etcd3aio.proto.etcd.api.etcdserverpb.rpc_pb2_grpc")
kv_pb2: Any = importlib.import_module("etcd3aio.proto.etcd.api.mvccpb.kv_pb2")

# mvccpb.Event.EventType
EVENT_DELETE: Final[int] = kv_pb2.Event.DELETE

# Compare.CompareResult / Compare.CompareTarget
CMP_EQUAL: Final[int] = rpc_pb2.Compare.EQUAL
CMP_NOT_EQUAL: Final[int] = rpc_pb2.Compare.NOT_EQUAL
CMP_LESS: Final[int] = rpc_pb2.Compare.LESS
CMP_GREATER: Final[int] = rpc_pb2.Compare.GREATER
TARGET_VERSION: Final[int] = rpc_pb2.Compare.VERSION
TARGET_CREATE: Final[int] = rpc_pb2.Compare.CREATE
TARGET_MOD: Final[int] = rpc_pb2.Compare.MOD
TARGET_VALUE: Final[int] = rpc_pb2.Compare.VALUE

RangeRequest: Any = rpc_pb2.RangeRequest
PutRequest: Any = rpc_pb2.PutRequest
DeleteRangeRequest: Any = rpc_pb2.DeleteRangeRequest
TxnRequest: Any = rpc_pb2.TxnRequest
RequestOp: Any = rpc_pb2.RequestOp
CompareMsg: Any = rpc_pb2.Compare
CompactionRequest: Any = rpc_pb2.CompactionRequest
StatusRequest: Any = rpc_pb2.StatusRequest
DefragmentRequest: Any = rpc_pb2.DefragmentRequest
WatchRequest: Any = rpc_pb2.WatchRequest
WatchCreateRequest: Any = rpc_pb2.WatchCreateRequest
WatchCancelRequest: Any = rpc_pb2.WatchCancelRequest
WatchProgressRequest: Any = rpc_pb2.WatchProgressRequest
LeaseGrantRequest: Any = rpc_pb2.LeaseGrantRequest

KVStub: Any = rpc_pb2_grpc.KVStub
WatchStub: Any = rpc_pb2_grpc.WatchStub
MaintenanceStub: Any = rpc_pb2_grpc.MaintenanceStub
LeaseStub: Any = rpc_pb2_grpc.LeaseStub
