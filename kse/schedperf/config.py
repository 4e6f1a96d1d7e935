"""scheduler_perf's config file: the test cases, their workloads, and the ops of the template.

The format is upstream's (test/integration/scheduler_perf/scheduler_perf.go: testCase, Workload;
operations.go: the ops), read as upstream's decoder reads it (`kse.schedperf.decode`): a YAML list
of test cases

    - name: SchedulingBasic
      defaultPodTemplatePath: templates/pod-default.yaml
      workloadTemplate:
      - opcode: createNodes
        countParam: $initNodes
      - opcode: createPods
        countParam: $measurePods
        collectMetrics: true
      workloads:
      - name: 500Nodes
        labels: [performance]
        threshold: 100
        featureGates: {SchedulerQueueingHints: true}
        params: {initNodes: 500, measurePods: 1000}

`load_config(path)` parses and validates as upstream's getTestCases + validateTestCases do (unique
names, at least one workload and one op, some op collecting metrics; each op's isValid with
parameters allowed). `Workload.ops(case)` is upstream's unrollWorkloadTemplate + patchParams: every
`$param` resolved from the workload's params (`countParam`, `durationParam`, `steadyStateParam`,
`templateParams` values), `createPodSets` unrolled into one createPods per namespace, and the
params never used reported as an error, as upstream does after the run.

Template paths are resolved relative to the directory of the config file, so upstream's config
tree (which writes `../templates/pod-default.yaml`) works as it is laid out.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kse.schedperf.decode import (
    ConfigError,
    Converter,
    fields,
    optional,
    to_any_map,
    to_bool,
    to_bool_map,
    to_duration,
    to_float,
    to_int,
    to_str,
    to_str_list,
    to_str_map,
)

__all__ = [
    "OPCODES",
    "ConfigError",
    "Op",
    "TestCase",
    "Workload",
    "load_config",
    "parse_config",
]

# ---------------------------------------------------------------- ops


@dataclass
class Op:
    """One op of a workload template: its opcode, its index in the template, and its fields by Go
    name (defaults filled in). Parameterised fields keep their `$name` until `patch`."""

    opcode: str
    index: int
    f: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.f[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.f.get(name, default)


def _path(base: Path) -> Converter:
    def conv(value: Any, where: str) -> str:
        text = to_str(value, where)
        return str((base / text).resolve()) if text and not Path(text).is_absolute() else text

    return conv


def _path_list(base: Path) -> Converter:
    one = _path(base)

    def conv(value: Any, where: str) -> list[str]:
        return [one(v, f"{where}[{i}]") for i, v in enumerate(to_str_list(value, where))]

    return conv


def _strategy_label(value: Any, where: str) -> dict[str, Any]:
    # test/utils LabelNodePrepareStrategy{LabelKey, LabelValues}: values assigned round-robin
    got = fields(value, {"LabelKey": to_str, "LabelValues": to_str_list}, where)
    if not got.get("LabelKey"):
        raise ConfigError(f"{where}: labelKey must be set")
    if not got.get("LabelValues"):
        raise ConfigError(f"{where}: labelValues must not be empty")
    return got


def _strategy_unique(value: Any, where: str) -> dict[str, Any]:
    # test/utils UniqueNodeLabelStrategy{LabelKey}: a unique value per node
    got = fields(value, {"LabelKey": to_str}, where)
    if not got.get("LabelKey"):
        raise ConfigError(f"{where}: labelKey must be set")
    return got


def _strategy_allocatable(value: Any, where: str) -> dict[str, Any]:
    # test/utils NodeAllocatableStrategy{NodeAllocatable, CsiNodeAllocatable, MigratedPlugins}
    return fields(
        value,
        {"NodeAllocatable": to_str_map, "CsiNodeAllocatable": to_any_map, "MigratedPlugins": to_str_list},
        where,
    )


def _param_str(value: Any, where: str) -> str:
    text = to_str(value, where)
    if text and not text.startswith("$"):
        raise ConfigError(f'{where}: a parameter reference must start with "$", got {text!r}')
    return text


def _create_pods_spec(base: Path) -> dict[str, Converter]:
    return {
        "Opcode": to_str,
        "Count": to_int,
        "CountParam": _param_str,
        "CountMultiplierParam": _param_str,
        "SteadyState": to_bool,
        "SteadyStateParam": _param_str,
        "Duration": to_duration,
        "DurationParam": _param_str,
        "CollectMetrics": to_bool,
        "Namespace": optional(to_str),
        "PodTemplatePath": optional(_path(base)),
        "SkipWaitToCompletion": to_bool,
        "PersistentVolumeTemplatePath": optional(_path(base)),
        "PersistentVolumeClaimTemplatePath": optional(_path(base)),
        "TemplateParams": to_any_map,
        "SignatureBatchSize": to_int,
        "SignatureBatchSizeParam": _param_str,
    }


def _op_specs(base: Path) -> dict[str, dict[str, Converter]]:
    create_pods = _create_pods_spec(base)

    def nested_create_pods(value: Any, where: str) -> dict[str, Any]:
        got = fields(value, create_pods, where)
        opcode = got.get("Opcode", "")
        if opcode and opcode != "createPods":
            raise ConfigError(f'{where}: opcode must be "createPods", got {opcode!r}')
        return got

    return {
        "createNodes": {
            "Opcode": to_str,
            "Count": to_int,
            "CountParam": _param_str,
            "NodeTemplatePath": optional(_path(base)),
            "NodeAllocatableStrategy": optional(_strategy_allocatable),
            "LabelNodePrepareStrategy": optional(_strategy_label),
            "UniqueNodeLabelStrategy": optional(_strategy_unique),
            "TemplateParams": to_any_map,
        },
        "createNamespaces": {
            "Opcode": to_str,
            "Prefix": to_str,
            "Count": to_int,
            "CountParam": _param_str,
            "NamespaceTemplatePath": optional(_path(base)),
        },
        "createPods": create_pods,
        "createPodSets": {
            "Opcode": to_str,
            "Count": to_int,
            "CountParam": _param_str,
            "NamespacePrefix": to_str,
            "CreatePodsOp": nested_create_pods,
        },
        "createAny": {
            "Opcode": to_str,
            "Namespace": to_str,
            "TemplatePath": _path(base),
            "Count": optional(to_int),
            "CountParam": _param_str,
            "TemplateParams": to_any_map,
        },
        "createPodGroups": {
            "Opcode": to_str,
            "Namespace": to_str,
            "TemplatePath": _path(base),
            "Count": to_int,
            "CountParam": _param_str,
            "TemplateParams": to_any_map,
        },
        "deletePods": {
            "Opcode": to_str,
            "Namespace": to_str,
            "LabelSelector": to_str_map,
            "SkipWaitToCompletion": to_bool,
            "DeletePodsPerSecond": to_int,
        },
        "churn": {
            "Opcode": to_str,
            "Mode": to_str,
            "Number": to_int,
            "IntervalMilliseconds": to_int,
            "Namespace": optional(to_str),
            "TemplatePaths": _path_list(base),
        },
        "barrier": {
            "Opcode": to_str,
            "Namespaces": to_str_list,
            "LabelSelector": to_str_map,
            "StageRequirement": to_str,
        },
        "sleep": {"Opcode": to_str, "Duration": to_duration, "DurationParam": _param_str},
        "startCollectingMetrics": {
            "Opcode": to_str,
            "Name": to_str,
            "Namespaces": to_str_list,
            "LabelSelector": to_str_map,
        },
        "stopCollectingMetrics": {"Opcode": to_str},
    }


# upstream opcodes kse does not run, and why (refused by name, never as "unknown")
UNSUPPORTED_OPCODES = {
    "allocResourceClaims": "dynamic resource allocation is not modelled by kse",
    "createResourceClaims": "dynamic resource allocation is not modelled by kse",
    "createResourceDriver": "dynamic resource allocation is not modelled by kse",
    "updateAny": "not implemented by kse's scheduler_perf runner",
    "startCollectingProfile": "profiles are kse's own (--profile), not ops",
    "stopCollectingProfile": "profiles are kse's own (--profile), not ops",
    "waitForPodGroups": "pod groups (gang scheduling) do not exist in kse yet",
}

OPCODES = (
    "createNodes", "createNamespaces", "createPods", "createPodSets", "createAny", "createPodGroups",
    "deletePods", "churn", "barrier", "sleep", "startCollectingMetrics", "stopCollectingMetrics",
)  # fmt: skip

_DEFAULTS: dict[str, dict[str, Any]] = {
    "createPods": {"Count": 0, "CountParam": "", "CountMultiplierParam": "", "SteadyState": False,
                   "SteadyStateParam": "", "Duration": 0.0, "DurationParam": "", "CollectMetrics": False,
                   "Namespace": None, "PodTemplatePath": None, "SkipWaitToCompletion": False,
                   "PersistentVolumeTemplatePath": None, "PersistentVolumeClaimTemplatePath": None,
                   "TemplateParams": {}, "SignatureBatchSize": 0, "SignatureBatchSizeParam": ""},
    "createNodes": {"Count": 0, "CountParam": "", "NodeTemplatePath": None, "NodeAllocatableStrategy": None,
                    "LabelNodePrepareStrategy": None, "UniqueNodeLabelStrategy": None, "TemplateParams": {}},
    "createNamespaces": {"Prefix": "", "Count": 0, "CountParam": "", "NamespaceTemplatePath": None},
    "createPodSets": {"Count": 0, "CountParam": "", "NamespacePrefix": "", "CreatePodsOp": {}},
    "createAny": {"Namespace": "", "TemplatePath": "", "Count": None, "CountParam": "", "TemplateParams": {}},
    "createPodGroups": {"Namespace": "", "TemplatePath": "", "Count": 0, "CountParam": "",
                        "TemplateParams": {}},
    "deletePods": {"Namespace": "", "LabelSelector": {}, "SkipWaitToCompletion": False,
                   "DeletePodsPerSecond": 0},
    "churn": {"Mode": "", "Number": 0, "IntervalMilliseconds": 0, "Namespace": None, "TemplatePaths": []},
    "barrier": {"Namespaces": [], "LabelSelector": {}, "StageRequirement": ""},
    "sleep": {"Duration": 0.0, "DurationParam": ""},
    "startCollectingMetrics": {"Name": "", "Namespaces": [], "LabelSelector": {}},
    "stopCollectingMetrics": {},
}  # fmt: skip


def _valid_count(
    f: Mapping[str, Any], allow_param: bool, count: str = "Count", param: str = "CountParam"
) -> bool:
    # upstream isValidCount: with a parameter allowed and given, it must be "$..."; else count >= 0
    if not allow_param or not f.get(param):
        return bool(f.get(count, 0) is None or f.get(count, 0) >= 0)
    return str(f[param]).startswith("$")


def _check_op(opcode: str, f: Mapping[str, Any], allow_param: bool, where: str) -> None:
    """Each op's isValid (operations.go), with the same messages."""

    def bad(msg: str) -> None:
        raise ConfigError(f"{where}: {msg}")

    if opcode in ("createNodes", "createNamespaces", "createPodSets", "createPodGroups"):
        if not _valid_count(f, allow_param):
            bad(f"invalid Count={f.get('Count')} / CountParam={f.get('CountParam')!r}")
    if opcode == "createPodSets":
        _check_op(
            "createPods",
            _with_defaults("createPods", f["CreatePodsOp"]),
            allow_param,
            f"{where}.createPodsOp",
        )
    if opcode == "createPods":
        if not _valid_count(f, allow_param, "SignatureBatchSize", "SignatureBatchSizeParam"):
            bad(f"invalid SignatureBatchSize={f['SignatureBatchSize']}")
        if not _valid_count(f, allow_param):
            bad(f"invalid Count={f['Count']} / CountParam={f['CountParam']!r}")
        if f["CollectMetrics"] and f["SkipWaitToCompletion"]:
            bad("collectMetrics and skipWaitToCompletion cannot be true at the same time")
        if f["SkipWaitToCompletion"] and f["SteadyState"]:
            bad("skipWaitToCompletion and steadyState cannot be true at the same time")
        if f["SteadyState"] and not allow_param and f["Duration"] <= 0:
            bad("when creating pods in a steady state, the test duration must be > 0")
    elif opcode in ("createAny", "createPodGroups"):
        if not f["TemplatePath"]:
            bad("TemplatePath must be set")
    elif opcode == "deletePods":
        if f["DeletePodsPerSecond"] < 0:
            bad(f"invalid DeletePodsPerSecond={f['DeletePodsPerSecond']}; should be non-negative")
    elif opcode == "churn":
        if f["Mode"] not in ("recreate", "create"):
            bad(f"invalid mode: {f['Mode']!r}. must be one of [recreate create]")
        if f["Number"] < 0:
            bad(f"number ({f['Number']}) cannot be negative")
        if f["Mode"] == "recreate" and f["Number"] == 0:
            bad("number cannot be 0 when mode is recreate")
        if not f["TemplatePaths"]:
            bad("at least one template spec file needs to be specified")
    elif opcode == "barrier":
        if f["StageRequirement"] not in ("", "Scheduled", "Attempted"):
            bad(f"invalid StageRequirement {f['StageRequirement']}")
    elif opcode == "startCollectingMetrics":
        if not f["Namespaces"]:
            bad("namespaces cannot be empty")


