from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OwnerReference(_message.Message):
    __slots__ = ("api_version", "kind", "name", "uid", "controller", "block_owner_deletion")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    BLOCK_OWNER_DELETION_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool
    block_owner_deletion: bool
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., controller: _Optional[bool] = ..., block_owner_deletion: _Optional[bool] = ...) -> None: ...

class ManagedFieldsEntry(_message.Message):
    __slots__ = ("manager", "operation", "api_version", "time", "fields_type", "fields_v1", "subresource")
    MANAGER_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    FIELDS_TYPE_FIELD_NUMBER: _ClassVar[int]
    FIELDS_V1_FIELD_NUMBER: _ClassVar[int]
    SUBRESOURCE_FIELD_NUMBER: _ClassVar[int]
    manager: str
    operation: str
    api_version: str
    time: str
    fields_type: str
    fields_v1: _struct_pb2.Struct
    subresource: str
    def __init__(self, manager: _Optional[str] = ..., operation: _Optional[str] = ..., api_version: _Optional[str] = ..., time: _Optional[str] = ..., fields_type: _Optional[str] = ..., fields_v1: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., subresource: _Optional[str] = ...) -> None: ...

class ObjectMeta(_message.Message):
    __slots__ = ("name", "generate_name", "namespace", "uid", "resource_version", "generation", "creation_timestamp", "deletion_timestamp", "labels", "annotations", "owner_references", "finalizers", "managed_fields", "deletion_grace_period_seconds")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    GENERATE_NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    CREATION_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DELETION_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    OWNER_REFERENCES_FIELD_NUMBER: _ClassVar[int]
    FINALIZERS_FIELD_NUMBER: _ClassVar[int]
    MANAGED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    DELETION_GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    generate_name: str
    namespace: str
    uid: str
    resource_version: str
    generation: int
    creation_timestamp: str
    deletion_timestamp: str
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    owner_references: _containers.RepeatedCompositeFieldContainer[OwnerReference]
    finalizers: _containers.RepeatedScalarFieldContainer[str]
    managed_fields: _containers.RepeatedCompositeFieldContainer[ManagedFieldsEntry]
    deletion_grace_period_seconds: int
    def __init__(self, name: _Optional[str] = ..., generate_name: _Optional[str] = ..., namespace: _Optional[str] = ..., uid: _Optional[str] = ..., resource_version: _Optional[str] = ..., generation: _Optional[int] = ..., creation_timestamp: _Optional[str] = ..., deletion_timestamp: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., owner_references: _Optional[_Iterable[_Union[OwnerReference, _Mapping]]] = ..., finalizers: _Optional[_Iterable[str]] = ..., managed_fields: _Optional[_Iterable[_Union[ManagedFieldsEntry, _Mapping]]] = ..., deletion_grace_period_seconds: _Optional[int] = ...) -> None: ...

class ListMeta(_message.Message):
    __slots__ = ("resource_version", "remaining_item_count")
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTINUE_FIELD_NUMBER: _ClassVar[int]
    REMAINING_ITEM_COUNT_FIELD_NUMBER: _ClassVar[int]
    resource_version: str
    remaining_item_count: int
    def __init__(self, resource_version: _Optional[str] = ..., remaining_item_count: _Optional[int] = ..., **kwargs) -> None: ...

