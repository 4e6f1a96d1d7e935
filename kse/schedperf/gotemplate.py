"""Go `text/template`, the subset scheduler_perf's template files use, rendered from Python.

scheduler_perf renders every template file (nodes, pods, `createAny` objects) with Go's
text/template and the data `{"Index": i, "Count": n, **templateParams}`, plus its own helper
functions (test/integration/scheduler_perf/operations.go, getTemplateFuncs): `AddInt`,
`SubtractInt`, `MultiplyInt`, `DivideInt`, `AddFloat`, `SubtractFloat`, `MultiplyFloat`,
`DivideFloat`, `Mod`. This module implements the language those files are written in:

* text and actions `{{ ... }}`, with the trim markers `{{- ` / ` -}}` and comments `{{/* */}}`;
* pipelines `a | f b` (the previous value becomes the last argument), parenthesised
  sub-pipelines, fields `.Index` / `.A.B` / `.`, literals (ints, floats, quoted and raw strings,
  true/false/nil);
* `if` / `else if` / `else` / `end`, `range` (over a list, a map in key order, or an int, as Go
  1.22), `with`;
* Go's builtins `printf`, `print`, `len`, `index`, `eq`, `ne`, `lt`, `le`, `gt`, `ge`, `and`,
  `or`, `not`, and scheduler_perf's helpers, which convert their arguments to float64 as upstream
  does (toFloat64: numbers and numeric strings) and truncate towards zero for the *Int ones.

Values print as Go's fmt %v does: ints in decimal, float64 in the shortest form with an exponent
from 1e+06 up ('g', as strconv.FormatFloat(f, 'g', -1, 64)), bools as true/false, a missing map key
as `<no value>`. Errors (syntax, an unknown function, a field of something that has none,
division by zero) raise TemplateError naming the template and the action.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Template", "TemplateError", "go_value_text", "render"]


class TemplateError(ValueError):
    """A template that cannot be parsed or executed; the message names the template and action."""


# ---------------------------------------------------------------- printing as Go's %v


def _go_float(f: float) -> str:
    """fmt's %v of a float64, which is strconv.FormatFloat(f, 'g', -1, 64): the shortest digits
    that round-trip, in %e form when the exponent is < -4 or >= 6 (so 1e+06, 2.5, 0.0001)."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    digits_text = repr(abs(f))  # shortest round-trip digits
    mantissa, _, exp_text = digits_text.partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    exp = int(exp_text) if exp_text else 0
    # decimal point position relative to the digit string
    if int_part.strip("0"):
        point = len(int_part.lstrip("0")) + exp
    else:
        point = -(len(frac_part) - len(frac_part.lstrip("0"))) + exp
    digits = digits.rstrip("0") or "0"
    x = point - 1
    sign = "-" if f < 0 else ""
    if x < -4 or x >= 6:
        head, tail = digits[0], digits[1:]
        mant = head + ("." + tail if tail else "")
        return f"{sign}{mant}e{'+' if x >= 0 else '-'}{abs(x):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def go_value_text(value: Any) -> str:
    """A value as Go's fmt %v prints it (what `{{ pipeline }}` writes)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{go_value_text(k)}:{go_value_text(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_value_text(v) for v in value) + "]"
    return str(value)


# ---------------------------------------------------------------- functions


def _to_float64(value: Any) -> float:
    """scheduler_perf's toFloat64: numbers, and strings that parse as floats; else an error."""
    if isinstance(value, bool):
        raise TemplateError(f"cannot cast {go_value_text(value)} to float64")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise TemplateError(f"cannot cast {go_value_text(value)} to float64")


def _trunc(f: float) -> int:
    if math.isnan(f) or math.isinf(f):
        raise TemplateError(f"cannot convert {_go_float(f)} to int")
    return int(f)  # Go's int(float64) truncates towards zero


def _divide_float(i: Any, j: Any) -> float:
    b = _to_float64(j)
    if b == 0:
        raise TemplateError("division by zero")
    return _to_float64(i) / b