def _with_defaults(opcode: str, got: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(_DEFAULTS[opcode])
    out.update(got)
    out["Opcode"] = opcode
    return out


def parse_op(raw: Any, index: int, base: Path, where: str) -> Op:
    """One op as upstream's op.UnmarshalJSON: the opcode decoded leniently first, then the whole
    op strictly into that opcode's struct, then isValid(allowParameterization=true)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: an op must be a mapping with an opcode")
    opcode = next((v for k, v in raw.items() if isinstance(k, str) and k.lower() == "opcode"), None)
    if opcode in UNSUPPORTED_OPCODES:
        raise ConfigError(f"{where}: opcode {opcode!r} is not supported: {UNSUPPORTED_OPCODES[opcode]}")
    specs = _op_specs(base)
    if not isinstance(opcode, str) or opcode not in specs:
        raise ConfigError(f"{where}: unknown opcode {opcode!r} (known: {', '.join(OPCODES)})")
    f = _with_defaults(opcode, fields(raw, specs[opcode], f"{where} ({opcode})"))
    if opcode == "createPodSets":
        f["CreatePodsOp"] = _with_defaults("createPods", f["CreatePodsOp"])
    _check_op(opcode, f, True, f"{where} ({opcode})")
    return Op(opcode, index, f)


# ---------------------------------------------------------------- params


class Params:
    """A workload's params, remembering which were used (upstream params.isUsed)."""

    def __init__(self, values: Mapping[str, Any], where: str) -> None:
        self.values = dict(values)
        self.used: set[str] = set()
        self.where = where

    def _get(self, ref: str) -> Any:
        key = ref[1:]
        self.used.add(key)
        if key not in self.values:
            raise ConfigError(f"{self.where}: parameter {key} is undefined")
        return self.values[key]

    def get_int(self, ref: str) -> int:
        value = self._get(ref)
        # JSON numbers are float64 in Go; getParam[float64] then int() truncates
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{self.where}: parameter {ref[1:]} has the wrong type {_go_type(value)}")
        return int(value)

    def get_str(self, ref: str) -> str:
        value = self._get(ref)
        if not isinstance(value, str):
            raise ConfigError(f"{self.where}: parameter {ref[1:]} has the wrong type {_go_type(value)}")
        return value

    def get_bool(self, ref: str) -> bool:
        value = self._get(ref)
        if not isinstance(value, bool):
            raise ConfigError(f"{self.where}: parameter {ref[1:]} has the wrong type {_go_type(value)}")
        return value

    def resolve_template_params(self, tp: Mapping[str, Any]) -> dict[str, Any]:
        """upstream resolveTemplateParams: a string value "$name" becomes that param's value."""
        out = dict(tp)
        for k, v in tp.items():
            if isinstance(v, str) and v.startswith("$"):
                key = v[1:]
                if key not in self.values:
                    raise ConfigError(f"{self.where}: parameter {key!r} not found")
                self.used.add(key)
                out[k] = self.values[key]
        return out

    def unused(self) -> list[str]:
        return sorted(set(self.values) - self.used)


def _go_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, Mapping):
        return "map[string]interface {}"
    return "<nil>"


