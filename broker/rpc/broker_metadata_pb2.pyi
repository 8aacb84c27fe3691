from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MetadataPosition(_message.Message):
    __slots__ = ("offset", "epoch", "high_watermark", "timestamp_ms")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    offset: int
    epoch: int
    high_watermark: int
    timestamp_ms: int
    def __init__(self, offset: _Optional[int] = ..., epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class BrokerEndpoint(_message.Message):
    __slots__ = ("name", "host", "port")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class BrokerInfo(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "endpoints", "rack", "fenced", "in_controlled_shutdown")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    endpoints: _containers.RepeatedCompositeFieldContainer[BrokerEndpoint]
    rack: str
    fenced: bool
    in_controlled_shutdown: bool
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., endpoints: _Optional[_Iterable[_Union[BrokerEndpoint, _Mapping]]] = ..., rack: _Optional[str] = ..., fenced: _Optional[bool] = ..., in_controlled_shutdown: _Optional[bool] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ("include_fenced_brokers", "min_offset", "wait_ms")
    INCLUDE_FENCED_BROKERS_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    include_fenced_brokers: bool
    min_offset: int
    wait_ms: int
    def __init__(self, include_fenced_brokers: _Optional[bool] = ..., min_offset: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("cluster_id", "controller_id", "brokers", "position", "broker_id", "broker_state")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_STATE_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    controller_id: int
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerInfo]
    position: MetadataPosition
    broker_id: int
    broker_state: str
    def __init__(self, cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[BrokerInfo, _Mapping]]] = ..., position: _Optional[_Union[MetadataPosition, _Mapping]] = ..., broker_id: _Optional[int] = ..., broker_state: _Optional[str] = ...) -> None: ...

class PartitionInfo(_message.Message):
    __slots__ = ("partition_index", "leader", "replicas", "isr", "leader_epoch", "partition_epoch", "offline_replicas")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    leader: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader_epoch: int
    partition_epoch: int
    offline_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition_index: _Optional[int] = ..., leader: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., offline_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class TopicInfo(_message.Message):
    __slots__ = ("name", "topic_id", "error_code", "error_message", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    error_code: int
    error_message: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionInfo]
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionInfo, _Mapping]]] = ...) -> None: ...

class DescribeTopicsRequest(_message.Message):
    __slots__ = ("names", "wait_ms")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    wait_ms: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class DescribeTopicsResponse(_message.Message):
    __slots__ = ("topics", "position")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicInfo]
    position: MetadataPosition
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicInfo, _Mapping]]] = ..., position: _Optional[_Union[MetadataPosition, _Mapping]] = ...) -> None: ...