def _mod(a: Any, b: Any) -> int:
    x, y = _trunc(_to_float64(a)), _trunc(_to_float64(b))
    if y == 0:
        raise TemplateError("integer divide by zero")
    return int(math.fmod(x, y))  # Go's % takes the sign of the dividend


def _sum(numbers: Sequence[Any]) -> float:
    return math.fsum(_to_float64(n) for n in numbers)


def _product(numbers: Sequence[Any]) -> float:
    out = 1.0
    for n in numbers:
        out *= _to_float64(n)
    return out


def _truth(value: Any) -> bool:
    """Go template truth: false, 0, nil, empty string/list/map are false."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str | list | tuple | Mapping):
        return len(value) > 0
    return True


def _basic(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, int | float | str):
        return value
    raise TemplateError(f"incompatible type for comparison: {go_value_text(value)}")


def _eq(a: Any, *others: Any) -> bool:
    if not others:
        raise TemplateError("eq: missing argument for comparison")
    return any(_basic(a) == _basic(b) for b in others)


def _cmp(name: str, op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def f(a: Any, b: Any) -> bool:
        x, y = _basic(a), _basic(b)
        if isinstance(x, str) != isinstance(y, str):
            raise TemplateError(f"{name}: incompatible types for comparison")
        return bool(op(x, y))

    return f


_PRINTF_VERB = re.compile(r"%([-+# 0]*)(\d+|\*)?(?:\.(\d+))?([vdsqfgeExXtc%])")


def _printf(fmt: Any, *args: Any) -> str:
    if not isinstance(fmt, str):
        raise TemplateError("printf: the format must be a string")
    it = iter(args)

    def repl(m: re.Match[str]) -> str:
        flags, width, prec, verb = m.group(1), m.group(2) or "", m.group(3), m.group(4)
        if verb == "%":
            return "%"
        try:
            arg = next(it)
        except StopIteration:
            return f"%!{verb}(MISSING)"
        spec = flags + width + (f".{prec}" if prec is not None else "")
        if verb in "vs":
            return f"{go_value_text(arg):{_align(flags, width)}}"
        if verb == "q":
            return '"' + str(arg).replace("\\", "\\\\").replace('"', '\\"') + '"'
        if verb == "t":
            return go_value_text(bool(arg))
        if verb in "dxXc":
            if not isinstance(arg, int) or isinstance(arg, bool):
                return f"%!{verb}({go_value_text(arg)})"
            return ("%" + spec + ("d" if verb == "d" else verb)) % arg
        if not isinstance(arg, int | float) or isinstance(arg, bool):
            return f"%!{verb}({go_value_text(arg)})"
        if verb == "f" and prec is None:
            spec += ".6"
        return ("%" + spec + verb) % float(arg)

    return _PRINTF_VERB.sub(repl, fmt)


def _align(flags: str, width: str) -> str:
    if not width:
        return ""
    return ("<" if "-" in flags else ">") + width


def _index(item: Any, *keys: Any) -> Any:
    for k in keys:
        if isinstance(item, Mapping):
            item = item.get(k)
        elif isinstance(item, list | tuple | str):
            if not isinstance(k, int) or not 0 <= k < len(item):
                raise TemplateError(f"index out of range: {go_value_text(k)}")
            item = item[k]
        else:
            raise TemplateError(f"can't index item of type {type(item).__name__}")
    return item


def _len(item: Any) -> int:
    if isinstance(item, str | list | tuple | Mapping):
        return len(item)
    raise TemplateError(f"len of type {type(item).__name__}")


FUNCS: dict[str, Callable[..., Any]] = {
    # scheduler_perf's getTemplateFuncs
    "AddInt": lambda *n: _trunc(_sum(n)),
    "SubtractInt": lambda i, j: _trunc(_to_float64(i) - _to_float64(j)),
    "MultiplyInt": lambda *n: _trunc(_product(n)),
    "DivideInt": lambda i, j: _trunc(_divide_float(i, j)),
    "AddFloat": lambda *n: _sum(n),
    "SubtractFloat": lambda i, j: _to_float64(i) - _to_float64(j),
    "MultiplyFloat": lambda *n: _product(n),
    "DivideFloat": _divide_float,
    "Mod": _mod,
    # Go's builtins
    "printf": _printf,
    "print": lambda *a: "".join(go_value_text(x) for x in a),
    "println": lambda *a: " ".join(go_value_text(x) for x in a) + "\n",
    "len": _len,
    "index": _index,
    "not": lambda a: not _truth(a),
    "and": lambda a, *rest: next((x for x in (a, *rest) if not _truth(x)), (a, *rest)[-1]),
    "or": lambda a, *rest: next((x for x in (a, *rest) if _truth(x)), (a, *rest)[-1]),
    "eq": _eq,
    "ne": lambda a, b: not _eq(a, b),
    "lt": _cmp("lt", lambda a, b: a < b),
    "le": _cmp("le", lambda a, b: a <= b),
    "gt": _cmp("gt", lambda a, b: a > b),
    "ge": _cmp("ge", lambda a, b: a >= b),
}


# ---------------------------------------------------------------- lexing and parsing


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>"(?:[^"\\\n]|\\.)*")
    | (?P<raw>`[^`]*`)
    | (?P<num>[-+]?(?:0[xX][0-9a-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][-+]?\d+)?))
    | (?P<field>(?:\.[A-Za-z_][A-Za-z0-9_]*)+|\.)
    | (?P<var>\$[A-Za-z0-9_]*)
    | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<punct>[()|])
    )""",
    re.VERBOSE,
)