def patch(op: Op, params: Params) -> Op:
    """upstream patchParams: a copy of `op` with its `$params` substituted, validated without
    parameters (isValid(false))."""
    f = copy.deepcopy(op.f)
    if f.get("CountParam"):
        f["Count"] = params.get_int(f["CountParam"])
    if op.opcode == "createPods":
        _patch_create_pods(f, params)
    if op.opcode in ("createNodes", "createAny", "createPodGroups", "createPods") and f.get("TemplateParams"):
        f["TemplateParams"] = params.resolve_template_params(f["TemplateParams"])
    if op.opcode == "sleep" and f.get("DurationParam"):
        f["Duration"] = _duration_param(params, f["DurationParam"])
    if op.opcode == "barrier" and not f["StageRequirement"]:
        f["StageRequirement"] = "Scheduled"
    where = f"{params.where}: op {op.index} ({op.opcode})"
    allow = op.opcode == "createPodSets"  # upstream validates the set's inner op with params allowed
    _check_op(op.opcode, f, allow, where)
    return Op(op.opcode, op.index, f)


def _patch_create_pods(f: dict[str, Any], params: Params) -> None:
    if f.get("CountMultiplierParam"):
        f["Count"] *= params.get_int(f["CountMultiplierParam"])
    if f.get("SignatureBatchSizeParam"):
        f["SignatureBatchSize"] = params.get_int(f["SignatureBatchSizeParam"])
    if f.get("SignatureBatchSize", 0) == 0:
        f["SignatureBatchSize"] = 1
    if f.get("DurationParam"):
        f["Duration"] = _duration_param(params, f["DurationParam"])
    if f.get("SteadyStateParam"):
        f["SteadyState"] = params.get_bool(f["SteadyStateParam"])


