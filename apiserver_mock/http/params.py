"""Query parameters and headers of the HTTP API, checked with errors naming the parameter."""

from __future__ import annotations

from collections.abc import Mapping

from apiserver_mock.http.codec import BadRequest
from proto import kse_pb2 as pb

FENCE_HEADER = "X-Kse-Fence"
PROPAGATION_POLICIES = ("Orphan", "Background", "Foreground")
RV_MATCHES = ("", "Exact", "NotOlderThan")


def flag(query: Mapping[str, str], name: str) -> bool:
    """A boolean parameter as Go's strconv.ParseBool reads it (absent: false)."""
    value = query.get(name, "")
    if value in ("", "0", "f", "F", "false", "FALSE", "False"):
        return False
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    raise BadRequest(f'{name}: Invalid value: "{value}": must be a boolean')


INT64_MAX = 2**63 - 1


def integer(query: Mapping[str, str], name: str, default: int = 0, *, minimum: int = 0) -> int:
    """An int64 query parameter (as Go's strconv.ParseInt(value, 10, 64) reads it for
    kube-apiserver's parameter codec): anything past int64 is a 400 naming the parameter, not a
    number that no protobuf int64 field can hold."""
    value = query.get(name, "")
    if value == "":
        return default
    try:
        n = int(value)
    except ValueError:
        raise BadRequest(f'{name}: Invalid value: "{value}": must be an integer') from None
    if n < minimum:
        raise BadRequest(f"{name}: Invalid value: {n}: must be greater than or equal to {minimum}")
    if n > INT64_MAX:
        raise BadRequest(f'{name}: Invalid value: "{value}": value out of range (int64)')
    return n


def dry_run(query: Mapping[str, str]) -> bool:
    """`dryRun=All` (the only value upstream accepts); absent: a real write."""
    values = query.getall("dryRun", []) if hasattr(query, "getall") else [query.get("dryRun", "")]
    values = [v for v in values if v]
    for v in values:
        if v != "All":
            raise BadRequest(f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return bool(values)


def resource_version_match(query: Mapping[str, str]) -> tuple[str, str]:
    """(resourceVersion, resourceVersionMatch), checked as upstream's ValidateListOptions."""
    rv = query.get("resourceVersion", "")
    match = query.get("resourceVersionMatch", "")
    if match not in RV_MATCHES:
        raise BadRequest(
            f'resourceVersionMatch: Unsupported value: "{match}": supported values: "Exact", "NotOlderThan"'
        )
    if match and rv == "":
        raise BadRequest(
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
            "is provided"
        )
    if match == "Exact" and rv == "0":
        raise BadRequest(
            'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
            'resourceVersion "0"'
        )
    return rv, match


def list_resource_version(rv: str, match: str) -> str:
    """The registry's List resourceVersion for Kubernetes' (resourceVersion, match) semantics.

    The registry reads "" consistently, "0" from the cache, "N" exactly at N. Upstream reads "N"
    with no match (or NotOlderThan) as "not older than N": a consistent read satisfies that."""
    if rv in ("", "0") or match == "Exact":
        return rv
    return ""


def propagation_policy(value: str) -> str:
    if value and value not in PROPAGATION_POLICIES:
        raise BadRequest(
            f'propagationPolicy: Unsupported value: "{value}": supported values: "Background", '
            '"Foreground", "Orphan"'
        )
    return value


def fence_token(header: str | None) -> pb.FenceToken | None:
    """`X-Kse-Fence: <lease-namespace>/<lease-name>,<holder>,<leaseTransitions>` as a FenceToken.

    The holder may contain commas (it is the last field but one: the count is split off the end)."""
    if not header:
        return None
    lease, sep, rest = header.strip().partition(",")
    holder, sep2, transitions = rest.rpartition(",")
    ns, slash, name = lease.partition("/")
    if not sep or not sep2 or not slash or not name:
        raise BadRequest(
            f'{FENCE_HEADER}: Invalid value: "{header}": expected '
            "<lease-namespace>/<lease-name>,<holder>,<leaseTransitions>"
        )
    try:
        count = int(transitions)
    except ValueError:
        raise BadRequest(
            f'{FENCE_HEADER}: Invalid value: "{header}": leaseTransitions must be an integer'
        ) from None
    if not -(2**31) <= count < 2**31:  # Lease.spec.leaseTransitions is an int32
        raise BadRequest(
            f'{FENCE_HEADER}: Invalid value: "{header}": leaseTransitions is out of range (int32)'
        )
    return pb.FenceToken(lease_namespace=ns, lease_name=name, holder_identity=holder, lease_transitions=count)
