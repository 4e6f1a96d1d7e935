"""A load-generator child process: `python -m harness.bench.loadproc SPEC READY GO RESULT`.

SPEC is a pickle of ("module:function", args) naming a load function of `harness.bench.common`'s shape.
The child runs it; when the function calls its start gate, the child writes READY and waits until GO
exists, so every load process starts at the same moment. The LoadResult is pickled to RESULT.
Files are the whole protocol, so the parent can start this with the ordinary process launcher.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import pickle
import sys
import time
from pathlib import Path

GO_POLL = 0.001
GO_TIMEOUT = 300.0


def _wait_for(path: Path) -> None:
    """Wait for the parent's go; give up if the parent died (we were re-parented) or never says go."""
    parent = os.getppid()
    deadline = time.monotonic() + GO_TIMEOUT
    while not path.exists():
        if os.getppid() != parent or time.monotonic() > deadline:
            raise SystemExit(f"no go from the parent (pid {parent}); giving up")
        time.sleep(GO_POLL)


def main(argv: list[str]) -> int:
    spec, ready, go, result = (Path(a) for a in argv)
    target, args = pickle.loads(spec.read_bytes())
    module, _, name = target.partition(":")
    fn = getattr(importlib.import_module(module), name)

    async def gate() -> None:
        tmp = ready.with_name(ready.name + ".tmp")
        tmp.write_text(str(os.getpid()))
        os.replace(tmp, ready)
        await asyncio.to_thread(_wait_for, go)

    started = time.monotonic()
    outcome = asyncio.run(fn(args, gate))
    tmp = result.with_name(result.name + ".tmp")
    tmp.write_bytes(pickle.dumps(outcome))
    os.replace(tmp, result)
    print(f"load done in {time.monotonic() - started:.1f} s: {outcome.ok} ok, {outcome.failed} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
