"""Label selectors and node-affinity matching, as Kubernetes evaluates them.

Three upstream sources, matched in behaviour:

* `k8s.io/apimachinery/pkg/labels/selector.go`: the string syntax
  ("a=b,c!=d,e in (x,y),f notin (z),g,!h", also "==", ">" and "<"), its lexer and recursive-descent
  parser (same tokens, same error texts), `NewRequirement`'s validation and `Requirement.Matches`;
* `k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go` `LabelSelectorAsSelector`: a *nil* selector
  matches nothing, an *empty* one (no matchLabels, no matchExpressions) matches everything. Proto3
  cannot tell "unset" from "empty" on a plain value, so the two cases have separate constructors:
  `label_selector_as_selector(None)` / `Selector.nothing()` versus `Selector.everything()`, and
  `optional_label_selector(parent, "label_selector")` reads the field's presence for you;
* `k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`: node selector terms
  (ORed; an empty term matches nothing; a term with a parse error never matches, and the error
  is reported only when no term matched), matchExpressions with Gt/Lt compared as int64,
  matchFields over `metadata.name` only (In/NotIn with exactly one value), `nodeSelector` plus
  required node affinity for a pod, and the weighted preferred terms.

Label key/value validation lives in `kse.objects.names`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from google.protobuf.message import Message

from kse.objects import names
from proto import kse_pb2 as pb

__all__ = [
    "CompiledNodeSelectorTerm",
    "NodeSelectorMatcher",
    "Operator",
    "PreferredSchedulingTerms",
    "RequiredNodeAffinity",
    "Requirement",
    "Selector",
    "SelectorError",
    "compile_node_selector_term",
    "label_selector_as_selector",
    "new_requirement",
    "node_selector_matches",
    "node_selector_requirement_matches",
    "node_selector_term_matches",
    "optional_label_selector",
    "parse_selector",
    "selector_from_set",
]


class SelectorError(ValueError):
    """A selector that cannot be parsed or built; the message names the offending part."""


class Operator(enum.StrEnum):
    """Requirement operators, spelled as upstream's selection.Operator."""

    DOES_NOT_EXIST = "!"
    EQUALS = "="
    DOUBLE_EQUALS = "=="
    IN = "in"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    EXISTS = "exists"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"
