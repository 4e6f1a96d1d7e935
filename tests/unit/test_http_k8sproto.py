"""The protobuf DeleteOptions kubectl's typed client sends (bytes captured from kubectl 1.32 -v=9)."""

from __future__ import annotations

import pytest

from apiserver_mock.http.k8sproto import ProtobufError, decode_delete_options

# kubectl drain --disable-eviction --grace-period=0: DeleteOptions{gracePeriodSeconds: 0}.
KUBECTL_GRACE_0 = bytes.fromhex("6b3873000a130a027631120d44656c6574654f7074696f6e73120208001a002200")


def test_kubectls_bytes() -> None:
    assert decode_delete_options(KUBECTL_GRACE_0) == {"gracePeriodSeconds": 0}


def test_every_field() -> None:
    raw = bytes([0x08, 0x1E])  # gracePeriodSeconds 30
    pre = b"\x0a\x01u\x12\x017"  # uid "u", resourceVersion "7"
    raw += bytes([0x12, len(pre)]) + pre + b"\x22\x0aBackground" + b"\x2a\x03All"
    unknown = b"\x12" + bytes([len(raw)]) + raw
    assert decode_delete_options(b"k8s\x00" + unknown) == {
        "gracePeriodSeconds": 30,
        "preconditions": {"uid": "u", "resourceVersion": "7"},
        "propagationPolicy": "Background",
        "dryRun": ["All"],
    }


@pytest.mark.parametrize("body", [b"{}", b"k8s\x00\x12\x05\x08", b"k8s\x00\x0d\x00\x00\x00\x00"])
def test_bad_bodies_are_refused(body: bytes) -> None:
    with pytest.raises(ProtobufError):
        decode_delete_options(body)
