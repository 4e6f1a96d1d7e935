"""Pure pieces of the fixes for what `kse fuzz apiserver` found (the end-to-end regressions are in
tests/integration/test_apiserver_fuzz_regressions.py)."""

from __future__ import annotations

import pytest

from apiserver_mock.errors import Invalid
from apiserver_mock.http.codec import BadRequest
from apiserver_mock.http.params import fence_token, integer
from apiserver_mock.registry.generic import parse_rv
from apiserver_mock.service import Undecodable, decoder
from proto import kse_pb2 as pb


def test_decoder_returns_undecodable_instead_of_raising():
    decode = decoder(pb.GetRequest)
    assert decode(pb.GetRequest(resource="pods").SerializeToString()) == pb.GetRequest(resource="pods")
    bad = decode(b"\x0a\xff\xff\xff\x0f")
    assert isinstance(bad, Undecodable) and bad.message == "kse.v1.GetRequest"
    code, message = bad.status()
    assert code.name == "INVALID_ARGUMENT" and message.startswith(
        "the request is not a valid kse.v1.GetRequest"
    )


@pytest.mark.parametrize("text", ["0", "1", "9223372036854775807"])
def test_parse_rv_accepts_decimal_int64(text: str):
    assert parse_rv(text) == int(text)


@pytest.mark.parametrize("text", ["9223372036854775808", " 3", "+3", "1_0", "-1", "٣", "", "0x1f"])
def test_parse_rv_refuses_what_etcd_could_not_take(text: str):
    with pytest.raises(Invalid, match="invalid resourceVersion"):
        parse_rv(text)


def test_query_integers_and_fence_counts_stay_in_range():
    assert integer({"limit": str(2**63 - 1)}, "limit") == 2**63 - 1
    with pytest.raises(BadRequest, match=r"limit.*out of range"):
        integer({"limit": str(2**63)}, "limit")
    with pytest.raises(BadRequest, match="leaseTransitions is out of range"):
        fence_token("kube-system/kube-scheduler,me,2147483648")
    assert fence_token("kube-system/kube-scheduler,me,2147483647").lease_transitions == 2**31 - 1
