"""Exec a command that the kernel kills when its parent dies: `python die_with_parent.py PID -- ARGV`.

The launcher starts a child through this instead of a `preexec_fn`: a `preexec_fn` runs Python in
the forked copy of a multi-threaded parent (gRPC's threads among them), which Python documents as
unsafe, and which here made children abort (SIGABRT, nothing logged) in gRPC's fork handlers. This
runs in a fresh interpreter instead: it asks for `PR_SET_PDEATHSIG` SIGKILL, which survives the
exec, checks that the parent it was started by (PID) is still its parent (if that parent died first,
nobody would signal us), and then becomes ARGV. Standard library only, run with `-I -S`, so the
extra start costs a bare interpreter and nothing else. Linux only: the launcher never uses it
elsewhere.
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # linux/prctl.h
EXIT_CANNOT_EXEC = 127  # as a shell says "command not found"


def main(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        print("usage: die_with_parent.py PARENT_PID -- ARGV...", file=sys.stderr)
        return 2
    parent, argv = int(args[0]), args[2:]
    libc = ctypes.CDLL(None, use_errno=True)  # the interpreter's own libc; no library search
    if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        print(f"die_with_parent: prctl failed: {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return EXIT_CANNOT_EXEC
    if os.getppid() != parent:  # the parent died before the prctl: nobody will signal us
        return 1
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"die_with_parent: cannot exec {argv[0]}: {e}", file=sys.stderr)
    return EXIT_CANNOT_EXEC


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
