"""Kubernetes manifests (YAML or JSON, as kubectl reads them) <-> kse protobuf objects.

Loading follows what Kubernetes does with a manifest, step by step:

1. **YAML 1.1 as go-yaml v2 reads it** (sigs.k8s.io/yaml uses it): plain scalars resolve by
   go-yaml's rules, not PyYAML's: `y`/`n`/`yes`/`on`/`off` are booleans, `0755` is octal, `1e3`
   is a number, timestamps stay strings. Multi-document streams, KYAML (flow style, trailing
   commas), JSON (also a stream of objects), `kind: List` / `PodList` with `items`.
2. **Scalars coerced to the field types**, walking the dict beside the message descriptor, as
   sigs.k8s.io/yaml's `Unmarshal` into a typed object does (yaml.go, convertToJSONableObject):
   where the field is a string, an int becomes its decimal text, a float Go's
   `FormatFloat(f, 'g', -1, 32)` text and a bool "true"/"false" (so `version: 1` -> "1",
   `enabled: on` -> "true", `ratio: 1.10` -> "1.1"). Quantity fields (requests, limits, overhead,
   capacity, allocatable) are not plain strings upstream (resource.Quantity reads the JSON number
   itself), so a number there becomes the JSON text Go writes for it (`cpu: 0.5` -> "0.5",
   `example.com/dongle: 3` -> "3"), and the result must parse as a quantity. Integer fields take
   ints and integral floats in range; bool fields only booleans. Anything else (a string for an
   integer, a mapping for a string, ...) raises ManifestError naming the field path, e.g.
   `spec.containers[0].ports[0].containerPort`; Kubernetes refuses those too ("cannot
   unmarshal string into Go struct field ... of type int32"). Note that `kubectl apply` itself
   converts YAML to JSON *without* the target type (YAMLToJSON), so there the API server also
   refuses a number or boolean in a plain string field; kse accepts them as the typed
   conversion does, since real manifests (and the docs' examples) carry them.
3. **Unknown fields dropped, and reported**: field names match case-sensitively on the JSON
   (camelCase) name, as the API server decodes; a name that matches no field is left out and its
   JSON path (`spec.nodeSelecter`, `spec.containers[0].imagePullPolcy`) recorded, as the API
   server's field validation names it (`unknown field "spec.nodeSelecter"`): `decode_manifests`
   returns those paths beside each object so a client can warn (kubectl's Warn) or refuse
   (Strict); `load_manifests` returns only the objects.

Only served kinds load (`kse.objects.kinds`); anything else (Deployment, Service, ...) raises a
ManifestError naming the source, document, kind and apiVersion, and the kinds that are served.

Dumping (`to_dict`, `to_yaml`, `to_json`) writes the camelCase shape kubectl prints: apiVersion
and kind set, default values omitted, int64 fields as numbers (protobuf's JSON would quote
them), strings quoted wherever go-yaml would otherwise read them as something else.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from kse.objects.kinds import BY_KIND, BY_MESSAGE, KINDS, Kind, kind_of
from kse.objects.quantity import QuantityError, parse_quantity
from proto import kse_pb2 as pb

__all__ = [
    "DecodedObject",
    "ManifestError",
    "decode_manifests",
    "decode_object",
    "go_format_float32",
    "go_json_float",
    "list_to_dict",
    "load_manifest_files",
    "load_manifests",
    "to_dict",
    "to_json",
    "to_yaml",
    "to_yaml_all",
]


class ManifestError(ValueError):
    """A manifest kse cannot load; the message names the source, document, kind and field."""

    def __init__(
        self,
        detail: str,
        *,
        source: str,
        document: int | None = None,
        kind: str | None = None,
        api_version: str | None = None,
        path: str | None = None,
    ) -> None:
        where = source if document is None else f"{source}: document {document}"
        super().__init__(f"{where}: {detail}")
        self.source = source
        self.document = document  # 1-based position in the stream, empty documents included
        self.kind = kind
        self.api_version = api_version
        self.path = path


# ---------------------------------------------------------------- Go number formatting


def _digits_and_point(number: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of a finite non-zero float64, and the point position."""
    _, digit_tuple, exponent = Decimal(repr(abs(number))).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    trimmed = len(digit_tuple) - len(digits)
    digits = digits.lstrip("0")
    point = len(digits) + exponent + trimmed  # value = 0.<digits> * 10**point
    return digits, point