class LabelSelectorRequirement(_message.Message):
    __slots__ = ("key", "operator", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class LabelSelector(_message.Message):
    __slots__ = ("match_labels", "match_expressions")
    class MatchLabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MATCH_LABELS_FIELD_NUMBER: _ClassVar[int]
    MATCH_EXPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    match_labels: _containers.ScalarMap[str, str]
    match_expressions: _containers.RepeatedCompositeFieldContainer[LabelSelectorRequirement]
    def __init__(self, match_labels: _Optional[_Mapping[str, str]] = ..., match_expressions: _Optional[_Iterable[_Union[LabelSelectorRequirement, _Mapping]]] = ...) -> None: ...

class ObjectReference(_message.Message):
    __slots__ = ("kind", "namespace", "name", "uid", "api_version", "resource_version", "field_path")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    FIELD_PATH_FIELD_NUMBER: _ClassVar[int]
    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str
    resource_version: str
    field_path: str
    def __init__(self, kind: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., api_version: _Optional[str] = ..., resource_version: _Optional[str] = ..., field_path: _Optional[str] = ...) -> None: ...

class Condition(_message.Message):
    __slots__ = ("type", "status", "observed_generation", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    observed_generation: int
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., observed_generation: _Optional[int] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ResourceClaim(_message.Message):
    __slots__ = ("name", "request")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    name: str
    request: str
    def __init__(self, name: _Optional[str] = ..., request: _Optional[str] = ...) -> None: ...

class ResourceRequirements(_message.Message):
    __slots__ = ("limits", "requests", "claims")
    class LimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class RequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.ScalarMap[str, str]
    requests: _containers.ScalarMap[str, str]
    claims: _containers.RepeatedCompositeFieldContainer[ResourceClaim]
    def __init__(self, limits: _Optional[_Mapping[str, str]] = ..., requests: _Optional[_Mapping[str, str]] = ..., claims: _Optional[_Iterable[_Union[ResourceClaim, _Mapping]]] = ...) -> None: ...

class ContainerPort(_message.Message):
    __slots__ = ("name", "host_port", "container_port", "protocol", "host_ip")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_PORT_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_PORT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    HOST_IP_FIELD_NUMBER: _ClassVar[int]
    name: str
    host_port: int
    container_port: int
    protocol: str
    host_ip: str
    def __init__(self, name: _Optional[str] = ..., host_port: _Optional[int] = ..., container_port: _Optional[int] = ..., protocol: _Optional[str] = ..., host_ip: _Optional[str] = ...) -> None: ...

class EnvVar(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Container(_message.Message):
    __slots__ = ("name", "image", "command", "args", "ports", "env", "resources", "image_pull_policy", "restart_policy", "volume_mounts")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    IMAGE_PULL_POLICY_FIELD_NUMBER: _ClassVar[int]
    RESTART_POLICY_FIELD_NUMBER: _ClassVar[int]
    VOLUME_MOUNTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    image: str
    command: _containers.RepeatedScalarFieldContainer[str]
    args: _containers.RepeatedScalarFieldContainer[str]
    ports: _containers.RepeatedCompositeFieldContainer[ContainerPort]
    env: _containers.RepeatedCompositeFieldContainer[EnvVar]
    resources: ResourceRequirements
    image_pull_policy: str
    restart_policy: str
    volume_mounts: _containers.RepeatedCompositeFieldContainer[VolumeMount]
    def __init__(self, name: _Optional[str] = ..., image: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., args: _Optional[_Iterable[str]] = ..., ports: _Optional[_Iterable[_Union[ContainerPort, _Mapping]]] = ..., env: _Optional[_Iterable[_Union[EnvVar, _Mapping]]] = ..., resources: _Optional[_Union[ResourceRequirements, _Mapping]] = ..., image_pull_policy: _Optional[str] = ..., restart_policy: _Optional[str] = ..., volume_mounts: _Optional[_Iterable[_Union[VolumeMount, _Mapping]]] = ...) -> None: ...

class VolumeMount(_message.Message):
    __slots__ = ("name", "read_only", "mount_path", "sub_path", "mount_propagation", "sub_path_expr", "recursive_read_only")
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    MOUNT_PATH_FIELD_NUMBER: _ClassVar[int]
    SUB_PATH_FIELD_NUMBER: _ClassVar[int]
    MOUNT_PROPAGATION_FIELD_NUMBER: _ClassVar[int]
    SUB_PATH_EXPR_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    name: str
    read_only: bool
    mount_path: str
    sub_path: str
    mount_propagation: str
    sub_path_expr: str
    recursive_read_only: str
    def __init__(self, name: _Optional[str] = ..., read_only: _Optional[bool] = ..., mount_path: _Optional[str] = ..., sub_path: _Optional[str] = ..., mount_propagation: _Optional[str] = ..., sub_path_expr: _Optional[str] = ..., recursive_read_only: _Optional[str] = ...) -> None: ...

class NodeSelectorRequirement(_message.Message):
    __slots__ = ("key", "operator", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeSelectorTerm(_message.Message):
    __slots__ = ("match_expressions", "match_fields")
    MATCH_EXPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELDS_FIELD_NUMBER: _ClassVar[int]
    match_expressions: _containers.RepeatedCompositeFieldContainer[NodeSelectorRequirement]
    match_fields: _containers.RepeatedCompositeFieldContainer[NodeSelectorRequirement]
    def __init__(self, match_expressions: _Optional[_Iterable[_Union[NodeSelectorRequirement, _Mapping]]] = ..., match_fields: _Optional[_Iterable[_Union[NodeSelectorRequirement, _Mapping]]] = ...) -> None: ...

class NodeSelector(_message.Message):
    __slots__ = ("node_selector_terms",)
    NODE_SELECTOR_TERMS_FIELD_NUMBER: _ClassVar[int]
    node_selector_terms: _containers.RepeatedCompositeFieldContainer[NodeSelectorTerm]
    def __init__(self, node_selector_terms: _Optional[_Iterable[_Union[NodeSelectorTerm, _Mapping]]] = ...) -> None: ...

class PreferredSchedulingTerm(_message.Message):
    __slots__ = ("weight", "preference")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    weight: int
    preference: NodeSelectorTerm
    def __init__(self, weight: _Optional[int] = ..., preference: _Optional[_Union[NodeSelectorTerm, _Mapping]] = ...) -> None: ...

class NodeAffinity(_message.Message):
    __slots__ = ("required_during_scheduling_ignored_during_execution", "preferred_during_scheduling_ignored_during_execution")
    REQUIRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    required_during_scheduling_ignored_during_execution: NodeSelector
    preferred_during_scheduling_ignored_during_execution: _containers.RepeatedCompositeFieldContainer[PreferredSchedulingTerm]
    def __init__(self, required_during_scheduling_ignored_during_execution: _Optional[_Union[NodeSelector, _Mapping]] = ..., preferred_during_scheduling_ignored_during_execution: _Optional[_Iterable[_Union[PreferredSchedulingTerm, _Mapping]]] = ...) -> None: ...

class PodAffinityTerm(_message.Message):
    __slots__ = ("label_selector", "namespaces", "topology_key", "namespace_selector", "match_label_keys", "mismatch_label_keys")
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_KEY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    MATCH_LABEL_KEYS_FIELD_NUMBER: _ClassVar[int]
    MISMATCH_LABEL_KEYS_FIELD_NUMBER: _ClassVar[int]
    label_selector: LabelSelector
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    topology_key: str
    namespace_selector: LabelSelector
    match_label_keys: _containers.RepeatedScalarFieldContainer[str]
    mismatch_label_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, label_selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., namespaces: _Optional[_Iterable[str]] = ..., topology_key: _Optional[str] = ..., namespace_selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., match_label_keys: _Optional[_Iterable[str]] = ..., mismatch_label_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class WeightedPodAffinityTerm(_message.Message):
    __slots__ = ("weight", "pod_affinity_term")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    POD_AFFINITY_TERM_FIELD_NUMBER: _ClassVar[int]
    weight: int
    pod_affinity_term: PodAffinityTerm
    def __init__(self, weight: _Optional[int] = ..., pod_affinity_term: _Optional[_Union[PodAffinityTerm, _Mapping]] = ...) -> None: ...

class PodAffinity(_message.Message):
    __slots__ = ("required_during_scheduling_ignored_during_execution", "preferred_during_scheduling_ignored_during_execution")
    REQUIRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    required_during_scheduling_ignored_during_execution: _containers.RepeatedCompositeFieldContainer[PodAffinityTerm]
    preferred_during_scheduling_ignored_during_execution: _containers.RepeatedCompositeFieldContainer[WeightedPodAffinityTerm]
    def __init__(self, required_during_scheduling_ignored_during_execution: _Optional[_Iterable[_Union[PodAffinityTerm, _Mapping]]] = ..., preferred_during_scheduling_ignored_during_execution: _Optional[_Iterable[_Union[WeightedPodAffinityTerm, _Mapping]]] = ...) -> None: ...

class Affinity(_message.Message):
    __slots__ = ("node_affinity", "pod_affinity", "pod_anti_affinity")
    NODE_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    POD_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    POD_ANTI_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    node_affinity: NodeAffinity
    pod_affinity: PodAffinity
    pod_anti_affinity: PodAffinity
    def __init__(self, node_affinity: _Optional[_Union[NodeAffinity, _Mapping]] = ..., pod_affinity: _Optional[_Union[PodAffinity, _Mapping]] = ..., pod_anti_affinity: _Optional[_Union[PodAffinity, _Mapping]] = ...) -> None: ...

class Toleration(_message.Message):
    __slots__ = ("key", "operator", "value", "effect", "toleration_seconds")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    TOLERATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    value: str
    effect: str
    toleration_seconds: int
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ..., toleration_seconds: _Optional[int] = ...) -> None: ...

class TopologySpreadConstraint(_message.Message):
    __slots__ = ("max_skew", "topology_key", "when_unsatisfiable", "label_selector", "min_domains", "node_affinity_policy", "node_taints_policy", "match_label_keys")
    MAX_SKEW_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_KEY_FIELD_NUMBER: _ClassVar[int]
    WHEN_UNSATISFIABLE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    MIN_DOMAINS_FIELD_NUMBER: _ClassVar[int]
    NODE_AFFINITY_POLICY_FIELD_NUMBER: _ClassVar[int]
    NODE_TAINTS_POLICY_FIELD_NUMBER: _ClassVar[int]
    MATCH_LABEL_KEYS_FIELD_NUMBER: _ClassVar[int]
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str
    match_label_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, max_skew: _Optional[int] = ..., topology_key: _Optional[str] = ..., when_unsatisfiable: _Optional[str] = ..., label_selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., min_domains: _Optional[int] = ..., node_affinity_policy: _Optional[str] = ..., node_taints_policy: _Optional[str] = ..., match_label_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class PodSchedulingGate(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class PersistentVolumeClaimVolumeSource(_message.Message):
    __slots__ = ("claim_name", "read_only")
    CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    claim_name: str
    read_only: bool
    def __init__(self, claim_name: _Optional[str] = ..., read_only: _Optional[bool] = ...) -> None: ...

class PersistentVolumeClaimSpec(_message.Message):
    __slots__ = ("access_modes", "storage_class_name", "resources", "volume_mode", "volume_name", "selector")
    ACCESS_MODES_FIELD_NUMBER: _ClassVar[int]
    STORAGE_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VOLUME_MODE_FIELD_NUMBER: _ClassVar[int]
    VOLUME_NAME_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    access_modes: _containers.RepeatedScalarFieldContainer[str]
    storage_class_name: str
    resources: ResourceRequirements
    volume_mode: str
    volume_name: str
    selector: LabelSelector
    def __init__(self, access_modes: _Optional[_Iterable[str]] = ..., storage_class_name: _Optional[str] = ..., resources: _Optional[_Union[ResourceRequirements, _Mapping]] = ..., volume_mode: _Optional[str] = ..., volume_name: _Optional[str] = ..., selector: _Optional[_Union[LabelSelector, _Mapping]] = ...) -> None: ...

class PersistentVolumeClaimTemplate(_message.Message):
    __slots__ = ("metadata", "spec")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    metadata: ObjectMeta
    spec: PersistentVolumeClaimSpec
    def __init__(self, metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[PersistentVolumeClaimSpec, _Mapping]] = ...) -> None: ...

class EphemeralVolumeSource(_message.Message):
    __slots__ = ("volume_claim_template",)
    VOLUME_CLAIM_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    volume_claim_template: PersistentVolumeClaimTemplate
    def __init__(self, volume_claim_template: _Optional[_Union[PersistentVolumeClaimTemplate, _Mapping]] = ...) -> None: ...

class EmptyDirVolumeSource(_message.Message):
    __slots__ = ("medium", "size_limit")
    MEDIUM_FIELD_NUMBER: _ClassVar[int]
    SIZE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    medium: str
    size_limit: str
    def __init__(self, medium: _Optional[str] = ..., size_limit: _Optional[str] = ...) -> None: ...

class ConfigMapVolumeSource(_message.Message):
    __slots__ = ("name", "default_mode", "optional")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MODE_FIELD_NUMBER: _ClassVar[int]
    OPTIONAL_FIELD_NUMBER: _ClassVar[int]
    name: str
    default_mode: int
    optional: bool
    def __init__(self, name: _Optional[str] = ..., default_mode: _Optional[int] = ..., optional: _Optional[bool] = ...) -> None: ...

class SecretVolumeSource(_message.Message):
    __slots__ = ("secret_name", "default_mode", "optional")
    SECRET_NAME_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MODE_FIELD_NUMBER: _ClassVar[int]
    OPTIONAL_FIELD_NUMBER: _ClassVar[int]
    secret_name: str
    default_mode: int
    optional: bool
    def __init__(self, secret_name: _Optional[str] = ..., default_mode: _Optional[int] = ..., optional: _Optional[bool] = ...) -> None: ...

class HostPathVolumeSource(_message.Message):
    __slots__ = ("path", "type")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    path: str
    type: str
    def __init__(self, path: _Optional[str] = ..., type: _Optional[str] = ...) -> None: ...

class DownwardAPIVolumeSource(_message.Message):
    __slots__ = ("default_mode",)
    DEFAULT_MODE_FIELD_NUMBER: _ClassVar[int]
    default_mode: int
    def __init__(self, default_mode: _Optional[int] = ...) -> None: ...

class ProjectedVolumeSource(_message.Message):
    __slots__ = ("default_mode",)
    DEFAULT_MODE_FIELD_NUMBER: _ClassVar[int]
    default_mode: int
    def __init__(self, default_mode: _Optional[int] = ...) -> None: ...

class CSIVolumeSource(_message.Message):
    __slots__ = ("driver", "read_only", "fs_type", "volume_attributes")
    class VolumeAttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    FS_TYPE_FIELD_NUMBER: _ClassVar[int]
    VOLUME_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    driver: str
    read_only: bool
    fs_type: str
    volume_attributes: _containers.ScalarMap[str, str]
    def __init__(self, driver: _Optional[str] = ..., read_only: _Optional[bool] = ..., fs_type: _Optional[str] = ..., volume_attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class NFSVolumeSource(_message.Message):
    __slots__ = ("server", "path", "read_only")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    server: str
    path: str
    read_only: bool
    def __init__(self, server: _Optional[str] = ..., path: _Optional[str] = ..., read_only: _Optional[bool] = ...) -> None: ...

class GCEPersistentDiskVolumeSource(_message.Message):
    __slots__ = ("pd_name", "fs_type", "partition", "read_only")
    PD_NAME_FIELD_NUMBER: _ClassVar[int]
    FS_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    pd_name: str
    fs_type: str
    partition: int
    read_only: bool
    def __init__(self, pd_name: _Optional[str] = ..., fs_type: _Optional[str] = ..., partition: _Optional[int] = ..., read_only: _Optional[bool] = ...) -> None: ...

class AWSElasticBlockStoreVolumeSource(_message.Message):
    __slots__ = ("volume_id", "fs_type", "partition", "read_only")
    VOLUME_ID_FIELD_NUMBER: _ClassVar[int]
    FS_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    volume_id: str
    fs_type: str
    partition: int
    read_only: bool
    def __init__(self, volume_id: _Optional[str] = ..., fs_type: _Optional[str] = ..., partition: _Optional[int] = ..., read_only: _Optional[bool] = ...) -> None: ...

class RBDVolumeSource(_message.Message):
    __slots__ = ("monitors", "image", "fs_type", "pool", "read_only")
    MONITORS_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    FS_TYPE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    monitors: _containers.RepeatedScalarFieldContainer[str]
    image: str
    fs_type: str
    pool: str
    read_only: bool
    def __init__(self, monitors: _Optional[_Iterable[str]] = ..., image: _Optional[str] = ..., fs_type: _Optional[str] = ..., pool: _Optional[str] = ..., read_only: _Optional[bool] = ...) -> None: ...

class ISCSIVolumeSource(_message.Message):
    __slots__ = ("target_portal", "iqn", "lun", "read_only")
    TARGET_PORTAL_FIELD_NUMBER: _ClassVar[int]
    IQN_FIELD_NUMBER: _ClassVar[int]
    LUN_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    target_portal: str
    iqn: str
    lun: int
    read_only: bool
    def __init__(self, target_portal: _Optional[str] = ..., iqn: _Optional[str] = ..., lun: _Optional[int] = ..., read_only: _Optional[bool] = ...) -> None: ...

class ImageVolumeSource(_message.Message):
    __slots__ = ("reference", "pull_policy")
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    PULL_POLICY_FIELD_NUMBER: _ClassVar[int]
    reference: str
    pull_policy: str
    def __init__(self, reference: _Optional[str] = ..., pull_policy: _Optional[str] = ...) -> None: ...

class Volume(_message.Message):
    __slots__ = ("name", "host_path", "empty_dir", "gce_persistent_disk", "aws_elastic_block_store", "secret", "nfs", "iscsi", "persistent_volume_claim", "rbd", "downward_api", "config_map", "projected", "csi", "ephemeral", "image")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_PATH_FIELD_NUMBER: _ClassVar[int]
    EMPTY_DIR_FIELD_NUMBER: _ClassVar[int]
    GCE_PERSISTENT_DISK_FIELD_NUMBER: _ClassVar[int]
    AWS_ELASTIC_BLOCK_STORE_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    NFS_FIELD_NUMBER: _ClassVar[int]
    ISCSI_FIELD_NUMBER: _ClassVar[int]
    PERSISTENT_VOLUME_CLAIM_FIELD_NUMBER: _ClassVar[int]
    RBD_FIELD_NUMBER: _ClassVar[int]
    DOWNWARD_API_FIELD_NUMBER: _ClassVar[int]
    CONFIG_MAP_FIELD_NUMBER: _ClassVar[int]
    PROJECTED_FIELD_NUMBER: _ClassVar[int]
    CSI_FIELD_NUMBER: _ClassVar[int]
    EPHEMERAL_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    host_path: HostPathVolumeSource
    empty_dir: EmptyDirVolumeSource
    gce_persistent_disk: GCEPersistentDiskVolumeSource
    aws_elastic_block_store: AWSElasticBlockStoreVolumeSource
    secret: SecretVolumeSource
    nfs: NFSVolumeSource
    iscsi: ISCSIVolumeSource
    persistent_volume_claim: PersistentVolumeClaimVolumeSource
    rbd: RBDVolumeSource
    downward_api: DownwardAPIVolumeSource
    config_map: ConfigMapVolumeSource
    projected: ProjectedVolumeSource
    csi: CSIVolumeSource
    ephemeral: EphemeralVolumeSource
    image: ImageVolumeSource
    def __init__(self, name: _Optional[str] = ..., host_path: _Optional[_Union[HostPathVolumeSource, _Mapping]] = ..., empty_dir: _Optional[_Union[EmptyDirVolumeSource, _Mapping]] = ..., gce_persistent_disk: _Optional[_Union[GCEPersistentDiskVolumeSource, _Mapping]] = ..., aws_elastic_block_store: _Optional[_Union[AWSElasticBlockStoreVolumeSource, _Mapping]] = ..., secret: _Optional[_Union[SecretVolumeSource, _Mapping]] = ..., nfs: _Optional[_Union[NFSVolumeSource, _Mapping]] = ..., iscsi: _Optional[_Union[ISCSIVolumeSource, _Mapping]] = ..., persistent_volume_claim: _Optional[_Union[PersistentVolumeClaimVolumeSource, _Mapping]] = ..., rbd: _Optional[_Union[RBDVolumeSource, _Mapping]] = ..., downward_api: _Optional[_Union[DownwardAPIVolumeSource, _Mapping]] = ..., config_map: _Optional[_Union[ConfigMapVolumeSource, _Mapping]] = ..., projected: _Optional[_Union[ProjectedVolumeSource, _Mapping]] = ..., csi: _Optional[_Union[CSIVolumeSource, _Mapping]] = ..., ephemeral: _Optional[_Union[EphemeralVolumeSource, _Mapping]] = ..., image: _Optional[_Union[ImageVolumeSource, _Mapping]] = ...) -> None: ...

class PodResourceClaim(_message.Message):
    __slots__ = ("name", "resource_claim_name", "resource_claim_template_name")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIM_TEMPLATE_NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    resource_claim_name: str
    resource_claim_template_name: str
    def __init__(self, name: _Optional[str] = ..., resource_claim_name: _Optional[str] = ..., resource_claim_template_name: _Optional[str] = ...) -> None: ...

class PodSpec(_message.Message):
    __slots__ = ("containers", "init_containers", "node_selector", "node_name", "affinity", "tolerations", "topology_spread_constraints", "scheduler_name", "priority", "priority_class_name", "preemption_policy", "overhead", "scheduling_gates", "restart_policy", "host_network", "termination_grace_period_seconds", "resources", "service_account_name", "volumes", "resource_claims")
    class NodeSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class OverheadEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    INIT_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    AFFINITY_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_SPREAD_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULER_NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    OVERHEAD_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_GATES_FIELD_NUMBER: _ClassVar[int]
    RESTART_POLICY_FIELD_NUMBER: _ClassVar[int]
    HOST_NETWORK_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ACCOUNT_NAME_FIELD_NUMBER: _ClassVar[int]
    VOLUMES_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    containers: _containers.RepeatedCompositeFieldContainer[Container]
    init_containers: _containers.RepeatedCompositeFieldContainer[Container]
    node_selector: _containers.ScalarMap[str, str]
    node_name: str
    affinity: Affinity
    tolerations: _containers.RepeatedCompositeFieldContainer[Toleration]
    topology_spread_constraints: _containers.RepeatedCompositeFieldContainer[TopologySpreadConstraint]
    scheduler_name: str
    priority: int
    priority_class_name: str
    preemption_policy: str
    overhead: _containers.ScalarMap[str, str]
    scheduling_gates: _containers.RepeatedCompositeFieldContainer[PodSchedulingGate]
    restart_policy: str
    host_network: bool
    termination_grace_period_seconds: int
    resources: ResourceRequirements
    service_account_name: str
    volumes: _containers.RepeatedCompositeFieldContainer[Volume]
    resource_claims: _containers.RepeatedCompositeFieldContainer[PodResourceClaim]
    def __init__(self, containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., init_containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., node_name: _Optional[str] = ..., affinity: _Optional[_Union[Affinity, _Mapping]] = ..., tolerations: _Optional[_Iterable[_Union[Toleration, _Mapping]]] = ..., topology_spread_constraints: _Optional[_Iterable[_Union[TopologySpreadConstraint, _Mapping]]] = ..., scheduler_name: _Optional[str] = ..., priority: _Optional[int] = ..., priority_class_name: _Optional[str] = ..., preemption_policy: _Optional[str] = ..., overhead: _Optional[_Mapping[str, str]] = ..., scheduling_gates: _Optional[_Iterable[_Union[PodSchedulingGate, _Mapping]]] = ..., restart_policy: _Optional[str] = ..., host_network: _Optional[bool] = ..., termination_grace_period_seconds: _Optional[int] = ..., resources: _Optional[_Union[ResourceRequirements, _Mapping]] = ..., service_account_name: _Optional[str] = ..., volumes: _Optional[_Iterable[_Union[Volume, _Mapping]]] = ..., resource_claims: _Optional[_Iterable[_Union[PodResourceClaim, _Mapping]]] = ...) -> None: ...

class PodCondition(_message.Message):
    __slots__ = ("type", "status", "last_probe_time", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_PROBE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    last_probe_time: str
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., last_probe_time: _Optional[str] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ContainerStatus(_message.Message):
    __slots__ = ("name", "image", "ready", "restart_count", "started")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    RESTART_COUNT_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    name: str
    image: str
    ready: bool
    restart_count: int
    started: bool
    def __init__(self, name: _Optional[str] = ..., image: _Optional[str] = ..., ready: _Optional[bool] = ..., restart_count: _Optional[int] = ..., started: _Optional[bool] = ...) -> None: ...

class PodStatus(_message.Message):
    __slots__ = ("phase", "conditions", "message", "reason", "nominated_node_name", "host_ip", "pod_ip", "start_time", "qos_class", "container_statuses")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    NOMINATED_NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_IP_FIELD_NUMBER: _ClassVar[int]
    POD_IP_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    QOS_CLASS_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_STATUSES_FIELD_NUMBER: _ClassVar[int]
    phase: str
    conditions: _containers.RepeatedCompositeFieldContainer[PodCondition]
    message: str
    reason: str
    nominated_node_name: str
    host_ip: str
    pod_ip: str
    start_time: str
    qos_class: str
    container_statuses: _containers.RepeatedCompositeFieldContainer[ContainerStatus]
    def __init__(self, phase: _Optional[str] = ..., conditions: _Optional[_Iterable[_Union[PodCondition, _Mapping]]] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., nominated_node_name: _Optional[str] = ..., host_ip: _Optional[str] = ..., pod_ip: _Optional[str] = ..., start_time: _Optional[str] = ..., qos_class: _Optional[str] = ..., container_statuses: _Optional[_Iterable[_Union[ContainerStatus, _Mapping]]] = ...) -> None: ...

class Pod(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[PodSpec, _Mapping]] = ..., status: _Optional[_Union[PodStatus, _Mapping]] = ...) -> None: ...

class PodTemplateSpec(_message.Message):
    __slots__ = ("metadata", "spec")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    metadata: ObjectMeta
    spec: PodSpec
    def __init__(self, metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[PodSpec, _Mapping]] = ...) -> None: ...

class Binding(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "target")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    target: ObjectReference
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., target: _Optional[_Union[ObjectReference, _Mapping]] = ...) -> None: ...

class Taint(_message.Message):
    __slots__ = ("key", "value", "effect", "time_added")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    TIME_ADDED_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: str
    time_added: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ..., time_added: _Optional[str] = ...) -> None: ...

class NodeSpec(_message.Message):
    __slots__ = ("pod_cidr", "provider_id", "unschedulable", "taints")
    POD_CIDR_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_ID_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    pod_cidr: str
    provider_id: str
    unschedulable: bool
    taints: _containers.RepeatedCompositeFieldContainer[Taint]
    def __init__(self, pod_cidr: _Optional[str] = ..., provider_id: _Optional[str] = ..., unschedulable: _Optional[bool] = ..., taints: _Optional[_Iterable[_Union[Taint, _Mapping]]] = ...) -> None: ...

class NodeCondition(_message.Message):
    __slots__ = ("type", "status", "last_heartbeat_time", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    last_heartbeat_time: str
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., last_heartbeat_time: _Optional[str] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class NodeAddress(_message.Message):
    __slots__ = ("type", "address")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    type: str
    address: str
    def __init__(self, type: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class ContainerImage(_message.Message):
    __slots__ = ("names", "size_bytes")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    size_bytes: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., size_bytes: _Optional[int] = ...) -> None: ...

class NodeSystemInfo(_message.Message):
    __slots__ = ("machine_id", "kernel_version", "os_image", "container_runtime_version", "kubelet_version", "operating_system", "architecture")
    MACHINE_ID_FIELD_NUMBER: _ClassVar[int]
    KERNEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    OS_IMAGE_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_RUNTIME_VERSION_FIELD_NUMBER: _ClassVar[int]
    KUBELET_VERSION_FIELD_NUMBER: _ClassVar[int]
    OPERATING_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    ARCHITECTURE_FIELD_NUMBER: _ClassVar[int]
    machine_id: str
    kernel_version: str
    os_image: str
    container_runtime_version: str
    kubelet_version: str
    operating_system: str
    architecture: str
    def __init__(self, machine_id: _Optional[str] = ..., kernel_version: _Optional[str] = ..., os_image: _Optional[str] = ..., container_runtime_version: _Optional[str] = ..., kubelet_version: _Optional[str] = ..., operating_system: _Optional[str] = ..., architecture: _Optional[str] = ...) -> None: ...

class NodeStatus(_message.Message):
    __slots__ = ("capacity", "allocatable", "phase", "conditions", "addresses", "images", "node_info")
    class CapacityEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AllocatableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ALLOCATABLE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    NODE_INFO_FIELD_NUMBER: _ClassVar[int]
    capacity: _containers.ScalarMap[str, str]
    allocatable: _containers.ScalarMap[str, str]
    phase: str
    conditions: _containers.RepeatedCompositeFieldContainer[NodeCondition]
    addresses: _containers.RepeatedCompositeFieldContainer[NodeAddress]
    images: _containers.RepeatedCompositeFieldContainer[ContainerImage]
    node_info: NodeSystemInfo
    def __init__(self, capacity: _Optional[_Mapping[str, str]] = ..., allocatable: _Optional[_Mapping[str, str]] = ..., phase: _Optional[str] = ..., conditions: _Optional[_Iterable[_Union[NodeCondition, _Mapping]]] = ..., addresses: _Optional[_Iterable[_Union[NodeAddress, _Mapping]]] = ..., images: _Optional[_Iterable[_Union[ContainerImage, _Mapping]]] = ..., node_info: _Optional[_Union[NodeSystemInfo, _Mapping]] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: NodeSpec
    status: NodeStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[NodeSpec, _Mapping]] = ..., status: _Optional[_Union[NodeStatus, _Mapping]] = ...) -> None: ...

class LeaseSpec(_message.Message):
    __slots__ = ("holder_identity", "lease_duration_seconds", "acquire_time", "renew_time", "lease_transitions", "strategy", "preferred_holder")
    HOLDER_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    LEASE_DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ACQUIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    RENEW_TIME_FIELD_NUMBER: _ClassVar[int]
    LEASE_TRANSITIONS_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_HOLDER_FIELD_NUMBER: _ClassVar[int]
    holder_identity: str
    lease_duration_seconds: int
    acquire_time: str
    renew_time: str
    lease_transitions: int
    strategy: str
    preferred_holder: str
    def __init__(self, holder_identity: _Optional[str] = ..., lease_duration_seconds: _Optional[int] = ..., acquire_time: _Optional[str] = ..., renew_time: _Optional[str] = ..., lease_transitions: _Optional[int] = ..., strategy: _Optional[str] = ..., preferred_holder: _Optional[str] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: LeaseSpec
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[LeaseSpec, _Mapping]] = ...) -> None: ...