_VALID_OPERATORS = '"in", "notin", "=", "==", "!=", "gt", "lt", "exists", "!"'
_INT64_RE = re.compile(r"[+-]?[0-9]+\Z", re.ASCII)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64): optional sign, ASCII digits, in int64 range."""
    if not _INT64_RE.match(text):
        return None
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else None


_MODE_IN, _MODE_NOT_IN, _MODE_EXISTS, _MODE_DOES_NOT_EXIST, _MODE_GT, _MODE_LT = range(6)
_MODES = {
    Operator.IN: _MODE_IN,
    Operator.EQUALS: _MODE_IN,
    Operator.DOUBLE_EQUALS: _MODE_IN,
    Operator.NOT_IN: _MODE_NOT_IN,
    Operator.NOT_EQUALS: _MODE_NOT_IN,
    Operator.EXISTS: _MODE_EXISTS,
    Operator.DOES_NOT_EXIST: _MODE_DOES_NOT_EXIST,
    Operator.GREATER_THAN: _MODE_GT,
    Operator.LESS_THAN: _MODE_LT,
}


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _aggregate(errs: Sequence[str]) -> str:
    """Go's utilerrors aggregate text: one error plain, several in brackets."""
    return errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One clause of a selector: a key, an operator and (for some operators) values."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()
    _value_set: frozenset[str] = field(init=False, repr=False, compare=False)
    _mode: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_value_set", frozenset(self.values))
        # Matching dispatches on a small int: comparing enum members costs far more on this path.
        object.__setattr__(self, "_mode", _MODES[self.operator])

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Requirement.Matches: NotIn/!= also match when the key is absent; Gt/Lt compare int64."""
        # `.get`, never `[]`: indexing a protobuf map inserts the missing key.
        val = labels.get(self.key)
        mode = self._mode
        if mode == _MODE_IN:
            return val is not None and val in self._value_set
        if mode == _MODE_NOT_IN:
            return val is None or val not in self._value_set
        if mode == _MODE_EXISTS:
            return val is not None
        if mode == _MODE_DOES_NOT_EXIST:
            return val is None
        if val is None or len(self.values) != 1:
            return False
        have, want = parse_int64(val), parse_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if mode == _MODE_GT else have < want

    def __str__(self) -> str:
        """The string form upstream prints (values sorted, "in"/"notin" with parentheses)."""
        op = self.operator
        if op is Operator.DOES_NOT_EXIST:
            return "!" + self.key
        if op is Operator.EXISTS:
            return self.key
        joined = ",".join(sorted(self.values))
        if op is Operator.IN:
            return f"{self.key} in ({joined})"
        if op is Operator.NOT_IN:
            return f"{self.key} notin ({joined})"
        sym = {Operator.GREATER_THAN: ">", Operator.LESS_THAN: "<"}.get(op, op.value)
        return f"{self.key}{sym}{joined}"


def new_requirement(
    key: str, operator: Operator | str, values: Iterable[str] = (), *, path: str = ""
) -> Requirement:
    """A validated Requirement, as upstream's NewRequirement (key and values must be label-valid).

    `path` prefixes the field paths in error messages ("spec...matchExpressions[0]").
    """
    vals = tuple(values)
    prefix = f"{path}." if path else ""
    errs: list[str] = []

    def invalid(where: str, bad: str, detail: str) -> None:
        errs.append(f"{prefix}{where}: Invalid value: {bad}: {detail}")

    key_errs = names.is_label_key(key)
    if key_errs:
        invalid("key", _quote(key), "; ".join(key_errs))
    try:
        op = Operator(operator)
    except ValueError:
        bad_op = _quote(str(operator))
        errs.append(f"{prefix}operator: Unsupported value: {bad_op}: supported values: {_VALID_OPERATORS}")
        raise SelectorError(_aggregate(errs)) from None
    shown = "[" + " ".join(vals) + "]"
    if op in (Operator.IN, Operator.NOT_IN):
        if not vals:
            invalid("values", shown, "for 'in', 'notin' operators, values set can't be empty")
    elif op in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.NOT_EQUALS):
        if len(vals) != 1:
            invalid("values", shown, "exact-match compatibility requires one single value")
    elif op in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        if vals:
            invalid("values", shown, "values set must be empty for exists and does not exist")
    else:
        if len(vals) != 1:
            invalid("values", shown, "for 'Gt', 'Lt' operators, exactly one value is required")
        for i, v in enumerate(vals):
            if parse_int64(v) is None:
                invalid(f"values[{i}]", _quote(v), "for 'Gt', 'Lt' operators, the value must be an integer")
    for i, v in enumerate(vals):
        val_errs = names.is_valid_label_value(v)
        if val_errs:
            invalid(f"values[{i}][{key}]", _quote(v), "; ".join(val_errs))
    if errs:
        raise SelectorError(_aggregate(errs))
    return Requirement(key, op, vals)


class Selector:
    """An AND of requirements, or the special selector that matches nothing.

    Immutable; `matches` is the hot path (the watch cache and the scheduler call it per object).
    """

    __slots__ = ("_nothing", "requirements")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        # Sorted by key (stable), as upstream's Add and parse do, for a deterministic string form.
        self.requirements: tuple[Requirement, ...] = tuple(sorted(requirements, key=lambda r: r.key))
        self._nothing = nothing

    @staticmethod
    def everything() -> Selector:
        """The selector that matches every label set (labels.Everything; an empty LabelSelector)."""
        return _EVERYTHING

    @staticmethod
    def nothing() -> Selector:
        """The selector that matches no label set (labels.Nothing; a nil LabelSelector)."""
        return _NOTHING

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (upstream's Empty; Nothing is not empty)."""
        return not self._nothing and not self.requirements

    @property
    def matches_nothing(self) -> bool:
        """True only for the Nothing selector."""
        return self._nothing

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether every requirement holds for the label set."""
        if self._nothing:
            return False
        for req in self.requirements:
            if not req.matches(labels):
                return False
        return True

    def add(self, *reqs: Requirement) -> Selector:
        """A new selector with more requirements (Nothing stays Nothing)."""
        if self._nothing:
            return self
        return Selector((*self.requirements, *reqs))

    def requires_exact_match(self, key: str) -> str | None:
        """The single value `key` must have for a match, if a requirement pins it (=, ==, in (x))."""
        for req in self.requirements:
            if req.key == key and req.operator in (Operator.EQUALS, Operator.DOUBLE_EQUALS, Operator.IN):
                if len(req.values) == 1:
                    return req.values[0]
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return "Selector(<nothing>)" if self._nothing else f"Selector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selector):
            return NotImplemented
        return self._nothing == other._nothing and self.requirements == other.requirements

    def __hash__(self) -> int:
        return hash((self._nothing, self.requirements))


_EVERYTHING = Selector()
_NOTHING = Selector(nothing=True)


# ---------------------------------------------------------------- the string syntax


class _Tok(enum.IntEnum):
    ERROR = 0
    EOS = 1
    CLOSED_PAR = 2
    COMMA = 3
    NOT = 4  # "!", DoesNotExistToken
    DOUBLE_EQUALS = 5
    EQUALS = 6
    GT = 7
    IDENT = 8
    IN = 9
    LT = 10
    NOT_EQUALS = 11
    NOT_IN = 12
    OPEN_PAR = 13


_STRING_TO_TOKEN = {
    ")": _Tok.CLOSED_PAR,
    ",": _Tok.COMMA,
    "!": _Tok.NOT,
    "==": _Tok.DOUBLE_EQUALS,
    "=": _Tok.EQUALS,
    ">": _Tok.GT,
    "in": _Tok.IN,
    "<": _Tok.LT,
    "!=": _Tok.NOT_EQUALS,
    "notin": _Tok.NOT_IN,
    "(": _Tok.OPEN_PAR,
}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")


def _lex(text: str) -> list[tuple[_Tok, str]]:
    """Tokenise as upstream's Lexer: specials greedily (longest known operator), words, keywords."""
    items: list[tuple[_Tok, str]] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= end:
            items.append((_Tok.EOS, ""))
            return items
        if text[pos] in _SPECIAL:
            buf = ""
            last: tuple[_Tok, str] | None = None
            while pos < end and text[pos] in _SPECIAL:
                candidate = buf + text[pos]
                tok = _STRING_TO_TOKEN.get(candidate)
                if tok is not None:
                    last = (tok, candidate)
                elif last is not None:
                    break
                buf = candidate
                pos += 1
            if last is None:
                items.append((_Tok.ERROR, f"error expected: keyword found '{buf}'"))
            else:
                items.append(last)
            continue
        start = pos
        while pos < end and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
            pos += 1
        word = text[start:pos]
        items.append((_STRING_TO_TOKEN.get(word, _Tok.IDENT), word))