def _fmt_e(neg: bool, digits: str, point: int, min_exp_digits: int = 2) -> str:
    exp = point - 1
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    exp_text = str(abs(exp)).rjust(min_exp_digits, "0")
    return f"{'-' if neg else ''}{mant}e{'-' if exp < 0 else '+'}{exp_text}"


def _fmt_f(neg: bool, digits: str, point: int) -> str:
    if point <= 0:
        text = "0." + "0" * -point + digits
    elif point >= len(digits):
        text = digits + "0" * (point - len(digits))
    else:
        text = digits[:point] + "." + digits[point:]
    return ("-" if neg else "") + text


def go_format_float32(number: float) -> str:
    """Go's strconv.FormatFloat(number, 'g', -1, 32): what sigs.k8s.io/yaml writes into a string field."""
    if math.isnan(number):
        return "NaN"
    with np.errstate(over="ignore"):
        single = np.float32(number)
    if np.isinf(single):
        return "+Inf" if single > 0 else "-Inf"
    sci = np.format_float_scientific(single, unique=True, trim="-")
    mant, exp_text = sci.split("e")
    neg = mant.startswith("-")
    digits = mant.lstrip("-").replace(".", "").rstrip("0")
    if not digits:
        return "-0" if neg else "0"
    point = int(exp_text) + 1
    exp = point - 1
    if exp < -4 or exp >= 6:  # shortest 'g' switches to %e outside [1e-4, 1e6)
        return _fmt_e(neg, digits, point)
    return _fmt_f(neg, digits, point)


def go_json_float(number: float) -> str:
    """The text Go's encoding/json writes for a float64 (what resource.Quantity then parses)."""
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"json: unsupported value: {number}")
    if number == 0:
        return "-0" if math.copysign(1.0, number) < 0 else "0"
    digits, point = _digits_and_point(number)
    neg = number < 0
    magnitude = abs(number)
    if magnitude < 1e-6 or magnitude >= 1e21:
        text = _fmt_e(neg, digits, point)
        return re.sub(r"e-0(\d)$", r"e-\1", text)  # Go cleans e-09 to e-9
    return _fmt_f(neg, digits, point)


# ---------------------------------------------------------------- YAML 1.1, as go-yaml v2 reads it

_GO_BOOLS = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_GO_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_GO_SPECIAL_FLOATS = {
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z", re.ASCII)
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?\Z", re.ASCII)
_TIMESTAMP_START = re.compile(r"[0-9]{4}-[0-9]", re.ASCII)  # parseTimestamp's quick check, loosely
_BASE_DIGITS = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}

_TAG_STR = "tag:yaml.org,2002:str"
_TAG_NULL = "tag:yaml.org,2002:null"
_TAG_BOOL = "tag:yaml.org,2002:bool"
_TAG_INT = "tag:yaml.org,2002:int"
_TAG_FLOAT = "tag:yaml.org,2002:float"
_TAG_MERGE = "tag:yaml.org,2002:merge"
_TAG_TIMESTAMP = "tag:yaml.org,2002:timestamp"


def _go_parse_uint_base0(text: str) -> int | None:
    """strconv.ParseUint(text, 0, 64) without the range check: 0x/0o/0b prefixes, leading-0 octal."""
    if not text:
        return None
    base, body = 10, text
    if text[0] == "0":
        if len(text) >= 3 and text[1] in "bB":
            base, body = 2, text[2:]
        elif len(text) >= 3 and text[1] in "oO":
            base, body = 8, text[2:]
        elif len(text) >= 3 and text[1] in "xX":
            base, body = 16, text[2:]
        else:
            base, body = 8, text[1:]
    allowed = _BASE_DIGITS[base]
    if any(ch not in allowed for ch in body):
        return None
    return int(body, base) if body else 0