def _duration_param(params: Params, ref: str) -> float:
    text = params.get_str(ref)
    try:
        return to_duration(text, f"parameter {ref[1:]}")
    except ConfigError as e:
        raise ConfigError(f"{params.where}: parsing duration parameter {ref}: {e}") from None


# ---------------------------------------------------------------- test cases


def _threshold(value: Any, where: str) -> dict[str, Any]:
    """upstream thresholds.UnmarshalJSON: a number, or a map of topic name -> number."""
    if isinstance(value, Mapping):
        return {
            "value": 0.0,
            "by_topic": {to_str(k, f"{where} key"): to_float(v, f"{where}.{k}") for k, v in value.items()},
        }
    return {"value": to_float(value, where), "by_topic": {}}


def _selector(value: Any, where: str) -> dict[str, Any]:
    got = fields(
        value,
        {"Name": to_str, "Labels": to_str_map, "DataBucket": to_str, "ExpectLower": to_bool},
        where,
    )
    return {"Name": "", "Labels": {}, "DataBucket": "", "ExpectLower": False, **got}


@dataclass
class Workload:
    name: str
    params: dict[str, Any] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    threshold: float = 0.0
    threshold_by_topic: dict[str, float] = field(default_factory=dict)
    threshold_metric: dict[str, Any] | None = None
    feature_gates: dict[str, bool] = field(default_factory=dict)

    def ops(self, case: TestCase) -> tuple[list[Op], Params]:
        """The unrolled, patched ops of `case` for this workload, and the params tracker (whose
        `unused()` upstream reports as an error once the workload ran)."""
        params = Params(self.params, f"{case.name}/{self.name}")
        out: list[Op] = []
        for op in case.workload_template:
            if op.opcode == "createPodSets":
                patched = patch(op, params)
                inner = patched["CreatePodsOp"]
                for i in range(patched["Count"]):
                    f = copy.deepcopy(inner)
                    f["Namespace"] = f"{patched['NamespacePrefix']}-{i}"
                    out.append(Op("createPods", op.index, f))
            else:
                out.append(op)  # patched below, once (as upstream's unroll keeps the original op)
        # op indices are positions in the unrolled list, as upstream's runWorkload numbers them
        final = [patch(Op(o.opcode, i, o.f), params) for i, o in enumerate(out)]
        return final, params