class _Parser:
    """Upstream's Parser: lookahead/consume with the Values context turning in/notin into words."""

    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def _token(self, index: int, values: bool) -> tuple[_Tok, str]:
        tok, lit = self.items[index]
        if values and tok in (_Tok.IN, _Tok.NOT_IN):
            tok = _Tok.IDENT
        return tok, lit

    def lookahead(self, values: bool = True) -> tuple[_Tok, str]:
        return self._token(self.pos, values)

    def consume(self, values: bool = True) -> tuple[_Tok, str]:
        self.pos += 1
        return self._token(self.pos - 1, values)

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok in (_Tok.IDENT, _Tok.NOT):
                try:
                    reqs.append(self.parse_requirement())
                except SelectorError as err:
                    raise SelectorError(f"unable to parse requirement: {err}") from None
                tok, lit = self.consume()
                if tok is _Tok.EOS:
                    return reqs
                if tok is _Tok.COMMA:
                    tok2, lit2 = self.lookahead()
                    if tok2 not in (_Tok.IDENT, _Tok.NOT):
                        raise SelectorError(f"found '{lit2}', expected: identifier after ','")
                else:
                    raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            elif tok is _Tok.EOS:
                return reqs
            else:
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def parse_requirement(self) -> Requirement:
        key, op = self.parse_key_and_infer_operator()
        if op in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
            return new_requirement(key, op)
        op = self.parse_operator()
        if op in (Operator.IN, Operator.NOT_IN):
            values = self.parse_values()
        else:
            values = self.parse_exact_value()
        return new_requirement(key, op, sorted(values))

    def parse_key_and_infer_operator(self) -> tuple[str, Operator | None]:
        op: Operator | None = None
        tok, lit = self.consume()
        if tok is _Tok.NOT:
            op = Operator.DOES_NOT_EXIST
            tok, lit = self.consume()
        if tok is not _Tok.IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key_errs = names.is_label_key(lit)
        if key_errs:
            raise SelectorError(f"key: Invalid value: {_quote(lit)}: {'; '.join(key_errs)}")
        tok, _ = self.lookahead()
        if tok in (_Tok.EOS, _Tok.COMMA) and op is not Operator.DOES_NOT_EXIST:
            op = Operator.EXISTS
        return lit, op

    def parse_operator(self) -> Operator:
        tok, lit = self.consume(values=False)
        ops = {
            _Tok.IN: Operator.IN,
            _Tok.EQUALS: Operator.EQUALS,
            _Tok.DOUBLE_EQUALS: Operator.DOUBLE_EQUALS,
            _Tok.GT: Operator.GREATER_THAN,
            _Tok.LT: Operator.LESS_THAN,
            _Tok.NOT_IN: Operator.NOT_IN,
            _Tok.NOT_EQUALS: Operator.NOT_EQUALS,
        }
        op = ops.get(tok)
        if op is None:
            raise SelectorError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        return op

    def parse_values(self) -> set[str]:
        tok, lit = self.consume()
        if tok is not _Tok.OPEN_PAR:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok in (_Tok.IDENT, _Tok.COMMA):
            values = self.parse_identifiers_list()
            tok, _ = self.consume()
            if tok is not _Tok.CLOSED_PAR:
                raise SelectorError(f"found '{lit}', expected: ')'")
            return values
        if tok is _Tok.CLOSED_PAR:  # "()"
            self.consume()
            return {""}
        raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.consume()
            if tok is _Tok.IDENT:
                values.add(lit)
                tok2, lit2 = self.lookahead()
                if tok2 is _Tok.COMMA:
                    continue
                if tok2 is _Tok.CLOSED_PAR:
                    return values
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok is _Tok.COMMA:  # "(,", ",,", ",)" each stand for an empty value
                if not values:
                    values.add("")
                tok2, _ = self.lookahead()
                if tok2 in (_Tok.CLOSED_PAR, _Tok.COMMA):
                    values.add("")
                if tok2 is _Tok.CLOSED_PAR:
                    return values
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        tok, _ = self.lookahead()
        if tok in (_Tok.EOS, _Tok.COMMA):
            return {""}
        tok, lit = self.consume()
        if tok is _Tok.IDENT:
            return {lit}
        raise SelectorError(f"found '{lit}', expected: identifier")