def _go_resolve_plain(value: str) -> tuple[str, Any]:
    """(tag, value) for a plain scalar, as go-yaml v2's resolve() decides (resolve.go)."""
    if value == "<<":
        return _TAG_MERGE, value
    first = value[0] if value else ""
    if first == "" or first in "yYnNtTfFoO~":
        if value in _GO_NULLS:
            return _TAG_NULL, None
        if value in _GO_BOOLS:
            return _TAG_BOOL, _GO_BOOLS[value]
        return _TAG_STR, value
    if first == ".":
        if value in _GO_SPECIAL_FLOATS:
            return _TAG_FLOAT, _GO_SPECIAL_FLOATS[value]
        if _DOT_FLOAT.match(value):
            return _TAG_FLOAT, float(value)
        return _TAG_STR, value
    if first in "+-0123456789":
        if value in _GO_SPECIAL_FLOATS:
            return _TAG_FLOAT, _GO_SPECIAL_FLOATS[value]
        plain = value.replace("_", "")
        sign, unsigned = (plain[0], plain[1:]) if plain[:1] in ("+", "-") else ("", plain)
        number = _go_parse_uint_base0(unsigned)
        if number is not None:
            signed = -number if sign == "-" else number
            if -(2**63) <= signed <= 2**63 - 1:
                return _TAG_INT, signed
            if not sign and number <= 2**64 - 1:
                return _TAG_INT, number
        if _YAML_STYLE_FLOAT.match(plain):
            parsed = float(plain)
            if not math.isinf(parsed):  # Go's ParseFloat reports overflow as an error
                return _TAG_FLOAT, parsed
        if _TIMESTAMP_START.match(value):
            # go-yaml hands timestamps to an interface{} as their text; the tag only makes the
            # dumper quote them, as go-yaml's encoder does.
            return _TAG_TIMESTAMP, value
    return _TAG_STR, value


class _GoYamlResolver(yaml.resolver.BaseResolver):
    """Implicit typing of plain scalars by go-yaml v2's rules (used by the loader and the dumper)."""

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            return _go_resolve_plain(value)[0]
        return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]


def _construct_plain(node: yaml.ScalarNode, want: str) -> Any:
    tag, value = _go_resolve_plain(node.value)
    if tag != want:
        raise yaml.constructor.ConstructorError(
            None, None, f"cannot decode {node.value!r} as {want.rsplit(':', 1)[-1]}", node.start_mark
        )
    return value


def _construct_null(_loader: Any, node: yaml.Node) -> None:
    return None


def _construct_bool(_loader: Any, node: yaml.Node) -> Any:
    assert isinstance(node, yaml.ScalarNode)
    return _construct_plain(node, _TAG_BOOL)


def _construct_int(_loader: Any, node: yaml.Node) -> Any:
    assert isinstance(node, yaml.ScalarNode)
    return _construct_plain(node, _TAG_INT)


def _construct_float(_loader: Any, node: yaml.Node) -> Any:
    assert isinstance(node, yaml.ScalarNode)
    return _construct_plain(node, _TAG_FLOAT)


def _construct_text(_loader: Any, node: yaml.Node) -> Any:
    return node.value