class EventSource(_message.Message):
    __slots__ = ("component", "host")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    component: str
    host: str
    def __init__(self, component: _Optional[str] = ..., host: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "involved_object", "reason", "message", "source", "first_timestamp", "last_timestamp", "count", "type", "event_time", "action", "reporting_component", "reporting_instance")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    INVOLVED_OBJECT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    FIRST_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LAST_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REPORTING_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    REPORTING_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    involved_object: ObjectReference
    reason: str
    message: str
    source: EventSource
    first_timestamp: str
    last_timestamp: str
    count: int
    type: str
    event_time: str
    action: str
    reporting_component: str
    reporting_instance: str
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., involved_object: _Optional[_Union[ObjectReference, _Mapping]] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., source: _Optional[_Union[EventSource, _Mapping]] = ..., first_timestamp: _Optional[str] = ..., last_timestamp: _Optional[str] = ..., count: _Optional[int] = ..., type: _Optional[str] = ..., event_time: _Optional[str] = ..., action: _Optional[str] = ..., reporting_component: _Optional[str] = ..., reporting_instance: _Optional[str] = ...) -> None: ...

class PriorityClass(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "value", "global_default", "description", "preemption_policy")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    value: int
    global_default: bool
    description: str
    preemption_policy: str
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., value: _Optional[int] = ..., global_default: _Optional[bool] = ..., description: _Optional[str] = ..., preemption_policy: _Optional[str] = ...) -> None: ...