@lru_cache(maxsize=4096)
def parse_selector(text: str) -> Selector:
    """Parse the string form ("a=b,c!=d,e in (x,y),f notin (z),g,!h") as labels.Parse.

    The empty string is Everything. Raises SelectorError naming what was found and expected, or
    the invalid key/value. Results are memoised (selectors are immutable): watches and list calls
    repeat the same few selector strings.
    """
    try:
        return Selector(_Parser(text).parse())
    except SelectorError as err:
        raise SelectorError(f"invalid label selector {_quote(text)}: {err}") from None


def selector_from_set(labels: Mapping[str, str]) -> Selector:
    """Exact match on every pair (labels.SelectorFromSet); an empty set is Everything. Unvalidated."""
    if not labels:
        return _EVERYTHING
    return Selector(Requirement(k, Operator.EQUALS, (v,)) for k, v in labels.items())


_LABEL_SELECTOR_OPS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
}


@lru_cache(maxsize=8192)
def _selector_from_bytes(data: bytes) -> Selector:
    ls = pb.LabelSelector.FromString(data)
    reqs = [new_requirement(k, Operator.EQUALS, (v,)) for k, v in ls.match_labels.items()]
    for expr in ls.match_expressions:
        op = _LABEL_SELECTOR_OPS.get(expr.operator)
        if op is None:
            raise SelectorError(f"{_quote(expr.operator)} is not a valid label selector operator")
        reqs.append(new_requirement(expr.key, op, expr.values))
    return Selector(reqs)


def label_selector_as_selector(ls: pb.LabelSelector | None) -> Selector:
    """metav1.LabelSelectorAsSelector: None matches nothing, an empty selector everything.

    Raises SelectorError for an unknown operator or an invalid key/value. Memoised on the
    message's bytes, so callers may convert the same selector per object cheaply.
    """
    if ls is None:
        return _NOTHING
    if not ls.match_labels and not ls.match_expressions:
        return _EVERYTHING
    return _selector_from_bytes(ls.SerializeToString(deterministic=True))