class _GoYamlConstructor(yaml.constructor.SafeConstructor):
    """Builds scalars with go-yaml's values (y/n booleans, octal 0755, 1e3 floats, ...)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:  # type: ignore[override]
        """Mappings with keys already turned into strings, as sigs.k8s.io/yaml does.

        Converting here, not later, keeps keys that Python would merge apart: `on` (true) and `1`
        are distinct keys in go-yaml but equal as Python dict keys.
        """
        self.flatten_mapping(node)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                text = _key_text(key, "")
            except _FieldError as err:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, str(err), key_node.start_mark
                ) from None
            mapping[text] = self.construct_object(value_node, deep=deep)
        return mapping

    yaml_constructors = dict(yaml.constructor.SafeConstructor.yaml_constructors)
    yaml_constructors.update(
        {
            _TAG_NULL: _construct_null,
            _TAG_BOOL: _construct_bool,
            _TAG_INT: _construct_int,
            _TAG_FLOAT: _construct_float,
            # Explicit !!timestamp stays text; so does a stray "<<" that is not a merge key.
            _TAG_TIMESTAMP: _construct_text,
            _TAG_MERGE: _construct_text,
        }
    )


try:
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    CParser = None  # type: ignore[assignment,misc]

if CParser is not None:

    class _Loader(CParser, _GoYamlConstructor, _GoYamlResolver):  # type: ignore[misc]
        """libyaml's parser with go-yaml's scalar rules."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _GoYamlConstructor.__init__(self)
            _GoYamlResolver.__init__(self)

else:  # pragma: no cover - PyYAML built without libyaml

    class _Loader(  # type: ignore[no-redef]
        yaml.reader.Reader,
        yaml.scanner.Scanner,
        yaml.parser.Parser,
        yaml.composer.Composer,
        _GoYamlConstructor,
        _GoYamlResolver,
    ):
        """The pure-Python parser with go-yaml's scalar rules."""

        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            _GoYamlConstructor.__init__(self)
            _GoYamlResolver.__init__(self)


