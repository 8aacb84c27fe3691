from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Listener(_message.Message):
    __slots__ = ("name", "host", "port")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class ControllerHint(_message.Message):
    __slots__ = ("controller_id", "controller_endpoint")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    controller_endpoint: str
    def __init__(self, controller_id: _Optional[int] = ..., controller_endpoint: _Optional[str] = ...) -> None: ...

class BrokerRegistrationRequest(_message.Message):
    __slots__ = ("broker_id", "cluster_id", "incarnation_id", "listeners", "rack")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    cluster_id: str
    incarnation_id: str
    listeners: _containers.RepeatedCompositeFieldContainer[Listener]
    rack: str
    def __init__(self, broker_id: _Optional[int] = ..., cluster_id: _Optional[str] = ..., incarnation_id: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[Listener, _Mapping]]] = ..., rack: _Optional[str] = ...) -> None: ...

class BrokerRegistrationResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "broker_epoch", "controller")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    broker_epoch: int
    controller: ControllerHint
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., broker_epoch: _Optional[int] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "current_metadata_offset", "want_fence", "want_shut_down")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_FENCE_FIELD_NUMBER: _ClassVar[int]
    WANT_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shut_down: bool
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., current_metadata_offset: _Optional[int] = ..., want_fence: _Optional[bool] = ..., want_shut_down: _Optional[bool] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "is_caught_up", "is_fenced", "in_controlled_shutdown", "should_shut_down", "controller")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    IS_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    IS_FENCED_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool
    controller: ControllerHint
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., is_caught_up: _Optional[bool] = ..., is_fenced: _Optional[bool] = ..., in_controlled_shutdown: _Optional[bool] = ..., should_shut_down: _Optional[bool] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ...) -> None: ...

class BrokerEpoch(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "topics")
    class PartitionData(_message.Message):
        __slots__ = ("partition_index", "leader_epoch", "new_isr", "leader_recovery_state", "partition_epoch")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        NEW_ISR_FIELD_NUMBER: _ClassVar[int]
        LEADER_RECOVERY_STATE_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        leader_epoch: int
        new_isr: _containers.RepeatedCompositeFieldContainer[BrokerEpoch]
        leader_recovery_state: int
        partition_epoch: int
        def __init__(self, partition_index: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[_Union[BrokerEpoch, _Mapping]]] = ..., leader_recovery_state: _Optional[int] = ..., partition_epoch: _Optional[int] = ...) -> None: ...
    class TopicData(_message.Message):
        __slots__ = ("topic_id", "partitions")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_id: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.PartitionData]
        def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionRequest.PartitionData, _Mapping]]] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.TopicData]
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[AlterPartitionRequest.TopicData, _Mapping]]] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "partitions", "controller")
    class PartitionResult(_message.Message):
        __slots__ = ("topic_id", "partition_index", "error_code", "error_message", "leader_id", "leader_epoch", "isr", "leader_recovery_state", "partition_epoch")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        LEADER_ID_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ISR_FIELD_NUMBER: _ClassVar[int]
        LEADER_RECOVERY_STATE_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        topic_id: str
        partition_index: int
        error_code: int
        error_message: str
        leader_id: int
        leader_epoch: int
        isr: _containers.RepeatedScalarFieldContainer[int]
        leader_recovery_state: int
        partition_epoch: int
        def __init__(self, topic_id: _Optional[str] = ..., partition_index: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ..., leader_recovery_state: _Optional[int] = ..., partition_epoch: _Optional[int] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionResponse.PartitionResult]
    controller: ControllerHint
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionResponse.PartitionResult, _Mapping]]] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ...) -> None: ...

class AllocateProducerIdsRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AllocateProducerIdsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "producer_id_start", "producer_id_len", "controller")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_START_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_LEN_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    producer_id_start: int
    producer_id_len: int
    controller: ControllerHint
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., producer_id_start: _Optional[int] = ..., producer_id_len: _Optional[int] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ...) -> None: ...

class BrokerLivenessRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "closing")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CLOSING_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    closing: bool
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., closing: _Optional[bool] = ...) -> None: ...

class BrokerLivenessResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ...) -> None: ...
