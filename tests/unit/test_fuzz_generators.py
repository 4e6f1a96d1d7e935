"""The fuzzer's generators (chaos.fuzz): a request is a pure function of (seed, index), the valid
objects are valid by the server's own validation, and every mutation and raw payload is bounded
work to build (no recursion blow-up on its own deep values)."""

from __future__ import annotations

import random

import pytest

from apiserver_mock.validation import validate_object
from chaos.fuzz import oracle, protogen, values
from chaos.fuzz.doors import Answer
from chaos.fuzz.requests import GRPC_METHODS, Request, make_request
from kse.objects.kinds import KINDS, kind_of, unwrap


def _flat(value: object) -> list[object]:
    """A JSON value as a flat token list, built without recursion (a mutation may nest 5000 deep,
    past what == and repr can compare)."""
    out: list[object] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            out.append(("dict", len(v)))
            for k, item in v.items():
                out.append(k)
                stack.append(item)
        elif isinstance(v, (list, tuple)):
            out.append(("list", len(v)))
            stack.extend(v)
        else:
            out.append(v)
    return out


def _fingerprint(req: Request) -> tuple[object, ...]:
    msg = req.message.SerializeToString(deterministic=True) if req.message is not None else b""
    return (
        req.door,
        req.op,
        req.identity,
        req.method,
        msg,
        req.raw,
        req.path,
        req.query,
        req.headers,
        req.body,
    )


def test_a_request_is_a_function_of_seed_and_index():
    for i in range(300):
        assert _fingerprint(make_request(5, i)) == _fingerprint(make_request(5, i))
    # Out of order too: request i does not depend on what was generated before it.
    assert _fingerprint(make_request(5, 299)) == _fingerprint(make_request(5, 299))
    different = sum(_fingerprint(make_request(5, i)) != _fingerprint(make_request(6, i)) for i in range(50))
    assert different >= 45


def test_the_stream_covers_every_rpc_and_http_verb():
    ops = {make_request(1, i).op for i in range(3000)}
    for method in GRPC_METHODS:
        assert f"grpc.{method}" in ops
    assert any(op.startswith("grpc.raw.") for op in ops)
    for op in ("discovery", "get", "list", "watch", "create", "update", "status", "delete", "bind", "evict"):
        assert f"http.{op}" in ops
    for patch in ("merge", "json", "strategic", "apply"):
        assert f"http.PATCH.{patch}" in ops
    assert "http.truncated" in ops


@pytest.mark.parametrize("kind", KINDS, ids=[k.resource for k in KINDS])
def test_valid_objects_pass_the_servers_validation(kind):
    rng = random.Random(3)
    for _ in range(20):
        obj = protogen.object_of(kind, values.valid_object(rng, kind))
        assert obj is not None and kind_of(obj) is kind
        errs = validate_object(kind, unwrap(obj))
        assert not errs, list(errs.items)


def test_mutations_and_raw_payloads_are_deterministic_and_bounded():
    for seed in range(60):
        a, b = random.Random(seed), random.Random(seed)
        kind = KINDS[seed % len(KINDS)]
        obj = values.valid_object(a, kind)
        assert obj == values.valid_object(b, kind)
        assert _flat(values.mutate(a, obj)) == _flat(values.mutate(b, obj))
        mutated = protogen.mutate_message(a, protogen.object_of(kind, obj))
        assert mutated == protogen.mutate_message(b, protogen.object_of(kind, obj))
        assert protogen.raw_payloads(a, b"\x0a\x03pod") == protogen.raw_payloads(b, b"\x0a\x03pod")


def test_oracle():
    grpc_req = make_request(1, 0)
    grpc_req.door, grpc_req.method = "grpc", "Get"
    assert oracle.judge(grpc_req, Answer("INTERNAL", "boom")) == "internal"
    assert oracle.judge(grpc_req, Answer("UNKNOWN", "Unexpected DecodeError")) == "internal"
    two_pdbs = "Internal error occurred: This pod has more than one PodDisruptionBudget, which ..."
    assert oracle.judge(grpc_req, Answer("INTERNAL", two_pdbs)) is None  # upstream's own 500
    assert oracle.judge(grpc_req, Answer("INVALID_ARGUMENT", 'pods "x" is invalid')) is None
    assert oracle.judge(grpc_req, Answer("DEADLINE_EXCEEDED", hang=True)) == "hang"
    http_req = Request(0, "http", "http.get", "admin", "GET", path="/api/v1/pods")
    status = '{"kind":"Status","reason":"%s","code":%d}'
    assert oracle.judge(http_req, Answer("500", status % ("InternalError", 500))) == "internal"
    assert oracle.judge(http_req, Answer("503", status % ("ServiceUnavailable", 503))) is None
    assert oracle.judge(http_req, Answer("504", "gateway timeout")) == "internal"
    assert oracle.judge(http_req, Answer("404", "404: Not Found")) == "error-not-status"
    assert oracle.judge(http_req, Answer("404", status % ("NotFound", 404))) is None
