"""Expanding a profile's (defaulted) ``Plugins`` into the ordered plugins of each extension point.

Upstream does this while building the framework (``pkg/scheduler/framework/runtime/framework.go``:
``updatePluginList``, ``expandMultiPointPlugins``, ``getScoreWeights``); kse does it at config
load time so a bad profile is refused with the rest of the configuration. The rules:

1. Each extension point first gets the plugins listed for it explicitly, in order. A listed
   plugin must exist, must implement the point, and may appear once.
2. Unless the point disables ``'*'``, every multiPoint plugin that implements the point and is
   not disabled there is added. A multiPoint plugin that is also listed explicitly is an
   *override*: the explicit entry wins (its position and weight). A plugin twice in multiPoint
   is an error at the points it implements.
3. Order: the overridden plugins (in their explicit order), then the multiPoint ones (in
   multiPoint order), then the remaining explicit ones (in their order).
4. Score weights: the first entry for the plugin in ``score.enabled`` then ``multiPoint.enabled``;
   unset or 0 reads as 1.
5. Exactly one queueSort plugin; at least one bind plugin.

Which points a plugin implements comes from ``implements`` (plugin -> point names, supplied by
the plugin registry). Point names may be given as JSON names (``preFilter``), Go names
(``PreFilter``) or snake_case (``pre_filter``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .types import (
    EXTENSION_POINTS,
    MULTI_POINT,
    ConfigError,
    ExpandedPlugins,
    PluginRef,
    Plugins,
    duplicate,
    invalid,
    required,
)

Implements = Mapping[str, Collection[str]]


def normalize_point(name: str) -> str:
    """Any spelling of an extension point -> its JSON name (``PreFilter`` -> ``preFilter``)."""
    key = name.replace("_", "").replace("-", "").lower()
    for point in (*EXTENSION_POINTS, MULTI_POINT):
        if point.lower() == key:
            return point
    raise ValueError(f"unknown extension point {name!r}")


def implemented_points(implements: Implements) -> dict[str, frozenset[str]]:
    """``implements`` with point names normalized; unknown point names are ignored (a registry
    may list points kse's config does not have, e.g. upstream's ``EnqueueExtensions``)."""
    out: dict[str, frozenset[str]] = {}
    for plugin, points in implements.items():
        norm = set()
        for p in points:
            try:
                norm.add(normalize_point(p))
            except ValueError:
                continue
        out[plugin] = frozenset(norm)
    return out


def expand_profile(
    plugins: Plugins,
    implements: Implements,
    *,
    known_plugins: Collection[str] | None = None,
    scheduler_name: str = "",
) -> ExpandedPlugins:
    """Expand merged ``plugins`` (defaults applied) into per-point plugin lists.

    A plugin exists if it is in ``known_plugins`` (default: the keys of ``implements``).
    Raises ConfigError listing every problem (field-named, relative to the profile).
    """
    impl = implemented_points(implements)
    exists = set(known_plugins) if known_plugins is not None else set(impl)
    errors: list[str] = []
    result = ExpandedPlugins()

    def implements_point(name: str, point: str) -> bool:
        return point in impl.get(name, frozenset())

    multi = plugins.multi_point.enabled
    for point in EXTENSION_POINTS:
        pset = plugins.point(point)
        explicit: list[str] = []
        for i, p in enumerate(pset.enabled):
            path = f"plugins.{point}.enabled[{i}].name"
            if p.name not in exists:
                errors.append(invalid(path, p.name, f'plugin "{p.name}" does not exist'))
            elif not implements_point(p.name, point):
                errors.append(
                    invalid(path, p.name, f'plugin "{p.name}" does not extend the {point} extension point')
                )
            elif p.name in explicit:
                errors.append(duplicate(path, p.name) + f" (already registered at {point})")
            else:
                explicit.append(p.name)
        disabled = {p.name for p in pset.disabled}
        order = list(explicit)
        if "*" not in disabled:
            overrides: list[str] = []
            from_multi: list[str] = []
            for i, p in enumerate(multi):
                if p.name not in exists:
                    path = f"plugins.multiPoint.enabled[{i}].name"
                    errors.append(invalid(path, p.name, f'plugin "{p.name}" does not exist'))
                    continue
                if not implements_point(p.name, point) or p.name in disabled:
                    continue
                if p.name in explicit:
                    overrides.append(p.name)  # the explicit entry wins
                    continue
                if p.name in from_multi:
                    path = f"plugins.multiPoint.enabled[{i}].name"
                    errors.append(duplicate(path, p.name) + f" (already registered at {point})")
                    continue
                from_multi.append(p.name)
            # framework.go: overrides (explicit order), then multiPoint, then the other explicit.
            order = (
                [n for n in explicit if n in overrides]
                + from_multi
                + [n for n in explicit if n not in overrides]
            )
        result.point(point).extend(PluginRef(n) for n in order)

    # Deduplicate "does not exist" errors reported once per extension point for multiPoint.
    errors = list(dict.fromkeys(errors))

    weights: dict[str, int] = {}
    for p in [*plugins.score.enabled, *multi]:  # getScoreWeights: explicit score entries first
        if p.name not in weights and implements_point(p.name, "score"):
            weights[p.name] = p.weight or 1
    result.score = [PluginRef(r.name, weights.get(r.name, 1)) for r in result.score]

    who = f" for profile with scheduler name {scheduler_name!r}" if scheduler_name else ""
    if not errors and len(result.queue_sort) != 1:
        errors.append(
            f"plugins.queueSort: Invalid value: {len(result.queue_sort)}: "
            f"only one queue sort plugin required{who}, but got {len(result.queue_sort)}"
        )
    if not errors and not result.bind:
        errors.append(required("plugins.bind", f"at least one bind plugin is needed{who}"))
    if errors:
        raise ConfigError(errors)
    return result


__all__ = ["Implements", "expand_profile", "implemented_points", "normalize_point"]
