"""The layer table of DESIGN.md, enforced: a package imports only the packages its row allows.

Every import counts, wherever it stands (module top, inside a function, under TYPE_CHECKING) and
however it is spelled (`import x`, `from x import y`, `importlib.import_module("x")` with a literal
name), because a lazy import is still a dependency: it only moves the failure to run time.

The table (an arrow is "may import"; `tests/` may import everything and is not checked):

    proto           nothing of ours
    certs           nothing of ours
    kse             proto, certs          (the library every process shares)
    apiserver_mock  proto, certs, kse     (never kse.client: the server is not its own client)
    scheduler       proto, kse
    controllers     proto, kse
    nodesim         proto, kse
    harness         proto, certs, kse     (starts components as processes, never imports them)
    chaos           proto, certs, kse, harness
    cli             everything            (nothing imports it)

A package's `__main__.py` is a program entry, not a module anything imports: `kse/__main__.py` runs
the CLI so that `python -m kse` works, and is the one place allowed to reach the top.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

OURS = ("proto", "certs", "kse", "apiserver_mock", "scheduler", "controllers", "nodesim", "harness", "chaos")
OURS += ("cli",)

MAY_IMPORT: dict[str, frozenset[str]] = {
    "proto": frozenset(),
    "certs": frozenset(),
    "kse": frozenset({"proto", "certs"}),
    "apiserver_mock": frozenset({"proto", "certs", "kse"}),
    "scheduler": frozenset({"proto", "kse"}),
    "controllers": frozenset({"proto", "kse"}),
    "nodesim": frozenset({"proto", "kse"}),
    "harness": frozenset({"proto", "certs", "kse"}),
    "chaos": frozenset({"proto", "certs", "kse", "harness"}),
    "cli": frozenset(OURS),
}

# Sub-packages a row may not use although it may use their package.
FORBIDDEN_MODULES: dict[str, tuple[str, ...]] = {
    "apiserver_mock": ("kse.client",),
}

# Program entries (nothing imports them): module path -> what it may import beyond its row.
ENTRY_POINTS: dict[str, frozenset[str]] = {
    "kse/__main__.py": frozenset({"cli"}),
}


def _package_files(package: str) -> list[Path]:
    base = ROOT / package
    return sorted(p for p in base.rglob("*.py") if "_pb2" not in p.name) if base.is_dir() else []


def imported_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import in `tree`, including import_module("...")."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                yield node.lineno, node.module
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if (
                name in ("import_module", "__import__")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                yield node.lineno, node.args[0].value


def violations_in(package: str, rel: str, source: str) -> list[str]:
    """What one file of `package` imports against the table."""
    allowed = MAY_IMPORT[package] | {package} | ENTRY_POINTS.get(rel, frozenset())
    found = []
    for line, module in imported_modules(ast.parse(source, filename=rel)):
        top = module.split(".")[0]
        if top not in OURS:
            continue
        if top not in allowed:
            rule = sorted(MAY_IMPORT[package])
            found.append(f"{rel}:{line} imports {module} ({package} may import {rule})")
            continue
        for banned in FORBIDDEN_MODULES.get(package, ()):
            if module == banned or module.startswith(banned + "."):
                found.append(f"{rel}:{line} imports {module} ({package} must not use {banned})")
    return found


def violations(package: str) -> list[str]:
    found = []
    for path in _package_files(package):
        rel = path.relative_to(ROOT).as_posix()
        found += violations_in(package, rel, path.read_text(encoding="utf-8"))
    return found


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_package_imports_only_what_its_row_allows(package: str) -> None:
    assert violations(package) == []


def test_every_top_level_package_has_a_row() -> None:
    """A new top-level package must be placed in the table before it can be used."""
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages <= set(MAY_IMPORT), f"packages missing from the layer table: {packages - set(MAY_IMPORT)}"


def test_the_check_catches_every_spelling_of_an_upward_import() -> None:
    """The guard proven to fail: each way of importing upward from the library is caught."""
    source = (
        "import chaos.nemesis\n"
        "from harness.up import Cluster\n"
        "def f():\n"
        "    from scheduler import cli\n"
        "    import importlib\n"
        "    importlib.import_module('apiserver_mock.server')\n"
        "from kse.objects import meta\n"
        "import grpc\n"
    )
    found = violations_in("kse", "kse/example.py", source)
    assert sorted(v.split(" imports ")[1].split(" ")[0] for v in found) == [
        "apiserver_mock.server",
        "chaos.nemesis",
        "harness.up",
        "scheduler",
    ]
    assert violations_in("apiserver_mock", "apiserver_mock/x.py", "from kse.client import clientset\n")
    assert violations_in("kse", "kse/__main__.py", "from cli.main import main\n") == []
    assert violations_in("kse", "kse/other.py", "from cli.main import main\n")