def optional_label_selector(parent: Message, field_name: str = "label_selector") -> Selector:
    """The selector in `parent.<field_name>`, honouring presence: unset is Nothing, set-but-empty Everything.

    For example `optional_label_selector(term)` on a PodAffinityTerm, or
    `optional_label_selector(term, "namespace_selector")`.
    """
    if not parent.HasField(field_name):
        return _NOTHING
    return label_selector_as_selector(getattr(parent, field_name))


# ---------------------------------------------------------------- node affinity


_NODE_SELECTOR_OPS = {
    "In": Operator.IN,
    "NotIn": Operator.NOT_IN,
    "Exists": Operator.EXISTS,
    "DoesNotExist": Operator.DOES_NOT_EXIST,
    "Gt": Operator.GREATER_THAN,
    "Lt": Operator.LESS_THAN,
}
_NODE_OPS_SUPPORTED = '"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"'


def _node_requirement(req: pb.NodeSelectorRequirement, path: str) -> Requirement:
    op = _NODE_SELECTOR_OPS.get(req.operator)
    if op is None:
        raise SelectorError(
            f"{path}.operator: Unsupported value: {_quote(req.operator)}: "
            f"supported values: {_NODE_OPS_SUPPORTED}"
        )
    return new_requirement(req.key, op, req.values, path=path)


@dataclass(frozen=True, slots=True)
class CompiledNodeSelectorTerm:
    """A parsed NodeSelectorTerm: label requirements, `metadata.name` field terms, parse errors."""

    labels: Selector | None
    # (field key, must equal?, value): In is "=", NotIn is "!=", as fields.OneTermEqualSelector.
    fields: tuple[tuple[str, bool, str], ...] | None
    errors: tuple[str, ...] = ()

    def match(self, node_labels: Mapping[str, str], node_name: str) -> tuple[bool, tuple[str, ...]]:
        """(matched, parse errors); a term with parse errors never matches."""
        if self.errors:
            return False, self.errors
        if self.labels is not None and not self.labels.matches(node_labels):
            return False, ()
        # Upstream skips the field check when the node has no name (empty field set).
        if self.fields is not None and node_name:
            for key, equal, want in self.fields:
                have = node_name if key == "metadata.name" else ""
                if (have == want) != equal:
                    return False, ()
        return True, ()

    def matches(self, node: pb.Node) -> bool:
        """Whether the term matches the node (errors count as no match)."""
        return self.match(node.metadata.labels, node.metadata.name)[0]


def compile_node_selector_term(term: pb.NodeSelectorTerm, path: str = "") -> CompiledNodeSelectorTerm | None:
    """Parse a term once for many nodes; None for an empty term (which matches no node)."""
    if not term.match_expressions and not term.match_fields:
        return None
    errors: list[str] = []
    labels: Selector | None = None
    fields: tuple[tuple[str, bool, str], ...] | None = None
    base = f"{path}." if path else ""
    if term.match_expressions:
        reqs: list[Requirement] = []
        for i, req in enumerate(term.match_expressions):
            try:
                reqs.append(_node_requirement(req, f"{base}matchExpressions[{i}]"))
            except SelectorError as err:
                errors.append(str(err))
        labels = Selector(reqs)
    if term.match_fields:
        terms: list[tuple[str, bool, str]] = []
        for i, req in enumerate(term.match_fields):
            p = f"{base}matchFields[{i}]"
            if req.operator in ("In", "NotIn"):
                if len(req.values) != 1:
                    shown = "[" + " ".join(req.values) + "]"
                    errors.append(f"{p}.values: Invalid value: {shown}: must have one element")
                else:
                    terms.append((req.key, req.operator == "In", req.values[0]))
            else:
                errors.append(
                    f"{p}.operator: Unsupported value: {_quote(req.operator)}: "
                    'supported values: "In", "NotIn"'
                )
        fields = tuple(terms)
    return CompiledNodeSelectorTerm(labels, fields, tuple(errors))