class NamespaceSpec(_message.Message):
    __slots__ = ("finalizers",)
    FINALIZERS_FIELD_NUMBER: _ClassVar[int]
    finalizers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, finalizers: _Optional[_Iterable[str]] = ...) -> None: ...

class NamespaceCondition(_message.Message):
    __slots__ = ("type", "status", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class NamespaceStatus(_message.Message):
    __slots__ = ("phase", "conditions")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    phase: str
    conditions: _containers.RepeatedCompositeFieldContainer[NamespaceCondition]
    def __init__(self, phase: _Optional[str] = ..., conditions: _Optional[_Iterable[_Union[NamespaceCondition, _Mapping]]] = ...) -> None: ...

class Namespace(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: NamespaceSpec
    status: NamespaceStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[NamespaceSpec, _Mapping]] = ..., status: _Optional[_Union[NamespaceStatus, _Mapping]] = ...) -> None: ...

class ServicePort(_message.Message):
    __slots__ = ("name", "protocol", "port", "target_port", "node_port", "app_protocol")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TARGET_PORT_FIELD_NUMBER: _ClassVar[int]
    NODE_PORT_FIELD_NUMBER: _ClassVar[int]
    APP_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    name: str
    protocol: str
    port: int
    target_port: _struct_pb2.Value
    node_port: int
    app_protocol: str
    def __init__(self, name: _Optional[str] = ..., protocol: _Optional[str] = ..., port: _Optional[int] = ..., target_port: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., node_port: _Optional[int] = ..., app_protocol: _Optional[str] = ...) -> None: ...

