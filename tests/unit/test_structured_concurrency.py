"""No orphan tasks (DESIGN.md, "Style"): every task in production code has an owner.

An AST walk over the production packages finds every `create_task(...)` / `ensure_future(...)` call
and accepts it only when its receiver is an `asyncio.TaskGroup`, known from the code itself:

* a name bound by `async with asyncio.TaskGroup() as tg` in the same function or an enclosing one;
* a parameter annotated as a TaskGroup (`tg: asyncio.TaskGroup`);
* `self.<attr>` where the class annotates that attribute as a TaskGroup
  (`self._tg: asyncio.TaskGroup | None = None`).

Everything else (`asyncio.create_task`, `asyncio.ensure_future`, `loop.create_task`, ...) must go
through `kse.tasks` (`TaskSet.spawn`, `background`), the one module allowed to create tasks, or be
listed in ALLOWED below with the reason its task still has an owner. Keep that list empty or
justified line by line.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PACKAGES = ("apiserver_mock", "scheduler", "kse", "nodesim", "chaos", "certs", "harness", "cli")
PACKAGES += ("controllers",)

# The helper itself: the one module whose job is to create owned tasks.
HELPER = "kse/tasks.py"

# (module path, enclosing function's qualified name) -> why its task still has an owner.
ALLOWED: dict[tuple[str, str], str] = {
    # certs/ may import nothing of ours (DESIGN.md's Layout table), so not kse.tasks: the renewer
    # owns its single task, started in __aenter__, cancelled and awaited in aclose() (__aexit__),
    # and a crash is raised from aclose().
    ("certs/rotation.py", "CertRenewer.__aenter__"): "single owned task, certs imports nothing of ours",
}

_SPAWNERS = {"create_task", "ensure_future"}


@dataclass(frozen=True)
class Site:
    path: str
    function: str
    line: int
    text: str

    def allowed(self) -> bool:
        return (self.path, self.function) in ALLOWED or (self.path, "*") in ALLOWED


def _spawner_name(func: ast.Attribute | ast.Name) -> str | None:
    name = func.attr if isinstance(func, ast.Attribute) else func.id
    return name if name in _SPAWNERS else None


def _is_taskgroup(node: ast.expr | None) -> bool:
    """An expression that names or builds a TaskGroup (`asyncio.TaskGroup()`, `TaskGroup | None`)."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):  # a string annotation
        return isinstance(node.value, str) and "TaskGroup" in node.value
    return any(
        (isinstance(n, ast.Name) and n.id == "TaskGroup")
        or (isinstance(n, ast.Attribute) and n.attr == "TaskGroup")
        for n in ast.walk(node)
    )


