"""The `kse` command: one entry point, one subcommand per component.

Two kinds of subcommand:
* commands owned by the CLI (certs, etcd, apply/get/delete, bench, what-if, up, ...) live in
  `cli/*_cmd.py`, each exposing `register(subparsers)`;
* component processes (apiserver, scheduler, nodesim, workload, chaos) own their flags in their own
  package and are run through their `main(argv)`.

The CLI is the top of the layer table (DESIGN.md): it imports what it dispatches to, with ordinary
imports; a component's module is imported inside the function that runs it, only when that
subcommand is chosen, so `kse --help` and a health probe stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType


def own_commands() -> tuple[ModuleType, ...]:
    """The commands owned by the CLI, each with `register(subparsers)`. Imported only to build the
    full parser: a component subcommand (a health probe every few seconds) never pays for them."""
    from cli import (
        bench_cmd,
        certs_cmd,
        datadir_cmd,
        drain_cmd,
        etcd_cmd,
        etcd_member_cmd,
        fuzz_cmd,
        kubeconfig_cmd,
        resources_cmd,
        up_cmd,
        whatif_cmd,
    )

    return (
        certs_cmd, etcd_cmd, resources_cmd, bench_cmd, whatif_cmd, up_cmd, datadir_cmd, etcd_member_cmd,
        kubeconfig_cmd, drain_cmd, fuzz_cmd,
    )  # fmt: skip


def _apiserver() -> ModuleType:
    import apiserver_mock.cli

    return apiserver_mock.cli


def _scheduler() -> ModuleType:
    import scheduler.cli

    return scheduler.cli


def _controller_manager() -> ModuleType:
    import controllers.manager

    return controllers.manager


def _nodesim() -> ModuleType:
    import nodesim.cli

    return nodesim.cli


def _workload() -> ModuleType:
    import nodesim.workload_cli

    return nodesim.workload_cli


def _chaos() -> ModuleType:
    import chaos.cli

    return chaos.cli


def _extender_sample() -> ModuleType:
    import scheduler.extender.sample

    return scheduler.extender.sample


def _health() -> ModuleType:
    import cli.health_cmd

    return cli.health_cmd


@dataclass(frozen=True)
class Component:
    """A subcommand that is a process of its own: `module()` imports the module whose
    `main(argv) -> int` (and `build_parser()`) it runs."""

    module: Callable[[], ModuleType]
    help: str


COMPONENTS: dict[str, Component] = {
    "apiserver": Component(_apiserver, "run the gRPC API server over etcd"),
    "scheduler": Component(_scheduler, "run a kube-scheduler replica"),
    "controller-manager": Component(_controller_manager, "run a kube-controller-manager replica"),
    "nodesim": Component(_nodesim, "run simulated kubelets"),
    "workload": Component(_workload, "create pods at a rate"),
    "chaos": Component(_chaos, "fault injection scenarios"),
    "extender-sample": Component(
        _extender_sample, "run a sample scheduler extender (filter/prioritize/bind)"
    ),
    # A probe docker runs every few seconds: dispatched like a component so it imports nothing else.
    "health": Component(_health, "probe the API server (gRPC health over mTLS) or an HTTP /healthz"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kse", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, component in COMPONENTS.items():
        sub.add_parser(name, help=component.help, add_help=False)
    for command in own_commands():
        command.register(sub)
    return parser


def _take_global_config(args: list[str]) -> list[str]:
    """Accept `kse --config PATH COMMAND ...` as kubectl accepts a leading `--kubeconfig`.

    The connection file is resolved through KSE_CONFIG by every command, so a leading flag only
    needs to set it.
    """
    if len(args) >= 2 and args[0] == "--config":
        os.environ["KSE_CONFIG"] = args[1]
        return args[2:]
    if args and args[0].startswith("--config="):
        os.environ["KSE_CONFIG"] = args[0].split("=", 1)[1]
        return args[1:]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args_list = _take_global_config(list(sys.argv[1:] if argv is None else argv))
    if args_list and args_list[0] in COMPONENTS:
        return int(COMPONENTS[args_list[0]].module().main(args_list[1:]) or 0)
    parser = build_parser()
    args = parser.parse_args(args_list)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    return int(func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