class ServiceSpec(_message.Message):
    __slots__ = ("selector", "ports", "type", "cluster_ip", "cluster_ips", "session_affinity", "external_name", "ip_families", "ip_family_policy", "internal_traffic_policy")
    class SelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_IP_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_IPS_FIELD_NUMBER: _ClassVar[int]
    SESSION_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_NAME_FIELD_NUMBER: _ClassVar[int]
    IP_FAMILIES_FIELD_NUMBER: _ClassVar[int]
    IP_FAMILY_POLICY_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_TRAFFIC_POLICY_FIELD_NUMBER: _ClassVar[int]
    selector: _containers.ScalarMap[str, str]
    ports: _containers.RepeatedCompositeFieldContainer[ServicePort]
    type: str
    cluster_ip: str
    cluster_ips: _containers.RepeatedScalarFieldContainer[str]
    session_affinity: str
    external_name: str
    ip_families: _containers.RepeatedScalarFieldContainer[str]
    ip_family_policy: str
    internal_traffic_policy: str
    def __init__(self, selector: _Optional[_Mapping[str, str]] = ..., ports: _Optional[_Iterable[_Union[ServicePort, _Mapping]]] = ..., type: _Optional[str] = ..., cluster_ip: _Optional[str] = ..., cluster_ips: _Optional[_Iterable[str]] = ..., session_affinity: _Optional[str] = ..., external_name: _Optional[str] = ..., ip_families: _Optional[_Iterable[str]] = ..., ip_family_policy: _Optional[str] = ..., internal_traffic_policy: _Optional[str] = ...) -> None: ...