@dataclass
class _Field:
    path: tuple[str, ...]  # () is the dot itself


@dataclass
class _Call:
    name: str
    args: list[Any]


@dataclass
class _Lit:
    value: Any


@dataclass
class _Pipe:
    commands: list[list[Any]]  # each command: operands; a _Call-able identifier first


@dataclass
class _Text:
    text: str


@dataclass
class _Action:
    pipe: _Pipe
    source: str


@dataclass
class _Block:
    kind: str  # if, range, with
    pipe: _Pipe
    source: str
    body: list[Any] = field(default_factory=list)
    orelse: list[Any] = field(default_factory=list)


def _unquote(text: str) -> str:
    body = text[1:-1]
    out: list[str] = []
    i = 0
    escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "'": "'", "a": "\a", "b": "\b",
               "f": "\f", "v": "\v"}  # fmt: skip
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            n = body[i + 1]
            if n in escapes:
                out.append(escapes[n])
                i += 2
                continue
            if n in "xuU":
                size = {"x": 2, "u": 4, "U": 8}[n]
                out.append(chr(int(body[i + 2 : i + 2 + size], 16)))
                i += 2 + size
                continue
            raise TemplateError(f"unknown escape \\{n} in {text}")
        out.append(c)
        i += 1
    return "".join(out)


def _number(text: str) -> int | float:
    t = text.replace("_", "")
    if re.fullmatch(r"[-+]?0[xX][0-9a-fA-F]+", t):
        return int(t, 16)
    if re.fullmatch(r"[-+]?\d+", t):
        return int(t)
    return float(t)


class _PipeParser:
    def __init__(self, text: str, where: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        self.where = where
        pos = 0
        text = text.strip()
        if re.match(r"\$\w*\s*:?=", text):
            raise TemplateError(f"{where}: template variables are not supported")
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise TemplateError(f"{where}: unexpected {text[pos:].strip()[:20]!r}")
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def pipeline(self, until_paren: bool = False) -> _Pipe:
        commands: list[list[Any]] = []
        while True:
            cmd = self.command()
            if not cmd:
                raise TemplateError(f"{self.where}: missing command")
            commands.append(cmd)
            tok = self.peek()
            if tok == ("punct", "|"):
                self.i += 1
                continue
            if tok == ("punct", ")"):
                if not until_paren:
                    raise TemplateError(f"{self.where}: unexpected )")
                self.i += 1
                return _Pipe(commands)
            if tok is None:
                if until_paren:
                    raise TemplateError(f"{self.where}: unclosed (")
                return _Pipe(commands)
            raise TemplateError(f"{self.where}: unexpected {tok[1]!r}")

    def command(self) -> list[Any]:
        operands: list[Any] = []
        while True:
            tok = self.peek()
            if tok is None or tok in (("punct", "|"), ("punct", ")")):
                return operands
            kind, text = tok
            self.i += 1
            if kind == "str":
                operands.append(_Lit(_unquote(text)))
            elif kind == "raw":
                operands.append(_Lit(text[1:-1]))
            elif kind == "num":
                operands.append(_Lit(_number(text)))
            elif kind == "field":
                operands.append(_Field(tuple(p for p in text.split(".") if p)))
            elif kind == "var":
                if text != "$":
                    raise TemplateError(f"{self.where}: template variables ({text}) are not supported")
                operands.append(_Field(()))  # $ is the data passed to Execute: the top dot here
            elif kind == "ident":
                if text in ("true", "false"):
                    operands.append(_Lit(text == "true"))
                elif text == "nil":
                    operands.append(_Lit(None))
                elif text in FUNCS:
                    operands.append(_Call(text, []))
                else:
                    raise TemplateError(f'{self.where}: function "{text}" not defined')
            elif text == "(":
                operands.append(self.pipeline(until_paren=True))


_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.DOTALL)