@dataclass
class TestCase:
    name: str
    workload_template: list[Op]
    workloads: list[Workload]
    feature_gates: dict[str, bool] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)
    default_pod_template_path: str | None = None
    scheduler_config_path: str | None = None
    metrics_collector_config: dict[str, Any] | None = None
    default_threshold_metric: dict[str, Any] | None = None

    def collects_metrics(self) -> bool:
        for op in self.workload_template:
            if op.opcode == "createPods" and op["CollectMetrics"]:
                return True
            if op.opcode == "createPodSets" and op["CreatePodsOp"]["CollectMetrics"]:
                return True
            if op.opcode == "stopCollectingMetrics":
                return True
        return False


def _workload(raw: Any, where: str) -> Workload:
    got = fields(
        raw,
        {
            "Name": to_str,
            "Params": to_any_map,
            "Labels": to_str_list,
            "Threshold": _threshold,
            "ThresholdMetricSelector": optional(_selector),
            "FeatureGates": to_bool_map,
        },
        where,
    )
    th = got.get("Threshold", {"value": 0.0, "by_topic": {}})
    w = Workload(
        name=got.get("Name", ""),
        params=got.get("Params", {}),
        labels=got.get("Labels", []),
        threshold=th["value"],
        threshold_by_topic=th["by_topic"],
        threshold_metric=got.get("ThresholdMetricSelector"),
        feature_gates=got.get("FeatureGates", {}),
    )
    if w.threshold < 0:
        raise ConfigError(f"{where}: invalid Threshold={w.threshold}; should be non-negative")
    for topic, v in w.threshold_by_topic.items():
        if v < 0:
            raise ConfigError(f"{where}: invalid Threshold={v} for topic {topic!r}; should be non-negative")
    return w


