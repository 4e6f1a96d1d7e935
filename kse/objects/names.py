"""Name, label-key and label-value validation with upstream's exact messages.

Each check returns a list of error strings, empty when the value is valid, as the functions in
`k8s.io/apimachinery/pkg/util/validation/validation.go` (names: DNS-1123 subdomain and label,
DNS-1035 label) and `k8s.io/apimachinery/pkg/api/validate/content/kube.go` (label keys and
values, a.k.a. qualified names) do, so a kse error reads like the Kubernetes one.

Lengths are counted in bytes (Go's len on a string). Upstream's two packages word the length
error differently ("characters" in util/validation, "bytes" in validate/content); we keep each.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "DNS1035_LABEL_MAX_LENGTH",
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "LABEL_KEY_NAME_MAX_LENGTH",
    "LABEL_VALUE_MAX_LENGTH",
    "empty_error",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_key",
    "is_prefixed_label_key",
    "is_qualified_name",
    "is_valid_label_value",
    "max_len_error",
    "regex_error",
    "validate_labels",
    "validate_object_name",
]

DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
DNS1035_LABEL_MAX_LENGTH = 63
LABEL_KEY_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)

# re.ASCII and \Z: Go's regexp classes are ASCII, and "$" must not accept a trailing newline.
_DNS1123_LABEL_RE = re.compile(f"(?:{_DNS1123_LABEL_FMT})\\Z", re.ASCII)
_DNS1123_SUBDOMAIN_RE = re.compile(f"(?:{_DNS1123_SUBDOMAIN_FMT})\\Z", re.ASCII)
_DNS1035_LABEL_RE = re.compile(f"(?:{_DNS1035_LABEL_FMT})\\Z", re.ASCII)
_LABEL_KEY_RE = re.compile(f"(?:{_LABEL_KEY_FMT})\\Z", re.ASCII)
_LABEL_VALUE_RE = re.compile(f"(?:{_LABEL_VALUE_FMT})\\Z", re.ASCII)


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Upstream's RegexError: the message, examples, and the expression used."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int, unit: str = "characters") -> str:
    """Upstream's MaxLenError (util/validation says characters, validate/content says bytes)."""
    return f"must be no more than {length} {unit}"


def empty_error() -> str:
    """Upstream's EmptyError."""
    return "must be non-empty"


def _blen(value: str) -> int:
    return len(value.encode("utf-8"))


def is_dns1123_label(value: str) -> list[str]:
    """A DNS-1123 label (namespace names): lowercase alphanumerics and '-', at most 63 bytes."""
    errs: list[str] = []
    if _blen(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not _DNS1123_LABEL_RE.match(value):
        if _DNS1123_SUBDOMAIN_RE.match(value):
            # A valid subdomain but not a label: with the length already checked, it has dots.
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """A DNS-1123 subdomain (names of pods, nodes, leases, ...): at most 253 bytes."""
    errs: list[str] = []
    if _blen(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    """A DNS-1035 label (service-like names): starts with a letter, at most 63 bytes."""
    errs: list[str] = []
    if _blen(value) > DNS1035_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1035_LABEL_MAX_LENGTH))
    if not _DNS1035_LABEL_RE.match(value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_label_key(value: str) -> list[str]:
    """A label key / qualified name: an optional DNS-subdomain prefix and '/', then a name.

    The name part is at most 63 bytes of alphanumerics, '-', '_', '.', starting and ending with
    an alphanumeric (content.IsLabelKey). Used for label and annotation keys, taint and
    toleration keys, node-selector keys, finalizers.
    """
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs.extend("prefix part " + msg for msg in is_dns1123_subdomain(prefix))
    else:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + empty_error())
    elif _blen(name) > LABEL_KEY_NAME_MAX_LENGTH:
        errs.append("name part " + max_len_error(LABEL_KEY_NAME_MAX_LENGTH, "bytes"))
    if not _LABEL_KEY_RE.match(name):
        errs.append(
            "name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


# Upstream's older name for the same rule (util/validation.IsQualifiedName).
is_qualified_name = is_label_key


def is_prefixed_label_key(value: str) -> list[str]:
    """A label key that must carry a domain prefix ("example.com/key")."""
    errs = is_label_key(value)
    if errs:
        return errs
    if "/" not in value:
        return ["must include a prefix (e.g. 'example.com/key')"]
    return []


def is_valid_label_value(value: str) -> list[str]:
    """A label value: empty, or at most 63 bytes of alphanumerics, '-', '_', '.' (content.IsLabelValue)."""
    errs: list[str] = []
    if _blen(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(LABEL_VALUE_MAX_LENGTH, "bytes"))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def validate_labels(labels: Mapping[str, str]) -> list[str]:
    """Every problem in a label map, each message naming the offending key (or its value)."""
    errs: list[str] = []
    for key, val in labels.items():
        errs.extend(f"key {key!r}: {msg}" for msg in is_label_key(key))
        errs.extend(f"value {val!r} of key {key!r}: {msg}" for msg in is_valid_label_value(val))
    return errs


def validate_object_name(name: str, *, namespace: bool = False) -> list[str]:
    """The rule Kubernetes applies to metadata.name: DNS-1123 label for namespaces, else subdomain.

    All of kse's kinds (pods, nodes, leases, events, priority classes) use the subdomain rule
    (NameIsDNSSubdomain); namespaces use NameIsDNSLabel.
    """
    if not name:
        return ["name or generateName is required"]
    return is_dns1123_label(name) if namespace else is_dns1123_subdomain(name)