class _Dumper(yaml.SafeDumper):
    """SafeDumper that quotes every string go-yaml would read as a bool, number or null."""

    def resolve(self, kind: type, value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            return _go_resolve_plain(value)[0]
        return super().resolve(kind, value, implicit)  # type: ignore[no-any-return]


def _yaml_documents(text: str, source: str) -> Iterator[tuple[int, Any]]:
    loader = _Loader(text)
    index = 0  # the document being read, 1-based
    try:
        while True:
            index += 1
            if not loader.check_data():
                return
            yield index, loader.get_data()
    except yaml.YAMLError as err:
        raise ManifestError(f"invalid YAML: {err}", source=source, document=index) from None
    finally:
        loader.dispose()


def _json_documents(text: str) -> list[tuple[int, Any]] | None:
    """A JSON value or a stream of them, or None if the text is not JSON (then it is YAML)."""
    decoder = json.JSONDecoder()
    docs: list[tuple[int, Any]] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
        if pos >= end:
            return docs
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return None
        docs.append((len(docs) + 1, value))


# ---------------------------------------------------------------- coercion to the field types

# Fields whose proto type (a map of strings) holds resource.Quantity values (upstream's type).
QUANTITY_MAPS = frozenset(
    {
        ("kse.v1.ResourceRequirements", "limits"),
        ("kse.v1.ResourceRequirements", "requests"),
        ("kse.v1.PodSpec", "overhead"),
        ("kse.v1.NodeStatus", "capacity"),
        ("kse.v1.NodeStatus", "allocatable"),
    }
)
_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: ("int32", -(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: ("int32", -(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: ("int32", -(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: ("int64", -(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: ("int64", -(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: ("int64", -(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: ("uint32", 0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: ("uint32", 0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: ("uint64", 0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: ("uint64", 0, 2**64 - 1),
}
_INT64_TYPES = frozenset(t for t, (name, _, _) in _INT_RANGES.items() if name in ("int64", "uint64"))
_NODE_BUDGET = 1_000_000  # values walked per document: stops alias bombs ("billion laughs")


class _FieldError(Exception):
    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}" if path else detail)
        self.path = path


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "number"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, dict | list) else _type_name(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _key_text(key: Any, path: str) -> str:
    """A mapping key as a string, as sigs.k8s.io/yaml converts non-string YAML keys."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        text = go_format_float32(key)
        return {"+Inf": ".inf", "-Inf": "-.inf", "NaN": ".nan"}.get(text, text)
    raise _FieldError(path, f"unsupported map key of type {_type_name(key)}: {key!r}")


@dataclass
class _Walk:
    budget: int = _NODE_BUDGET
    unknown: list[str] = field(default_factory=list)  # JSON paths of fields no message has

    def tick(self, path: str) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise _FieldError(path, "document too large (too many values; YAML alias expansion?)")


def _to_string(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_format_float32(value)
    raise _FieldError(path, f"expected a string, got {_type_name(value)} {_shown(value)}")


def _to_quantity(value: Any, path: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _FieldError(
            path, f"expected a quantity (string or number), got {_type_name(value)} {_shown(value)}"
        )
    if isinstance(value, float):
        try:
            text = go_json_float(value)
        except ValueError as err:
            raise _FieldError(path, str(err)) from None
    else:
        text = str(value).strip()  # Quantity.UnmarshalJSON trims surrounding whitespace
    try:
        parse_quantity(text)
    except QuantityError as err:
        raise _FieldError(path, str(err)) from None
    return text


def _to_int(value: Any, fd: FieldDescriptor, path: str) -> int:
    type_name, low, high = _INT_RANGES[fd.type]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _FieldError(path, f"expected an integer ({type_name}), got {_type_name(value)} {_shown(value)}")
    if isinstance(value, float):
        if not value.is_integer():
            raise _FieldError(path, f"expected an integer ({type_name}), got {_shown(value)}")
        value = int(value)
    if not low <= value <= high:
        raise _FieldError(path, f"{value} is out of range for {type_name}")
    return value


def _to_scalar(value: Any, fd: FieldDescriptor, path: str) -> Any:
    t = fd.type
    if t == FieldDescriptor.TYPE_STRING:
        return _to_string(value, path)
    if t in _INT_RANGES:
        return _to_int(value, fd, path)
    if t == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise _FieldError(path, f"expected a boolean, got {_type_name(value)} {_shown(value)}")
        return value
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _FieldError(path, f"expected a number, got {_type_name(value)} {_shown(value)}")
        return value
    if t == FieldDescriptor.TYPE_ENUM:
        return _to_string(value, path)
    raise _FieldError(path, f"field type {t} is not supported in manifests")


def _zero(fd: FieldDescriptor) -> Any:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return {}
    if fd.type == FieldDescriptor.TYPE_STRING:
        return ""
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return False
    return 0


@cache
def _fields_by_json_name(desc: Descriptor) -> dict[str, FieldDescriptor]:
    return {f.json_name: f for f in desc.fields}


def _coerce_message(value: Any, desc: Descriptor, path: str, walk: _Walk) -> dict[str, Any]:
    walk.tick(path)
    if not isinstance(value, dict):
        raise _FieldError(path, f"expected an object, got {_type_name(value)} {_shown(value)}")
    by_json = _fields_by_json_name(desc)
    out: dict[str, Any] = {}
    for raw_key, item in value.items():
        key = _key_text(raw_key, path)
        fd = by_json.get(key)
        fpath = f"{path}.{key}" if path else key
        if fd is None:
            walk.unknown.append(fpath)  # dropped, as Kubernetes does; reported for field validation
            continue
        if item is None:
            continue  # null: the zero value
        out[key] = _coerce_field(item, fd, fpath, walk)
    return out


def _coerce_field(item: Any, fd: FieldDescriptor, path: str, walk: _Walk) -> Any:
    if fd.message_type is not None and fd.message_type.full_name == "google.protobuf.Struct":
        # Free-form JSON (managedFields[].fieldsV1): kept as written, as upstream keeps it raw.
        if not isinstance(item, dict):
            raise _FieldError(path, f"expected an object, got {_type_name(item)} {_shown(item)}")
        walk.tick(path)
        return item
    if fd.message_type is not None and fd.message_type.full_name == "google.protobuf.Value":
        # IntOrString (maxSurge, minAvailable, targetPort): an integer or a string, nothing else.
        walk.tick(path)
        if isinstance(item, bool) or not isinstance(item, int | str):
            if isinstance(item, float) and item.is_integer():
                return int(item)
            raise _FieldError(path, f"expected an integer or a string, got {_type_name(item)} {_shown(item)}")
        return item
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        return _coerce_map(item, fd, path, walk)
    if fd.is_repeated:
        if not isinstance(item, list):
            raise _FieldError(path, f"expected an array, got {_type_name(item)} {_shown(item)}")
        elements = []
        for i, element in enumerate(item):
            epath = f"{path}[{i}]"
            walk.tick(epath)
            if element is None:
                elements.append(_zero(fd))
            elif fd.message_type is not None:
                elements.append(_coerce_message(element, fd.message_type, epath, walk))
            else:
                elements.append(_to_scalar(element, fd, epath))
        return elements
    if fd.message_type is not None:
        return _coerce_message(item, fd.message_type, path, walk)
    walk.tick(path)
    return _to_scalar(item, fd, path)


def _coerce_map(item: Any, fd: FieldDescriptor, path: str, walk: _Walk) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise _FieldError(path, f"expected an object, got {_type_name(item)} {_shown(item)}")
    value_fd = fd.message_type.fields_by_name["value"]
    quantities = (fd.containing_type.full_name, fd.name) in QUANTITY_MAPS
    out: dict[str, Any] = {}
    for raw_key, element in item.items():
        key = _key_text(raw_key, path)
        epath = f"{path}[{key}]"
        walk.tick(epath)
        if element is None:
            out[key] = "0" if quantities else _zero(value_fd)
        elif quantities:
            out[key] = _to_quantity(element, epath)
        elif value_fd.message_type is not None:
            out[key] = _coerce_message(element, value_fd.message_type, epath, walk)
        else:
            out[key] = _to_scalar(element, value_fd, epath)
    return out


# ---------------------------------------------------------------- loading


def _supported_kinds() -> str:
    return ", ".join(f"{k.kind} ({k.api_version})" for k in KINDS)


def _lookup_kind(kind: Any, api_version: Any, source: str, document: int, where: str) -> Kind:
    prefix = f"{where}: " if where else ""
    if not isinstance(kind, str) or not kind:
        raise ManifestError(
            f"{prefix}Object 'kind' is missing or not a string", source=source, document=document
        )
    if not isinstance(api_version, str) or not api_version:
        raise ManifestError(
            f"{prefix}Object 'apiVersion' is missing or not a string (kind {kind})",
            source=source,
            document=document,
            kind=kind,
        )
    found = BY_KIND.get(kind)
    if found is None:
        raise ManifestError(
            f'{prefix}kind "{kind}" (apiVersion "{api_version}") is not supported by kse; '
            f"supported kinds: {_supported_kinds()}",
            source=source,
            document=document,
            kind=kind,
            api_version=api_version,
        )
    if found.api_version != api_version:
        raise ManifestError(
            f'{prefix}kind "{kind}" with apiVersion "{api_version}" is not supported by kse '
            f'(kse serves {kind} as "{found.api_version}"); supported kinds: {_supported_kinds()}',
            source=source,
            document=document,
            kind=kind,
            api_version=api_version,
        )
    return found


@dataclass
class DecodedObject:
    """One object of a manifest, with what the decoder saw on the way.

    `fields` is the manifest's own content for the known fields, coerced to the field types and
    keyed by JSON name (what the user wrote, before protobuf drops zero values: the input of
    kubectl's client-side apply, `kse.objects.apply`). `unknown_fields` are the JSON paths the
    decoder dropped, in document order.
    """

    obj: pb.Object
    fields: dict[str, Any]
    unknown_fields: list[str]


def _object_from_dict(
    raw: dict[str, Any], kind: Kind, source: str, document: int, where: str
) -> DecodedObject:
    meta = raw.get("metadata")
    name = (meta.get("name") or meta.get("generateName")) if isinstance(meta, dict) else None
    label = f"{kind.kind} {name!r}" if isinstance(name, str) else kind.kind
    prefix = f"{where}: " if where else ""
    walk = _Walk()
    try:
        clean = _coerce_message(raw, kind.message.DESCRIPTOR, "", walk)
    except _FieldError as err:
        raise ManifestError(
            f"{prefix}{label}: {err}",
            source=source,
            document=document,
            kind=kind.kind,
            api_version=kind.api_version,
            path=err.path,
        ) from None
    out = pb.Object()
    target = getattr(out, kind.field)
    try:
        json_format.ParseDict(clean, target, ignore_unknown_fields=True)
    except json_format.ParseError as err:  # pragma: no cover - the coercion should prevent this
        raise ManifestError(
            f"{prefix}{label}: {err}",
            source=source,
            document=document,
            kind=kind.kind,
            api_version=kind.api_version,
        ) from None
    target.SetInParent()
    return DecodedObject(out, clean, walk.unknown)


def _load_document(doc: Any, source: str, document: int) -> list[DecodedObject]:
    if not isinstance(doc, dict):
        raise ManifestError(
            f"expected an object (a mapping), got {_type_name(doc)}", source=source, document=document
        )
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if isinstance(kind, str) and kind.endswith("List") and "items" in doc and kind not in BY_KIND:
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise ManifestError(
                f"{kind}: items must be an array", source=source, document=document, kind=kind
            )
        # A typed list (PodList) names its items' kind; a plain List's items carry their own.
        item_kind = kind[: -len("List")] if kind != "List" else None
        out: list[DecodedObject] = []
        for i, item in enumerate(items):
            where = f"items[{i}]"
            if not isinstance(item, dict):
                raise ManifestError(
                    f"{where}: expected an object, got {_type_name(item)}", source=source, document=document
                )
            ikind = item.get("kind") or item_kind
            iapi = item.get("apiVersion") or (api_version if item_kind else None)
            k = _lookup_kind(ikind, iapi, source, document, where)
            decoded = _object_from_dict(item, k, source, document, where)
            msg = getattr(decoded.obj, k.field)
            msg.kind = msg.kind or k.kind
            msg.api_version = msg.api_version or k.api_version
            decoded.fields.setdefault("kind", k.kind)
            decoded.fields.setdefault("apiVersion", k.api_version)
            out.append(decoded)
        return out
    k = _lookup_kind(kind, api_version, source, document, "")
    return [_object_from_dict(doc, k, source, document, "")]


def decode_manifests(text: str, source: str = "<input>") -> list[DecodedObject]:
    """Every object in a YAML (multi-document, KYAML) or JSON manifest, in order, each with its
    known fields as written and the paths of the unknown fields that were dropped.

    Empty documents are skipped; `kind: List` (and `PodList`, ...) contribute their items.
    Raises ManifestError for invalid YAML/JSON, an unsupported kind or apiVersion, or a field
    value of the wrong shape (naming the field path).
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    stripped = text.lstrip()
    docs: Iterable[tuple[int, Any]] | None = None
    if stripped.startswith(("{", "[")):
        docs = _json_documents(text)
    if docs is None:
        docs = _yaml_documents(text, source)
    objects: list[DecodedObject] = []
    for index, doc in docs:
        if doc is None:
            continue
        if isinstance(doc, list):  # a JSON array of objects
            for item in doc:
                objects.extend(_load_document(item, source, index))
        else:
            objects.extend(_load_document(doc, source, index))
    return objects


def load_manifests(text: str, source: str = "<input>") -> list[pb.Object]:
    """Every object in a YAML (multi-document, KYAML) or JSON manifest, in order (unknown fields
    dropped silently; `decode_manifests` reports them).

    Empty documents are skipped; `kind: List` (and `PodList`, ...) contribute their items.
    Raises ManifestError for invalid YAML/JSON, an unsupported kind or apiVersion, or a field
    value of the wrong shape (naming the field path).
    """
    return [decoded.obj for decoded in decode_manifests(text, source)]


_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def load_manifest_files(paths: Iterable[str | Path] | str | Path) -> list[pb.Object]:
    """Load files (a directory: its .yaml/.yml/.json files, sorted, as `kubectl apply -f dir`)."""
    if isinstance(paths, str | Path):
        paths = [paths]
    objects: list[pb.Object] = []
    for entry in paths:
        path = Path(entry)
        files = (
            sorted(p for p in path.iterdir() if p.is_file() and p.suffix in _MANIFEST_SUFFIXES)
            if path.is_dir()
            else [path]
        )
        for file in files:
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise ManifestError(f"cannot read: {err}", source=str(file)) from None
            objects.extend(load_manifests(text, source=str(file)))
    return objects


# ---------------------------------------------------------------- dumping


def _ints_back(data: dict[str, Any], desc: Descriptor) -> None:
    """Turn protobuf-JSON's quoted 64-bit integers back into numbers, in place (kubectl prints numbers)."""
    by_json = _fields_by_json_name(desc)
    for key, item in data.items():
        fd = by_json.get(key)
        if fd is None:
            continue
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value_fd = fd.message_type.fields_by_name["value"]
            if value_fd.message_type is not None:
                for element in item.values():
                    _ints_back(element, value_fd.message_type)
            elif value_fd.type in _INT64_TYPES:
                for k in item:
                    item[k] = int(item[k])
        elif fd.message_type is not None and fd.message_type.full_name == "google.protobuf.Value":
            # IntOrString fields: json_format writes every number as a float ("maxSurge: 1.0").
            if isinstance(item, float) and item.is_integer():
                data[key] = int(item)
        elif fd.message_type is not None and fd.message_type.full_name.startswith("google.protobuf."):
            continue  # Struct (fieldsV1) is plain JSON already
        elif fd.message_type is not None:
            for element in item if isinstance(item, list) else [item]:
                _ints_back(element, fd.message_type)
        elif fd.type in _INT64_TYPES:
            data[key] = [int(v) for v in item] if isinstance(item, list) else int(item)


def _message_of(obj: pb.Object | Message) -> tuple[Message, Kind]:
    if isinstance(obj, pb.Object):
        kind = kind_of(obj)
        return getattr(obj, kind.field), kind
    kind = BY_MESSAGE[obj.DESCRIPTOR.full_name]
    return obj, kind


def to_dict(obj: pb.Object | Message) -> dict[str, Any]:
    """The object as kubectl prints it: camelCase keys, apiVersion and kind first, defaults omitted."""
    msg, kind = _message_of(obj)
    body = json_format.MessageToDict(msg)
    _ints_back(body, msg.DESCRIPTOR)
    body.pop("apiVersion", None)
    body.pop("kind", None)
    return {"apiVersion": kind.api_version, "kind": kind.kind, **body}


def list_to_dict(objs: Iterable[pb.Object | Message]) -> dict[str, Any]:
    """A `kind: List` holding the objects (what `kubectl get -o yaml` prints for several)."""
    return {"apiVersion": "v1", "kind": "List", "items": [to_dict(o) for o in objs], "metadata": {}}


def _dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)


def to_yaml(obj: pb.Object | Message) -> str:
    """One object as a YAML document."""
    return _dump_yaml(to_dict(obj))


def to_yaml_all(objs: Sequence[pb.Object | Message]) -> str:
    """Several objects as a multi-document YAML stream ("---" between documents)."""
    return "---\n".join(to_yaml(o) for o in objs)


def to_json(obj: pb.Object | Message, indent: int | None = 2) -> str:
    """One object as JSON."""
    return json.dumps(to_dict(obj), indent=indent, ensure_ascii=False)


# ---------------------------------------------------------------- one decoded JSON object, as an API server


def decode_object(raw: dict[str, Any], kind: Kind, source: str = "<request body>") -> DecodedObject:
    """One already-decoded JSON object of `kind` (a request body), coerced as a manifest is, with
    the JSON paths of the fields no message has (for kube-apiserver's `fieldValidation`).

    Unlike `load_manifests`, the kind is known (from the URL); the body's own kind and apiVersion
    are left for validation to compare. Raises ManifestError naming the field path."""
    return _object_from_dict(raw, kind, source, 1, "")