def _test_case(raw: Any, index: int, base: Path) -> TestCase:
    name = raw.get("name") if isinstance(raw, Mapping) else None
    where = f"test case {index} ({name})" if isinstance(name, str) else f"test case {index}"

    def ops(value: Any, w: str) -> list[Op]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ConfigError(f"{w}: want a list of ops")
        return [parse_op(item, i, base, f"{where}: workloadTemplate op {i}") for i, item in enumerate(value)]

    def workloads(value: Any, w: str) -> list[Workload]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ConfigError(f"{w}: want a list of workloads")
        return [_workload(item, f"{where}: workload {i}") for i, item in enumerate(value)]

    got = fields(
        raw,
        {
            "Name": to_str,
            "FeatureGates": to_bool_map,
            "MetricsCollectorConfig": optional(to_any_map),
            "WorkloadTemplate": ops,
            "Workloads": workloads,
            "SchedulerConfigPath": optional(_path(base)),
            "DefaultPodTemplatePath": optional(_path(base)),
            "Labels": to_str_list,
            "DefaultThresholdMetricSelector": optional(_selector),
        },
        where,
    )
    tc = TestCase(
        name=got.get("Name", ""),
        workload_template=got.get("WorkloadTemplate", []),
        workloads=got.get("Workloads", []),
        feature_gates=got.get("FeatureGates", {}),
        labels=got.get("Labels", []),
        default_pod_template_path=got.get("DefaultPodTemplatePath"),
        scheduler_config_path=got.get("SchedulerConfigPath"),
        metrics_collector_config=got.get("MetricsCollectorConfig"),
        default_threshold_metric=got.get("DefaultThresholdMetricSelector"),
    )
    for w in tc.workloads:  # upstream Workload.setDefaults
        if w.threshold_metric is None:
            w.threshold_metric = tc.default_threshold_metric or {
                "Name": "SchedulingThroughput", "Labels": {}, "DataBucket": "Average", "ExpectLower": False,
            }  # fmt: skip
        if not w.threshold_metric["DataBucket"]:
            raise ConfigError(
                f"{tc.name}/{w.name}: dataBucket should be set for metric {w.threshold_metric['Name']}"
            )
    return tc


