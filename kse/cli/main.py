"""The `kse` command: one entry point, one subcommand per component.

Two kinds of subcommand:
* commands owned by `kse` itself (certs, etcd, apply/get/delete, bench, up) live in `kse/cli/*_cmd.py`,
  each exposing `register(subparsers)`;
* component processes (apiserver, scheduler, nodesim, workload, chaos) own their flags in their own
  package. They are reached by module *name* and imported only when run, so `kse` never imports
  another package's internals (DESIGN.md: kse may import only proto and certs), and `kse --help`
  stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence

# Modules under kse.cli that register their own subcommands.
OWN_COMMAND_MODULES: tuple[str, ...] = (
    "kse.cli.certs_cmd",
    "kse.cli.etcd_cmd",
    "kse.cli.resources_cmd",
    "kse.cli.bench_cmd",
    "kse.cli.whatif_cmd",
    "kse.cli.up_cmd",
    "kse.cli.datadir_cmd",
    "kse.cli.etcd_member_cmd",
)

# Component processes: subcommand -> (module with `main(argv) -> int`, one-line help).
COMPONENTS: dict[str, tuple[str, str]] = {
    "apiserver": ("apiserver_mock.cli", "run the gRPC API server over etcd"),
    "scheduler": ("scheduler.cli", "run a kube-scheduler replica"),
    "nodesim": ("nodesim.cli", "run simulated kubelets"),
    "workload": ("nodesim.workload_cli", "create pods at a rate"),
    "chaos": ("chaos.cli", "fault injection scenarios"),
    # A probe docker runs every few seconds: dispatched like a component so it imports nothing else.
    "health": ("kse.cli.health_cmd", "probe the API server (gRPC health over mTLS) or an HTTP /healthz"),
}


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kse", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMPONENTS.items():
        if _available(module):
            sub.add_parser(name, help=help_text, add_help=False)
    for module in OWN_COMMAND_MODULES:
        if _available(module):
            importlib.import_module(module).register(sub)
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
    if args_list and args_list[0] in COMPONENTS and _available(COMPONENTS[args_list[0]][0]):
        component = importlib.import_module(COMPONENTS[args_list[0]][0])
        return int(component.main(args_list[1:]) or 0)
    parser = build_parser()
    args = parser.parse_args(args_list)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    return int(func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
