"""Go text/template as scheduler_perf's template files use it (kse.schedperf.gotemplate)."""

from __future__ import annotations

import pytest

from kse.schedperf.gotemplate import TemplateError, go_value_text, render


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("node-{{.Index}}", "node-7"),
        ("{{ .Count }}", "10"),
        ("{{AddInt .Index 1}}", "8"),
        ("{{ AddInt .Index 1 2 3 }}", "13"),
        ("{{SubtractInt .Count .Index}}", "3"),
        ("{{MultiplyInt .Index 3}}", "21"),
        ("{{DivideInt .Index 2}}", "3"),  # float division, then truncated as Go's int()
        ("{{DivideInt -7 2}}", "-3"),  # towards zero
        ("{{Mod .Index 3}}", "1"),
        ("{{Mod -7 3}}", "-1"),  # Go's % keeps the dividend's sign
        ("{{DivideFloat .Index 2}}", "3.5"),
        ("{{AddFloat 0.5 0.25}}", "0.75"),
        ("{{MultiplyFloat 1000 1000}}", "1e+06"),  # %v of a float64
        ("{{SubtractFloat 1 0.75}}", "0.25"),
        ('{{AddInt "4" 1}}', "5"),  # toFloat64 parses numeric strings
        ("{{.Index | AddInt 1}}", "8"),  # the pipe's value is the last argument
        ("{{ (AddInt .Index 1) | MultiplyInt 2 }}", "16"),
        ("{{ DivideInt (AddInt .Index 1) 2 }}", "4"),
        ("{{if eq .Index 7}}seven{{else}}other{{end}}", "seven"),
        ("{{if lt .Index 3}}a{{else if lt .Index 8}}b{{else}}c{{end}}", "b"),
        ("{{range 3}}[{{.}}]{{end}}", "[0][1][2]"),
        ("{{range .List}}{{.}},{{end}}", "x,y,"),
        ("{{with .Name}}<{{.}}>{{end}}", "<n>"),
        ("a  {{- .Index -}}  b", "a7b"),
        ("{{/* a comment */}}x", "x"),
        ('{{printf "%05d-%s" .Index "z"}}', "00007-z"),
        ("{{.Missing}}", "<no value>"),
        ("{{len .List}} {{index .List 1}}", "2 y"),
        ("{{and true .Index}} {{or 0 .Name}} {{not 0}}", "7 n true"),
        ('{{`raw`}} {{"q\\n"}}', "raw q\n"),
    ],
)
def test_render(text: str, want: str) -> None:
    data = {"Index": 7, "Count": 10, "List": ["x", "y"], "Name": "n"}
    assert render(text, data) == want


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{{Nope 1}}", 'function "Nope" not defined'),
        ("{{if .Index}}x", "has no {{end}}"),
        ("{{end}}", "unexpected end"),
        ("{{DivideInt 1 0}}", "division by zero"),
        ("{{Mod 1 0}}", "integer divide by zero"),
        ("{{AddInt .Index true}}", "cannot cast true to float64"),
        ("{{.Index.Foo}}", "can't evaluate field Foo"),
        ("{{$x := 1}}", "variables"),
        ("{{ (AddInt 1 }}", "unclosed ("),
        ("{{ .Index 1 }}", "can't give argument to non-function"),
    ],
)
def test_errors_name_the_action(text: str, needle: str) -> None:
    with pytest.raises(TemplateError) as e:
        render(text, {"Index": 1}, name="t.yaml")
    assert needle in str(e.value)
    assert "t.yaml" in str(e.value)


@pytest.mark.parametrize(
    ("value", "want"),
    [(1, "1"), (2.0, "2"), (123456.0, "123456"), (1e6, "1e+06"), (0.0001, "0.0001"), (0.00001, "1e-05"),
     (1.5e-7, "1.5e-07"), (-2.5, "-2.5"), (True, "true"), (None, "<nil>"), ("s", "s")],
)  # fmt: skip
def test_go_value_text(value: object, want: str) -> None:
    assert go_value_text(value) == want
