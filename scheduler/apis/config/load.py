"""Loading a KubeSchedulerConfiguration file: YAML -> strict decode -> defaults -> validation ->
profile expansion.

Decoding is strict, as kube-scheduler's (``sigs.k8s.io/json`` strict mode): a field the v1 API
does not define, a field given twice, or a value of the wrong type is an error naming the field.
Case matters (``schedulername`` is not ``schedulerName``). Plugin args are decoded into their
``<Name>Args`` type for the plugins that have one; ``apiVersion``/``kind`` inside args are
accepted and must match.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from kse.durations import parse_go_duration
from kse.valuekinds import value_kind

from .defaults import set_defaults
from .profile import Implements, expand_profile
from .types import (
    API_VERSION,
    ARGS_TYPES,
    KIND,
    ConfigError,
    Duration,
    KubeSchedulerConfiguration,
    PluginConfig,
    json_name,
)
from .validation import validate, validate_plugin_sets

_REMOVED_VERSIONS = {
    "kubescheduler.config.k8s.io/v1alpha1": "v1.21",
    "kubescheduler.config.k8s.io/v1alpha2": "v1.22",
    "kubescheduler.config.k8s.io/v1beta1": "v1.23",
    "kubescheduler.config.k8s.io/v1beta2": "v1.28",
    "kubescheduler.config.k8s.io/v1beta3": "v1.29",
}


def load_config(
    path_or_text: str | os.PathLike[str],
    *,
    known_plugins: Collection[str],
    implements: Implements,
) -> KubeSchedulerConfiguration:
    """Read, default, validate and expand a configuration.

    ``path_or_text`` is a path (a ``Path``, or a string naming an existing file) or the YAML
    itself. ``known_plugins`` are the plugins kse's registry provides; ``implements`` maps each
    to the extension points it implements. Raises ConfigError listing every problem.
    """
    text, source = _read(path_or_text)
    data = parse_yaml(text, source)
    errors: list[str] = []
    cfg = decode(data, errors)
    if errors:
        raise ConfigError(errors, source)
    assert cfg is not None

    plugin_errors = [
        validate_plugin_sets(
            f"profiles[{i}].plugins", p.plugins, known_plugins=known_plugins, implements=implements
        )
        for i, p in enumerate(cfg.profiles)
    ]
    errors += [e for errs in plugin_errors for e in errs]
    set_defaults(cfg, known_plugins)
    errors += validate(cfg, known_plugins=known_plugins)
    queue_sorts: dict[int, str] = {}
    for i, profile in enumerate(cfg.profiles):
        if i < len(plugin_errors) and plugin_errors[i]:
            continue  # its plugins were already refused; expansion would repeat that
        assert profile.plugins is not None
        try:
            profile.expanded = expand_profile(
                profile.plugins,
                implements,
                known_plugins=known_plugins,
                scheduler_name=profile.scheduler_name or "",
            )
        except ConfigError as e:
            errors += [f"profiles[{i}].{line}" for line in e.errors]
            continue
        queue_sorts[i] = profile.expanded.queue_sort[0].name
    if len(set(queue_sorts.values())) > 1 and not any("queueSort" in e for e in errors):
        first = min(queue_sorts)
        for i, name in queue_sorts.items():
            if name != queue_sorts[first]:
                errors.append(
                    f'profiles[{i}].plugins: Invalid value: "{name}": the queue sort plugin must be the same '
                    f'for all profiles (profiles[{first}] uses "{queue_sorts[first]}")'
                )
    if errors:
        raise ConfigError(errors, source)
    return cfg


def _read(path_or_text: str | os.PathLike[str]) -> tuple[str, str]:
    if isinstance(path_or_text, os.PathLike):
        path = Path(path_or_text)
        return path.read_text(encoding="utf-8"), str(path)
    if "\n" not in path_or_text and path_or_text.strip() and Path(path_or_text).is_file():
        return Path(path_or_text).read_text(encoding="utf-8"), path_or_text
    return path_or_text, "<text>"


# ---------------------------------------------------------------- YAML


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (upstream strict decoding)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
        if key in seen:
            mark = key_node.start_mark
            raise ConfigError([f'line {mark.line + 1}, column {mark.column + 1}: duplicate field "{key}"'])
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, source: str = "<text>") -> Any:
    try:
        docs = [d for d in yaml.load_all(text, Loader=_StrictLoader) if d is not None]
    except ConfigError as e:
        raise ConfigError(e.errors, source) from None
    except yaml.YAMLError as e:
        raise ConfigError([f"invalid YAML: {e}"], source) from None
    if not docs:
        raise ConfigError(["the file holds no KubeSchedulerConfiguration (empty document)"], source)
    if len(docs) > 1:
        raise ConfigError(
            [f"expected one KubeSchedulerConfiguration, found {len(docs)} YAML documents"], source
        )
    return docs[0]


# ---------------------------------------------------------------- strict decoding


def decode(data: Any, errors: list[str]) -> KubeSchedulerConfiguration | None:
    """Strictly decode a parsed document; problems are appended to ``errors``."""
    if not isinstance(data, dict):
        kind_of_data = value_kind(data)
        errors.append(f"the document must be a mapping (a KubeSchedulerConfiguration), not {kind_of_data}")
        return None
    api_version, kind = data.get("apiVersion"), data.get("kind")
    if not api_version:
        errors.append(f'apiVersion: Required value: must be "{API_VERSION}"')
    elif api_version in _REMOVED_VERSIONS:
        errors.append(
            f'apiVersion: Unsupported value: "{api_version}": removed from kube-scheduler in '
            f'{_REMOVED_VERSIONS[api_version]}; kse reads only "{API_VERSION}"'
        )
    elif api_version != API_VERSION:
        errors.append(f'apiVersion: Unsupported value: "{api_version}": supported values: "{API_VERSION}"')
    if not kind:
        errors.append(f'kind: Required value: must be "{KIND}"')
    elif kind != KIND:
        errors.append(f'kind: Unsupported value: "{kind}": supported values: "{KIND}"')
    if errors:
        return None
    cfg = _decode_value(data, KubeSchedulerConfiguration, "", errors)
    if not isinstance(cfg, KubeSchedulerConfiguration):
        return None
    for i, profile in enumerate(cfg.profiles):
        for j, pc in enumerate(profile.plugin_config):
            _decode_args(pc, f"profiles[{i}].pluginConfig[{j}].args", errors)
    return cfg


def _decode_args(pc: PluginConfig, path: str, errors: list[str]) -> None:
    raw = pc.args
    if raw is None:
        return
    if not isinstance(raw, dict):
        errors.append(f"{path}: Invalid value: must be a mapping, not {value_kind(raw)}")
        pc.args = None
        return
    args_type = ARGS_TYPES.get(pc.name)
    if args_type is None:
        pc.args = dict(raw)  # a plugin without an args type gets them as written
        return
    raw = dict(raw)
    want_kind = f"{pc.name}Args"
    kind, api_version = raw.pop("kind", None), raw.pop("apiVersion", None)
    if kind is not None and kind != want_kind:
        errors.append(
            f'{path}.kind: Invalid value: "{kind}": args for plugin {pc.name} must be of kind {want_kind}'
        )
    if api_version is not None and api_version != API_VERSION:
        errors.append(
            f'{path}.apiVersion: Unsupported value: "{api_version}": supported values: "{API_VERSION}"'
        )
    pc.args = _decode_value(raw, args_type, path, errors)


def parse_duration(text: str) -> float:
    """A `metav1.Duration` string in seconds, as Go's time.ParseDuration reads it: "1h2m3.5s",
    "300ms", "0"; a unitless "15" is refused, as upstream refuses it (kse.durations)."""
    return parse_go_duration(text)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _decode_value(value: Any, tp: Any, path: str, errors: list[str]) -> Any:
    """Decode ``value`` as type ``tp`` (a dataclass, list, optional or scalar); problems are
    appended to ``errors`` and the result is then best effort."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _decode_value(value, options[0], path, errors)
    if tp is Any:
        return value
    if origin is list:
        if not isinstance(value, list):
            errors.append(f"{path}: Invalid value: must be a list, not {value_kind(value)}")
            return []
        (item,) = typing.get_args(tp)
        return [_decode_value(v, item, f"{path}[{i}]", errors) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            errors.append(f"{path}: Invalid value: must be a mapping, not {value_kind(value)}")
            return {}
        return dict(value)
    if tp is Duration:
        if not isinstance(value, str):
            errors.append(
                f'{path}: Invalid value: must be a duration string such as "15s", not {value_kind(value)}'
            )
            return None
        try:
            return Duration(parse_duration(value))
        except ValueError:
            errors.append(f'{path}: Invalid value: "{value}": must be a duration such as "15s" or "1m30s"')
            return None
    if tp is bool:
        if not isinstance(value, bool):
            errors.append(f"{path}: Invalid value: must be a boolean, not {value_kind(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{path}: Invalid value: {value!r}: must be an integer")
            return 0
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            errors.append(f"{path}: Invalid value: {value!r}: must be a number")
            return 0.0
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            errors.append(f"{path}: Invalid value: {value!r}: must be a string")
            return ""
        return value
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _decode_dataclass(value, tp, path, errors)
    raise TypeError(f"cannot decode {tp!r}")  # a bug in types.py, not in the file


def _decode_dataclass(value: Any, cls: type[Any], path: str, errors: list[str]) -> Any:
    if not isinstance(value, dict):
        errors.append(f"{path or '<root>'}: Invalid value: must be a mapping, not {value_kind(value)}")
        return cls()
    hints = typing.get_type_hints(cls)
    fields = {json_name(f): f for f in dataclasses.fields(cls) if not f.metadata.get("internal")}
    kwargs: dict[str, Any] = {}
    for key, raw in value.items():
        fpath = _join(path, str(key))
        f = fields.get(key) if isinstance(key, str) else None
        if f is None:
            near = [k for k in fields if k.lower() == str(key).lower()]
            hint = f' (did you mean "{near[0]}"?)' if near else ""
            errors.append(
                f"{fpath}: Unknown field: {cls.__name__} in {API_VERSION} has no field {str(key)!r}{hint}; "
                "strict decoding refuses it"
            )
            continue
        if raw is None:
            continue  # null leaves the default, as JSON null does for a Go pointer
        kwargs[f.name] = _decode_value(raw, hints[f.name], fpath, errors)
    return cls(**kwargs)