class ServiceStatus(_message.Message):
    __slots__ = ("conditions",)
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    def __init__(self, conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ...) -> None: ...

class Service(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: ServiceSpec
    status: ServiceStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[ServiceSpec, _Mapping]] = ..., status: _Optional[_Union[ServiceStatus, _Mapping]] = ...) -> None: ...

class ReplicaSetSpec(_message.Message):
    __slots__ = ("replicas", "min_ready_seconds", "selector", "template")
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    MIN_READY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    replicas: int
    min_ready_seconds: int
    selector: LabelSelector
    template: PodTemplateSpec
    def __init__(self, replicas: _Optional[int] = ..., min_ready_seconds: _Optional[int] = ..., selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., template: _Optional[_Union[PodTemplateSpec, _Mapping]] = ...) -> None: ...

class ReplicaSetCondition(_message.Message):
    __slots__ = ("type", "status", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ReplicaSetStatus(_message.Message):
    __slots__ = ("replicas", "fully_labeled_replicas", "ready_replicas", "available_replicas", "observed_generation", "conditions", "terminating_replicas")
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    FULLY_LABELED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    READY_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    TERMINATING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    replicas: int
    fully_labeled_replicas: int
    ready_replicas: int
    available_replicas: int
    observed_generation: int
    conditions: _containers.RepeatedCompositeFieldContainer[ReplicaSetCondition]
    terminating_replicas: int
    def __init__(self, replicas: _Optional[int] = ..., fully_labeled_replicas: _Optional[int] = ..., ready_replicas: _Optional[int] = ..., available_replicas: _Optional[int] = ..., observed_generation: _Optional[int] = ..., conditions: _Optional[_Iterable[_Union[ReplicaSetCondition, _Mapping]]] = ..., terminating_replicas: _Optional[int] = ...) -> None: ...

class ReplicaSet(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: ReplicaSetSpec
    status: ReplicaSetStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[ReplicaSetSpec, _Mapping]] = ..., status: _Optional[_Union[ReplicaSetStatus, _Mapping]] = ...) -> None: ...