def parse_config(text: str, base: Path, source: str = "<config>") -> list[TestCase]:
    """Test cases from config text; template paths resolve against `base`."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML: {e}") from None
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise ConfigError(f"{source}: want a list of test cases, got a {type(raw).__name__}")
    cases = [_test_case(item, i, base) for i, item in enumerate(raw)]
    _validate(cases, source)
    return cases


def _validate(cases: list[TestCase], source: str) -> None:
    """upstream validateTestCases."""
    if not cases:
        raise ConfigError(f"{source}: no test cases defined")
    seen: set[str] = set()
    for tc in cases:
        if tc.name in seen:
            raise ConfigError(f"{source}: {tc.name}: name is not unique")
        seen.add(tc.name)
        if not tc.workloads:
            raise ConfigError(f"{source}: {tc.name}: no workloads defined")
        names: set[str] = set()
        for w in tc.workloads:
            if w.name in names:
                raise ConfigError(f"{source}: {tc.name}: workload name {w.name} is not unique")
            names.add(w.name)
        if not tc.workload_template:
            raise ConfigError(f"{source}: {tc.name}: no ops defined")
        if not tc.collects_metrics():
            raise ConfigError(f"{source}: {tc.name}: no op in the workload template collects metrics")


def load_config(path: str | Path) -> list[TestCase]:
    """Test cases of a config file (template paths relative to the file's directory)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    return parse_config(text, p.resolve().parent, str(path))


def label_selected(filters: list[str], labels: list[str]) -> bool:
    """upstream `enabled(labelSelectors, labels...)`: every filter without a prefix or with "+"
    must be among the labels, every "-" filter must not."""
    have = set(labels)
    for f in filters:
        f = f.strip()
        if not f:
            continue
        if f.startswith("-"):
            if f[1:] in have:
                return False
        elif f.lstrip("+") not in have:
            return False
    return True


def select(
    cases: list[TestCase], patterns: list[str], label_filter: str | None = None
) -> list[tuple[TestCase, Workload]]:
    """The (test case, workload) pairs to run: those named TEST/WORKLOAD in `patterns` (TEST alone
    selects all of its workloads), else all, then filtered by `label_filter` (upstream's
    comma-separated label filter) when given. An unknown name is an error."""
    pairs = [(tc, w) for tc in cases for w in tc.workloads]
    if patterns:
        chosen: list[tuple[TestCase, Workload]] = []
        for pat in patterns:
            hits = [(tc, w) for tc, w in pairs if f"{tc.name}/{w.name}" == pat or tc.name == pat]
            if not hits:
                known = ", ".join(f"{tc.name}/{w.name}" for tc, w in pairs)
                raise ConfigError(f"--workload {pat!r}: no such TEST/WORKLOAD (known: {known})")
            chosen.extend(h for h in hits if h not in chosen)
        pairs = chosen
    if label_filter:
        filters = label_filter.split(",")
        pairs = [(tc, w) for tc, w in pairs if label_selected(filters, tc.labels + w.labels)]
    return pairs
