"""`--controllers`: which controllers run, with kube-controller-manager's rules
(`cmd/kube-controller-manager/app/options` and `IsControllerEnabled`).

The flag is a comma list: `*` enables every controller that is on by default, `name` enables
one, `-name` disables one. For each controller the first entry that names it decides; otherwise
`*` (if present) enables it unless it is off by default. Unknown names are refused.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence


class ControllerSelectionError(ValueError):
    pass


def parse_controllers(text: str) -> list[str]:
    """The entries of a --controllers value (spaces around commas ignored, empty ones dropped)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def is_enabled(name: str, entries: Sequence[str], disabled_by_default: Collection[str] = ()) -> bool:
    has_star = False
    for entry in entries:
        if entry == name:
            return True
        if entry == f"-{name}":
            return False
        if entry == "*":
            has_star = True
    return has_star and name not in disabled_by_default


def select_controllers(
    entries: Sequence[str], known: Iterable[str], disabled_by_default: Collection[str] = ()
) -> list[str]:
    """The enabled controllers, in `known`'s order; ControllerSelectionError for an unknown name."""
    names = list(known)
    for entry in entries:
        bare = entry[1:] if entry.startswith("-") else entry
        if bare != "*" and bare not in names:
            raise ControllerSelectionError(
                f"--controllers: {bare!r} is not in the list of known controllers ({', '.join(names)})"
            )
    return [n for n in names if is_enabled(n, entries, disabled_by_default)]