class _Finder(ast.NodeVisitor):
    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.sites: list[Site] = []
        self._scopes: list[set[str]] = [set()]  # TaskGroup names visible per function scope
        self._names: list[str] = []
        # `self.<attr>` annotated as a TaskGroup anywhere in the module (one pass, not per class).
        self._attrs = {
            sub.target.attr
            for sub in ast.walk(tree)
            if isinstance(sub, ast.AnnAssign)
            and isinstance(sub.target, ast.Attribute)
            and isinstance(sub.target.value, ast.Name)
            and sub.target.value.id == "self"
            and _is_taskgroup(sub.annotation)
        }

    # -- scopes
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._names.append(node.name)
        self.generic_visit(node)
        self._names.pop()

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        names = set(self._scopes[-1])  # a nested function sees its enclosing TaskGroups
        args = node.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if _is_taskgroup(arg.annotation):
                names.add(arg.arg)
        self._scopes.append(names)
        self._names.append(node.name)
        self.generic_visit(node)
        self._names.pop()
        self._scopes.pop()

    def visit_AsyncWith(self, node: ast.AsyncWith) -> None:
        for item in node.items:  # bound before the body that uses it
            if _is_taskgroup(item.context_expr) and isinstance(item.optional_vars, ast.Name):
                self._scopes[-1].add(item.optional_vars.id)
        self.generic_visit(node)

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    # -- calls, and the spawners used any other way (aliased, passed along, `asyncio.Task(...)`)
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute | ast.Name) and _spawner_name(func) is not None:
            if not (isinstance(func, ast.Attribute) and self._owned(func.value)):
                self._flag(node)
            for child in (*node.args, *node.keywords):
                self.visit(child)
            if isinstance(func, ast.Attribute):
                self.visit(func.value)
            return
        if isinstance(func, ast.Attribute) and func.attr == "Task" and ast.unparse(func.value) == "asyncio":
            self._flag(node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _SPAWNERS and not self._owned(node.value):
            self._flag(node)  # not called here: an alias such as `spawn = loop.create_task`
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in _SPAWNERS:
            self._flag(node)

    def _flag(self, node: ast.expr) -> None:
        self.sites.append(Site(self.path, ".".join(self._names), node.lineno, ast.unparse(node)[:80]))

    def _owned(self, receiver: ast.expr) -> bool:
        if isinstance(receiver, ast.Name):
            return receiver.id in self._scopes[-1]
        if (
            isinstance(receiver, ast.Attribute)
            and isinstance(receiver.value, ast.Name)
            and receiver.value.id == "self"
        ):
            return receiver.attr in self._attrs
        return False


def _sources() -> Iterator[Path]:
    for package in PACKAGES:
        base = ROOT / package
        if base.is_dir():
            yield from sorted(base.rglob("*.py"))


def find_unowned(paths: Iterator[Path] | list[Path]) -> list[Site]:
    sites: list[Site] = []
    for path in paths:
        rel = path.relative_to(ROOT).as_posix()
        if rel == HELPER:
            continue
        tree = ast.parse(path.read_text(), filename=rel)
        finder = _Finder(rel, tree)
        finder.visit(tree)
        sites.extend(finder.sites)
    return sites


@functools.cache
def _production_sites() -> tuple[Site, ...]:
    return tuple(find_unowned(list(_sources())))


def test_every_task_has_an_owner() -> None:
    bare = [s for s in _production_sites() if not s.allowed()]
    assert not bare, "tasks without an owner (use a TaskGroup or kse.tasks.TaskSet):\n" + "\n".join(
        f"  {s.path}:{s.line} in {s.function or '<module>'}: {s.text}" for s in bare
    )


def test_allow_list_has_no_stale_entries() -> None:
    """An allow-list line whose call site is gone must go too (the list only shrinks)."""
    used = {(s.path, s.function) for s in _production_sites()}
    used |= {(s.path, "*") for s in _production_sites()}
    stale = [key for key in ALLOWED if key not in used]
    assert not stale, f"allow-list entries with no call site any more: {stale}"


_CASES = {
    "asyncio.create_task": ("async def f():\n    asyncio.create_task(g())", 1),
    "asyncio.ensure_future": ("async def f():\n    asyncio.ensure_future(g())", 1),
    "loop.create_task": ("async def f():\n    asyncio.get_running_loop().create_task(g())", 1),
    "async with TaskGroup": (
        "async def f():\n    async with asyncio.TaskGroup() as tg:\n        tg.create_task(g())",
        0,
    ),
    "TaskGroup parameter": ("async def f(tg: asyncio.TaskGroup):\n    tg.create_task(g())", 0),
    "TaskGroup attribute": (
        "class C:\n"
        "    def __init__(self):\n        self._tg: asyncio.TaskGroup | None = None\n"
        "    def add(self):\n        self._tg.create_task(g())",
        0,
    ),
    "another function's TaskGroup does not count": (
        "async def f():\n    async with asyncio.TaskGroup() as tg:\n        pass\n"
        "async def h(tg):\n    tg.create_task(g())",
        1,
    ),
    "the helper": ("async def f(tasks):\n    tasks.spawn(g())", 0),
    "an alias": ("def f():\n    spawn = asyncio.get_running_loop().create_task\n    spawn(g())", 1),
    "imported by name": ("from asyncio import create_task\nasync def f():\n    create_task(g())", 1),
    "the Task constructor": ("async def f():\n    asyncio.Task(g())", 1),
    "a spawner call inside an owned call's argument": (
        "async def f():\n    async with asyncio.TaskGroup() as tg:\n"
        "        tg.create_task(w(asyncio.ensure_future(g())))",
        1,
    ),
}


@pytest.mark.parametrize("case", list(_CASES))
def test_finder(case: str) -> None:
    source, bare = _CASES[case]
    tree = ast.parse("import asyncio\n" + source + "\n")
    finder = _Finder("probe.py", tree)
    finder.visit(tree)
    assert len(finder.sites) == bare, finder.sites