def _parse(text: str, name: str) -> list[Any]:
    root: list[Any] = []
    stack: list[tuple[_Block, bool]] = []  # (block, in_else)
    out = root
    pos = 0
    pending_trim_left = False
    for m in _ACTION.finditer(text):
        chunk = text[pos : m.start()]
        if pending_trim_left:
            chunk = chunk.lstrip()
        if m.group(1):
            chunk = chunk.rstrip()
        if chunk:
            out.append(_Text(chunk))
        pending_trim_left = bool(m.group(3))
        pos = m.end()
        body = m.group(2).strip()
        line = text.count("\n", 0, m.start()) + 1
        where = f"template {name}:{line}: {{{{{body}}}}}"
        if body.startswith("/*"):
            if not body.endswith("*/"):
                raise TemplateError(f"{where}: unclosed comment")
            continue
        word, _, rest = body.partition(" ")
        word = word.strip()
        rest = rest.strip()
        if word in ("if", "range", "with"):
            if not rest:
                raise TemplateError(f"{where}: missing value for {word}")
            block = _Block(word, _PipeParser(rest, where).pipeline(), where)
            out.append(block)
            stack.append((block, False))
            out = block.body
        elif word == "else":
            if not stack or stack[-1][1]:
                raise TemplateError(f"{where}: unexpected else")
            block, _ = stack.pop()
            if rest.startswith("if ") or rest == "if":
                cond = rest[2:].strip()
                if not cond:
                    raise TemplateError(f"{where}: missing value for if")
                inner = _Block("if", _PipeParser(cond, where).pipeline(), where)
                block.orelse.append(inner)
                stack.append((block, True))  # the chain ends with one {{end}}
                stack.append((inner, False))
                out = inner.body
                # mark: the outer block is closed by the inner's end
                inner.source = where + " (else if)"
            else:
                if rest:
                    raise TemplateError(f"{where}: unexpected {rest!r} after else")
                stack.append((block, True))
                out = block.orelse
        elif word == "end":
            if rest:
                raise TemplateError(f"{where}: unexpected {rest!r} after end")
            if not stack:
                raise TemplateError(f"{where}: unexpected end")
            block, _ = stack.pop()
            while block.source.endswith("(else if)") and stack:
                block, _ = stack.pop()  # close the whole else-if chain
            out = _current(stack, root)
        elif word in ("define", "template", "block", "break", "continue"):
            raise TemplateError(f"{where}: {word} is not supported")
        else:
            out.append(_Action(_PipeParser(body, where).pipeline(), where))
    tail = text[pos:]
    if pending_trim_left:
        tail = tail.lstrip()
    if tail:
        out.append(_Text(tail))
    if stack:
        raise TemplateError(f"template {name}: unexpected EOF: {stack[-1][0].source} has no {{{{end}}}}")
    return root


def _current(stack: list[tuple[_Block, bool]], root: list[Any]) -> list[Any]:
    if not stack:
        return root
    block, in_else = stack[-1]
    return block.orelse if in_else else block.body