def node_selector_requirement_matches(req: pb.NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    """One matchExpressions entry against a node's labels; an invalid requirement matches nothing.

    Gt/Lt need exactly one integer value and compare it with the label parsed as int64.
    """
    try:
        return _node_requirement(req, "matchExpressions").matches(labels)
    except SelectorError:
        return False


def node_selector_term_matches(term: pb.NodeSelectorTerm, node: pb.Node) -> bool:
    """A NodeSelectorTerm against a node: its expressions AND its fields; an empty term is False."""
    compiled = compile_node_selector_term(term)
    return compiled is not None and compiled.matches(node)


class NodeSelectorMatcher:
    """A parsed NodeSelector (upstream's LazyErrorNodeSelector): terms ORed, errors lazy."""

    __slots__ = ("terms",)

    def __init__(self, ns: pb.NodeSelector, path: str = "") -> None:
        base = f"{path}." if path else ""
        compiled = (
            compile_node_selector_term(t, f"{base}nodeSelectorTerms[{i}]")
            for i, t in enumerate(ns.node_selector_terms)
        )
        self.terms: tuple[CompiledNodeSelectorTerm, ...] = tuple(t for t in compiled if t is not None)

    @property
    def errors(self) -> list[str]:
        """Every parse error of every term (NewNodeSelector reports them all up front)."""
        return [e for t in self.terms for e in t.errors]

    def match(self, node: pb.Node) -> tuple[bool, list[str]]:
        """(matched, errors); errors are returned only when no term matched."""
        labels, name = node.metadata.labels, node.metadata.name
        errs: list[str] = []
        for term in self.terms:
            ok, term_errs = term.match(labels, name)
            if term_errs:
                errs.extend(term_errs)
                continue
            if ok:
                return True, []
        return False, errs

    def matches(self, node: pb.Node) -> bool:
        """Whether any term matches the node."""
        return self.match(node)[0]


def node_selector_matches(ns: pb.NodeSelector, node: pb.Node) -> bool:
    """A whole NodeSelector (terms ORed) against a node."""
    return NodeSelectorMatcher(ns).matches(node)


class RequiredNodeAffinity:
    """A pod's hard node constraints: `spec.nodeSelector` AND required node affinity.

    Upstream's nodeaffinity.GetRequiredNodeAffinity; build it once per pod, match it per node.
    """

    __slots__ = ("node_selector", "selector")

    def __init__(self, node_selector: Mapping[str, str], affinity: pb.Affinity | None = None) -> None:
        self.selector: Selector | None = selector_from_set(node_selector) if node_selector else None
        self.node_selector: NodeSelectorMatcher | None = None
        if (
            affinity is not None
            and affinity.HasField("node_affinity")
            and affinity.node_affinity.HasField("required_during_scheduling_ignored_during_execution")
        ):
            self.node_selector = NodeSelectorMatcher(
                affinity.node_affinity.required_during_scheduling_ignored_during_execution
            )

    @classmethod
    def from_pod(cls, pod: pb.Pod) -> RequiredNodeAffinity:
        """The pod's nodeSelector and required node affinity."""
        spec = pod.spec
        return cls(spec.node_selector, spec.affinity if spec.HasField("affinity") else None)

    def match(self, node: pb.Node) -> tuple[bool, list[str]]:
        """(matched, errors) as upstream's RequiredNodeAffinity.Match."""
        if self.selector is not None and not self.selector.matches(node.metadata.labels):
            return False, []
        if self.node_selector is not None:
            return self.node_selector.match(node)
        return True, []

    def matches(self, node: pb.Node) -> bool:
        """Whether the pod may run on the node as far as node selection goes."""
        return self.match(node)[0]


class PreferredSchedulingTerms:
    """Weighted preferred node-affinity terms; `score` sums the weights of matching terms.

    As upstream's NewPreferredSchedulingTerms, terms with weight 0 or no requirements are skipped
    and any parse error fails construction (SelectorError) instead of being ignored.
    """

    __slots__ = ("terms",)

    def __init__(self, terms: Iterable[pb.PreferredSchedulingTerm], path: str = "") -> None:
        parsed: list[tuple[CompiledNodeSelectorTerm, int]] = []
        errors: list[str] = []
        for i, term in enumerate(terms):
            if term.weight == 0:
                continue
            compiled = compile_node_selector_term(term.preference, f"{path}[{i}]" if path else f"[{i}]")
            if compiled is None:
                continue
            if compiled.errors:
                errors.extend(compiled.errors)
            else:
                parsed.append((compiled, term.weight))
        if errors:
            raise SelectorError(_aggregate(errors))
        self.terms: tuple[tuple[CompiledNodeSelectorTerm, int], ...] = tuple(parsed)

    def score(self, node: pb.Node) -> int:
        """The sum of the weights of the terms the node matches."""
        labels, name = node.metadata.labels, node.metadata.name
        return sum(weight for term, weight in self.terms if term.match(labels, name)[0])