class RollingUpdateDeployment(_message.Message):
    __slots__ = ("max_unavailable", "max_surge")
    MAX_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    MAX_SURGE_FIELD_NUMBER: _ClassVar[int]
    max_unavailable: _struct_pb2.Value
    max_surge: _struct_pb2.Value
    def __init__(self, max_unavailable: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., max_surge: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class DeploymentStrategy(_message.Message):
    __slots__ = ("type", "rolling_update")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ROLLING_UPDATE_FIELD_NUMBER: _ClassVar[int]
    type: str
    rolling_update: RollingUpdateDeployment
    def __init__(self, type: _Optional[str] = ..., rolling_update: _Optional[_Union[RollingUpdateDeployment, _Mapping]] = ...) -> None: ...

class DeploymentSpec(_message.Message):
    __slots__ = ("replicas", "selector", "template", "strategy", "min_ready_seconds", "revision_history_limit", "paused", "progress_deadline_seconds")
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    MIN_READY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REVISION_HISTORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    replicas: int
    selector: LabelSelector
    template: PodTemplateSpec
    strategy: DeploymentStrategy
    min_ready_seconds: int
    revision_history_limit: int
    paused: bool
    progress_deadline_seconds: int
    def __init__(self, replicas: _Optional[int] = ..., selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., template: _Optional[_Union[PodTemplateSpec, _Mapping]] = ..., strategy: _Optional[_Union[DeploymentStrategy, _Mapping]] = ..., min_ready_seconds: _Optional[int] = ..., revision_history_limit: _Optional[int] = ..., paused: _Optional[bool] = ..., progress_deadline_seconds: _Optional[int] = ...) -> None: ...

class DeploymentCondition(_message.Message):
    __slots__ = ("type", "status", "last_update_time", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    last_update_time: str
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., last_update_time: _Optional[str] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class DeploymentStatus(_message.Message):
    __slots__ = ("observed_generation", "replicas", "updated_replicas", "ready_replicas", "available_replicas", "unavailable_replicas", "conditions", "collision_count", "terminating_replicas")
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    READY_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    COLLISION_COUNT_FIELD_NUMBER: _ClassVar[int]
    TERMINATING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    observed_generation: int
    replicas: int
    updated_replicas: int
    ready_replicas: int
    available_replicas: int
    unavailable_replicas: int
    conditions: _containers.RepeatedCompositeFieldContainer[DeploymentCondition]
    collision_count: int
    terminating_replicas: int
    def __init__(self, observed_generation: _Optional[int] = ..., replicas: _Optional[int] = ..., updated_replicas: _Optional[int] = ..., ready_replicas: _Optional[int] = ..., available_replicas: _Optional[int] = ..., unavailable_replicas: _Optional[int] = ..., conditions: _Optional[_Iterable[_Union[DeploymentCondition, _Mapping]]] = ..., collision_count: _Optional[int] = ..., terminating_replicas: _Optional[int] = ...) -> None: ...

class Deployment(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: DeploymentSpec
    status: DeploymentStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[DeploymentSpec, _Mapping]] = ..., status: _Optional[_Union[DeploymentStatus, _Mapping]] = ...) -> None: ...

class RollingUpdateDaemonSet(_message.Message):
    __slots__ = ("max_unavailable", "max_surge")
    MAX_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    MAX_SURGE_FIELD_NUMBER: _ClassVar[int]
    max_unavailable: _struct_pb2.Value
    max_surge: _struct_pb2.Value
    def __init__(self, max_unavailable: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., max_surge: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class DaemonSetUpdateStrategy(_message.Message):
    __slots__ = ("type", "rolling_update")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ROLLING_UPDATE_FIELD_NUMBER: _ClassVar[int]
    type: str
    rolling_update: RollingUpdateDaemonSet
    def __init__(self, type: _Optional[str] = ..., rolling_update: _Optional[_Union[RollingUpdateDaemonSet, _Mapping]] = ...) -> None: ...

class DaemonSetSpec(_message.Message):
    __slots__ = ("selector", "template", "update_strategy", "min_ready_seconds", "revision_history_limit")
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    MIN_READY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REVISION_HISTORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    selector: LabelSelector
    template: PodTemplateSpec
    update_strategy: DaemonSetUpdateStrategy
    min_ready_seconds: int
    revision_history_limit: int
    def __init__(self, selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., template: _Optional[_Union[PodTemplateSpec, _Mapping]] = ..., update_strategy: _Optional[_Union[DaemonSetUpdateStrategy, _Mapping]] = ..., min_ready_seconds: _Optional[int] = ..., revision_history_limit: _Optional[int] = ...) -> None: ...

class DaemonSetCondition(_message.Message):
    __slots__ = ("type", "status", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class DaemonSetStatus(_message.Message):
    __slots__ = ("current_number_scheduled", "number_misscheduled", "desired_number_scheduled", "number_ready", "observed_generation", "updated_number_scheduled", "number_available", "number_unavailable", "collision_count", "conditions")
    CURRENT_NUMBER_SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    NUMBER_MISSCHEDULED_FIELD_NUMBER: _ClassVar[int]
    DESIRED_NUMBER_SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    NUMBER_READY_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_NUMBER_SCHEDULED_FIELD_NUMBER: _ClassVar[int]
    NUMBER_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    NUMBER_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    COLLISION_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    current_number_scheduled: int
    number_misscheduled: int
    desired_number_scheduled: int
    number_ready: int
    observed_generation: int
    updated_number_scheduled: int
    number_available: int
    number_unavailable: int
    collision_count: int
    conditions: _containers.RepeatedCompositeFieldContainer[DaemonSetCondition]
    def __init__(self, current_number_scheduled: _Optional[int] = ..., number_misscheduled: _Optional[int] = ..., desired_number_scheduled: _Optional[int] = ..., number_ready: _Optional[int] = ..., observed_generation: _Optional[int] = ..., updated_number_scheduled: _Optional[int] = ..., number_available: _Optional[int] = ..., number_unavailable: _Optional[int] = ..., collision_count: _Optional[int] = ..., conditions: _Optional[_Iterable[_Union[DaemonSetCondition, _Mapping]]] = ...) -> None: ...

class DaemonSet(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: DaemonSetSpec
    status: DaemonSetStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[DaemonSetSpec, _Mapping]] = ..., status: _Optional[_Union[DaemonSetStatus, _Mapping]] = ...) -> None: ...

class PodDisruptionBudgetSpec(_message.Message):
    __slots__ = ("min_available", "selector", "max_unavailable", "unhealthy_pod_eviction_policy")
    MIN_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    MAX_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    UNHEALTHY_POD_EVICTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    min_available: _struct_pb2.Value
    selector: LabelSelector
    max_unavailable: _struct_pb2.Value
    unhealthy_pod_eviction_policy: str
    def __init__(self, min_available: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., selector: _Optional[_Union[LabelSelector, _Mapping]] = ..., max_unavailable: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., unhealthy_pod_eviction_policy: _Optional[str] = ...) -> None: ...

class PodDisruptionBudgetStatus(_message.Message):
    __slots__ = ("observed_generation", "disrupted_pods", "disruptions_allowed", "current_healthy", "desired_healthy", "expected_pods", "conditions")
    class DisruptedPodsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    DISRUPTED_PODS_FIELD_NUMBER: _ClassVar[int]
    DISRUPTIONS_ALLOWED_FIELD_NUMBER: _ClassVar[int]
    CURRENT_HEALTHY_FIELD_NUMBER: _ClassVar[int]
    DESIRED_HEALTHY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_PODS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    observed_generation: int
    disrupted_pods: _containers.ScalarMap[str, str]
    disruptions_allowed: int
    current_healthy: int
    desired_healthy: int
    expected_pods: int
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    def __init__(self, observed_generation: _Optional[int] = ..., disrupted_pods: _Optional[_Mapping[str, str]] = ..., disruptions_allowed: _Optional[int] = ..., current_healthy: _Optional[int] = ..., desired_healthy: _Optional[int] = ..., expected_pods: _Optional[int] = ..., conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ...) -> None: ...

class PodDisruptionBudget(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: ObjectMeta
    spec: PodDisruptionBudgetSpec
    status: PodDisruptionBudgetStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[PodDisruptionBudgetSpec, _Mapping]] = ..., status: _Optional[_Union[PodDisruptionBudgetStatus, _Mapping]] = ...) -> None: ...

class Object(_message.Message):
    __slots__ = ("pod", "node", "lease", "event", "priority_class", "namespace", "service", "replica_set", "deployment", "daemon_set", "pod_disruption_budget")
    POD_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_CLASS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    REPLICA_SET_FIELD_NUMBER: _ClassVar[int]
    DEPLOYMENT_FIELD_NUMBER: _ClassVar[int]
    DAEMON_SET_FIELD_NUMBER: _ClassVar[int]
    POD_DISRUPTION_BUDGET_FIELD_NUMBER: _ClassVar[int]
    pod: Pod
    node: Node
    lease: Lease
    event: Event
    priority_class: PriorityClass
    namespace: Namespace
    service: Service
    replica_set: ReplicaSet
    deployment: Deployment
    daemon_set: DaemonSet
    pod_disruption_budget: PodDisruptionBudget
    def __init__(self, pod: _Optional[_Union[Pod, _Mapping]] = ..., node: _Optional[_Union[Node, _Mapping]] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., event: _Optional[_Union[Event, _Mapping]] = ..., priority_class: _Optional[_Union[PriorityClass, _Mapping]] = ..., namespace: _Optional[_Union[Namespace, _Mapping]] = ..., service: _Optional[_Union[Service, _Mapping]] = ..., replica_set: _Optional[_Union[ReplicaSet, _Mapping]] = ..., deployment: _Optional[_Union[Deployment, _Mapping]] = ..., daemon_set: _Optional[_Union[DaemonSet, _Mapping]] = ..., pod_disruption_budget: _Optional[_Union[PodDisruptionBudget, _Mapping]] = ...) -> None: ...

class FenceToken(_message.Message):
    __slots__ = ("lease_namespace", "lease_name", "holder_identity", "lease_transitions")
    LEASE_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LEASE_NAME_FIELD_NUMBER: _ClassVar[int]
    HOLDER_IDENTITY_FIELD_NUMBER: _ClassVar[int]
    LEASE_TRANSITIONS_FIELD_NUMBER: _ClassVar[int]
    lease_namespace: str
    lease_name: str
    holder_identity: str
    lease_transitions: int
    def __init__(self, lease_namespace: _Optional[str] = ..., lease_name: _Optional[str] = ..., holder_identity: _Optional[str] = ..., lease_transitions: _Optional[int] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("resource", "namespace", "name")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    resource: str
    namespace: str
    name: str
    def __init__(self, resource: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("resource", "namespace", "label_selector", "field_selector", "resource_version", "limit")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    FIELD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CONTINUE_FIELD_NUMBER: _ClassVar[int]
    resource: str
    namespace: str
    label_selector: str
    field_selector: str
    resource_version: str
    limit: int
    def __init__(self, resource: _Optional[str] = ..., namespace: _Optional[str] = ..., label_selector: _Optional[str] = ..., field_selector: _Optional[str] = ..., resource_version: _Optional[str] = ..., limit: _Optional[int] = ..., **kwargs) -> None: ...

class ObjectList(_message.Message):
    __slots__ = ("metadata", "items")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    metadata: ListMeta
    items: _containers.RepeatedCompositeFieldContainer[Object]
    def __init__(self, metadata: _Optional[_Union[ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[Object, _Mapping]]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("resource", "namespace", "label_selector", "field_selector", "resource_version", "allow_watch_bookmarks", "send_initial_events", "timeout_seconds")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    FIELD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    ALLOW_WATCH_BOOKMARKS_FIELD_NUMBER: _ClassVar[int]
    SEND_INITIAL_EVENTS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    resource: str
    namespace: str
    label_selector: str
    field_selector: str
    resource_version: str
    allow_watch_bookmarks: bool
    send_initial_events: bool
    timeout_seconds: int
    def __init__(self, resource: _Optional[str] = ..., namespace: _Optional[str] = ..., label_selector: _Optional[str] = ..., field_selector: _Optional[str] = ..., resource_version: _Optional[str] = ..., allow_watch_bookmarks: _Optional[bool] = ..., send_initial_events: _Optional[bool] = ..., timeout_seconds: _Optional[int] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("type", "object", "resource_version")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: Object
    resource_version: str
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[Object, _Mapping]] = ..., resource_version: _Optional[str] = ...) -> None: ...

class WatchEventBatch(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[WatchEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[WatchEvent, _Mapping]]] = ...) -> None: ...

class WriteRequest(_message.Message):
    __slots__ = ("object", "fence", "dry_run")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    object: Object
    fence: FenceToken
    dry_run: bool
    def __init__(self, object: _Optional[_Union[Object, _Mapping]] = ..., fence: _Optional[_Union[FenceToken, _Mapping]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("resource", "namespace", "name", "resource_version", "uid", "fence", "grace_period_seconds", "propagation_policy", "dry_run")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROPAGATION_POLICY_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    resource: str
    namespace: str
    name: str
    resource_version: str
    uid: str
    fence: FenceToken
    grace_period_seconds: int
    propagation_policy: str
    dry_run: bool
    def __init__(self, resource: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., resource_version: _Optional[str] = ..., uid: _Optional[str] = ..., fence: _Optional[_Union[FenceToken, _Mapping]] = ..., grace_period_seconds: _Optional[int] = ..., propagation_policy: _Optional[str] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class BindRequest(_message.Message):
    __slots__ = ("binding", "fence")
    BINDING_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    binding: Binding
    fence: FenceToken
    def __init__(self, binding: _Optional[_Union[Binding, _Mapping]] = ..., fence: _Optional[_Union[FenceToken, _Mapping]] = ...) -> None: ...

class BindBatchRequest(_message.Message):
    __slots__ = ("binds",)
    BINDS_FIELD_NUMBER: _ClassVar[int]
    binds: _containers.RepeatedCompositeFieldContainer[BindRequest]
    def __init__(self, binds: _Optional[_Iterable[_Union[BindRequest, _Mapping]]] = ...) -> None: ...

class BatchResult(_message.Message):
    __slots__ = ("object", "code", "message", "revision")
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    object: Object
    code: int
    message: str
    revision: str
    def __init__(self, object: _Optional[_Union[Object, _Mapping]] = ..., code: _Optional[int] = ..., message: _Optional[str] = ..., revision: _Optional[str] = ...) -> None: ...

class BindBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BatchResult]
    def __init__(self, results: _Optional[_Iterable[_Union[BatchResult, _Mapping]]] = ...) -> None: ...

class CreateBatchRequest(_message.Message):
    __slots__ = ("creates",)
    CREATES_FIELD_NUMBER: _ClassVar[int]
    creates: _containers.RepeatedCompositeFieldContainer[WriteRequest]
    def __init__(self, creates: _Optional[_Iterable[_Union[WriteRequest, _Mapping]]] = ...) -> None: ...

class CreateBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BatchResult]
    def __init__(self, results: _Optional[_Iterable[_Union[BatchResult, _Mapping]]] = ...) -> None: ...

class EvictRequest(_message.Message):
    __slots__ = ("namespace", "name", "fence", "grace_period_seconds", "dry_run", "resource_version", "uid")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    fence: FenceToken
    grace_period_seconds: int
    dry_run: bool
    resource_version: str
    uid: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., fence: _Optional[_Union[FenceToken, _Mapping]] = ..., grace_period_seconds: _Optional[int] = ..., dry_run: _Optional[bool] = ..., resource_version: _Optional[str] = ..., uid: _Optional[str] = ...) -> None: ...