# ---------------------------------------------------------------- execution


class Template:
    """A parsed template; `execute(data)` returns the text."""

    def __init__(self, text: str, name: str = "template") -> None:
        self.name = name
        self.nodes = _parse(text, name)

    @property
    def static(self) -> bool:
        """True when the template has no actions: it renders the same text for any data."""
        return all(isinstance(n, _Text) for n in self.nodes)

    def execute(self, data: Any) -> str:
        out: list[str] = []
        self._run(self.nodes, data, data, out)
        return "".join(out)

    def _run(self, nodes: list[Any], dot: Any, top: Any, out: list[str]) -> None:
        for node in nodes:
            if isinstance(node, _Text):
                out.append(node.text)
            elif isinstance(node, _Action):
                out.append(go_value_text(self._pipe(node.pipe, dot, top, node.source)))
            else:
                value = self._pipe(node.pipe, dot, top, node.source)
                if node.kind == "if":
                    self._run(node.body if _truth(value) else node.orelse, dot, top, out)
                elif node.kind == "with":
                    if _truth(value):
                        self._run(node.body, value, top, out)
                    else:
                        self._run(node.orelse, dot, top, out)
                else:
                    items = self._range_items(value, node.source)
                    if not items:
                        self._run(node.orelse, dot, top, out)
                    for item in items:
                        self._run(node.body, item, top, out)

    @staticmethod
    def _range_items(value: Any, where: str) -> list[Any]:
        if value is None:
            return []
        if isinstance(value, bool):
            raise TemplateError(f"{where}: range can't iterate over {go_value_text(value)}")
        if isinstance(value, int):
            return list(range(value))
        if isinstance(value, Mapping):
            return [value[k] for k in sorted(value)]
        if isinstance(value, list | tuple):
            return list(value)
        raise TemplateError(f"{where}: range can't iterate over {go_value_text(value)}")

    def _pipe(self, pipe: _Pipe, dot: Any, top: Any, where: str) -> Any:
        value: Any = _NOTHING
        for cmd in pipe.commands:
            value = self._command(cmd, dot, top, where, value)
        return value

    def _command(self, cmd: list[Any], dot: Any, top: Any, where: str, prev: Any) -> Any:
        head = cmd[0]
        if isinstance(head, _Call):
            args = [self._operand(a, dot, top, where) for a in cmd[1:]]
            if prev is not _NOTHING:
                args.append(prev)
            return self._call(head.name, args, where)
        if len(cmd) > 1 or prev is not _NOTHING:
            raise TemplateError(f"{where}: can't give argument to non-function {_shown(head)}")
        return self._operand(head, dot, top, where)

    def _call(self, name: str, args: list[Any], where: str) -> Any:
        try:
            return FUNCS[name](*args)
        except TemplateError as e:
            raise TemplateError(f"{where}: error calling {name}: {e}") from None
        except TypeError:
            raise TemplateError(f"{where}: wrong number of args for {name}: got {len(args)}") from None

    def _operand(self, op: Any, dot: Any, top: Any, where: str) -> Any:
        if isinstance(op, _Lit):
            return op.value
        if isinstance(op, _Pipe):
            return self._pipe(op, dot, top, where)
        if isinstance(op, _Call):
            return self._call(op.name, [], where)
        value = dot
        for part in op.path:
            if isinstance(value, Mapping):
                value = value.get(part, _NO_VALUE) if part in value else _NO_VALUE
                if value is _NO_VALUE:
                    return "<no value>"  # Go prints a missing map key so (missingkey=default)
            else:
                raise TemplateError(f"{where}: can't evaluate field {part} in type {type(value).__name__}")
        return value


_NOTHING = object()
_NO_VALUE = object()


def _shown(op: Any) -> str:
    if isinstance(op, _Field):
        return "." + ".".join(op.path)
    if isinstance(op, _Lit):
        return go_value_text(op.value)
    return "(...)"


def render(text: str, data: Mapping[str, Any], name: str = "template") -> str:
    """Parse and execute `text` with `data` (the dot)."""
    return Template(text, name).execute(data)
