from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OptionalString(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: str
    def __init__(self, value: _Optional[str] = ...) -> None: ...

class OffsetAndEpoch(_message.Message):
    __slots__ = ("end_offset", "epoch")
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    end_offset: int
    epoch: int
    def __init__(self, end_offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class VoteRequest(_message.Message):
    __slots__ = ("cluster_id", "replica_id", "replica_epoch", "last_offset_epoch", "last_offset", "pre_vote", "voter_id", "replica_directory_id", "voter_directory_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: OptionalString
    replica_id: int
    replica_epoch: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool
    voter_id: int
    replica_directory_id: str
    voter_directory_id: str
    def __init__(self, cluster_id: _Optional[_Union[OptionalString, _Mapping]] = ..., replica_id: _Optional[int] = ..., replica_epoch: _Optional[int] = ..., last_offset_epoch: _Optional[int] = ..., last_offset: _Optional[int] = ..., pre_vote: _Optional[bool] = ..., voter_id: _Optional[int] = ..., replica_directory_id: _Optional[str] = ..., voter_directory_id: _Optional[str] = ...) -> None: ...

class VoteResponse(_message.Message):
    __slots__ = ("error_code", "leader_id", "leader_epoch", "vote_granted", "leader_endpoint")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    VOTE_GRANTED_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    leader_endpoint: str
    def __init__(self, error_code: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., vote_granted: _Optional[bool] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class BeginQuorumEpochRequest(_message.Message):
    __slots__ = ("cluster_id", "leader_id", "leader_epoch", "leader_endpoint", "voter_id", "voter_directory_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: OptionalString
    leader_id: int
    leader_epoch: int
    leader_endpoint: str
    voter_id: int
    voter_directory_id: str
    def __init__(self, cluster_id: _Optional[_Union[OptionalString, _Mapping]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., voter_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ...) -> None: ...

class BeginQuorumEpochResponse(_message.Message):
    __slots__ = ("error_code", "leader_id", "leader_epoch", "leader_endpoint")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    leader_id: int
    leader_epoch: int
    leader_endpoint: str
    def __init__(self, error_code: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class EndQuorumEpochRequest(_message.Message):
    __slots__ = ("cluster_id", "leader_id", "leader_epoch", "preferred_successors", "leader_endpoint")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    cluster_id: OptionalString
    leader_id: int
    leader_epoch: int
    preferred_successors: _containers.RepeatedScalarFieldContainer[int]
    leader_endpoint: str
    def __init__(self, cluster_id: _Optional[_Union[OptionalString, _Mapping]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., preferred_successors: _Optional[_Iterable[int]] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class EndQuorumEpochResponse(_message.Message):
    __slots__ = ("error_code", "leader_id", "leader_epoch", "leader_endpoint")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    leader_id: int
    leader_epoch: int
    leader_endpoint: str
    def __init__(self, error_code: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("cluster_id", "replica_id", "current_leader_epoch", "fetch_offset", "last_fetched_epoch", "max_wait_ms", "max_bytes", "high_watermark", "replica_directory_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    REPLICA_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: OptionalString
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int
    max_bytes: int
    high_watermark: int
    replica_directory_id: str
    def __init__(self, cluster_id: _Optional[_Union[OptionalString, _Mapping]] = ..., replica_id: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., max_bytes: _Optional[int] = ..., high_watermark: _Optional[int] = ..., replica_directory_id: _Optional[str] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("error_code", "leader_id", "leader_epoch", "high_watermark", "log_start_offset", "records", "diverging_epoch", "snapshot_id", "leader_endpoint")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    log_start_offset: int
    records: bytes
    diverging_epoch: OffsetAndEpoch
    snapshot_id: OffsetAndEpoch
    leader_endpoint: str
    def __init__(self, error_code: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., records: _Optional[bytes] = ..., diverging_epoch: _Optional[_Union[OffsetAndEpoch, _Mapping]] = ..., snapshot_id: _Optional[_Union[OffsetAndEpoch, _Mapping]] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class FetchSnapshotRequest(_message.Message):
    __slots__ = ("cluster_id", "replica_id", "current_leader_epoch", "snapshot_id", "position", "max_bytes", "replica_directory_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    REPLICA_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: OptionalString
    replica_id: int
    current_leader_epoch: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int
    replica_directory_id: str
    def __init__(self, cluster_id: _Optional[_Union[OptionalString, _Mapping]] = ..., replica_id: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., snapshot_id: _Optional[_Union[OffsetAndEpoch, _Mapping]] = ..., position: _Optional[int] = ..., max_bytes: _Optional[int] = ..., replica_directory_id: _Optional[str] = ...) -> None: ...

class FetchSnapshotResponse(_message.Message):
    __slots__ = ("error_code", "leader_id", "leader_epoch", "snapshot_id", "size", "position", "unaligned_records", "leader_endpoint")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    UNALIGNED_RECORDS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    leader_id: int
    leader_epoch: int
    snapshot_id: OffsetAndEpoch
    size: int
    position: int
    unaligned_records: bytes
    leader_endpoint: str
    def __init__(self, error_code: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., snapshot_id: _Optional[_Union[OffsetAndEpoch, _Mapping]] = ..., size: _Optional[int] = ..., position: _Optional[int] = ..., unaligned_records: _Optional[bytes] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class ApiVersionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ApiVersionsResponse(_message.Message):
    __slots__ = ("error_code", "node_id", "directory_id", "min_kraft_version", "max_kraft_version")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_KRAFT_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_KRAFT_VERSION_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    node_id: int
    directory_id: str
    min_kraft_version: int
    max_kraft_version: int
    def __init__(self, error_code: _Optional[int] = ..., node_id: _Optional[int] = ..., directory_id: _Optional[str] = ..., min_kraft_version: _Optional[int] = ..., max_kraft_version: _Optional[int] = ...) -> None: ...

class DescribeQuorumRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReplicaState(_message.Message):
    __slots__ = ("replica_id", "log_end_offset", "last_fetch_timestamp", "last_caught_up_timestamp", "directory_id", "endpoint")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCH_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LAST_CAUGHT_UP_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    directory_id: str
    endpoint: str
    def __init__(self, replica_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., last_fetch_timestamp: _Optional[int] = ..., last_caught_up_timestamp: _Optional[int] = ..., directory_id: _Optional[str] = ..., endpoint: _Optional[str] = ...) -> None: ...

class DescribeQuorumResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "cluster_id", "leader_id", "leader_epoch", "high_watermark", "current_voters", "observers", "leader_endpoint", "leader_log_end_offset", "voter_endpoints", "listener_name", "kraft_version")
    class VoterEndpointsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    CURRENT_VOTERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    LEADER_LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    VOTER_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    LISTENER_NAME_FIELD_NUMBER: _ClassVar[int]
    KRAFT_VERSION_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    cluster_id: str
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    observers: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    leader_endpoint: str
    leader_log_end_offset: int
    voter_endpoints: _containers.ScalarMap[int, str]
    listener_name: str
    kraft_version: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., cluster_id: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., current_voters: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ..., observers: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ..., leader_endpoint: _Optional[str] = ..., leader_log_end_offset: _Optional[int] = ..., voter_endpoints: _Optional[_Mapping[int, str]] = ..., listener_name: _Optional[str] = ..., kraft_version: _Optional[int] = ...) -> None: ...

class NodeStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NodeStatusResponse(_message.Message):
    __slots__ = ("node_id", "state", "epoch", "leader_id", "voted_id", "high_watermark", "log_end_offset", "last_epoch", "is_voter", "cluster_id", "leader_endpoint", "directory_id", "kraft_version", "voters")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTED_ID_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IS_VOTER_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    KRAFT_VERSION_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    state: str
    epoch: int
    leader_id: int
    voted_id: int
    high_watermark: int
    log_end_offset: int
    last_epoch: int
    is_voter: bool
    cluster_id: str
    leader_endpoint: str
    directory_id: str
    kraft_version: int
    voters: _containers.RepeatedCompositeFieldContainer[VoterContact]
    def __init__(self, node_id: _Optional[int] = ..., state: _Optional[str] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., voted_id: _Optional[int] = ..., high_watermark: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., last_epoch: _Optional[int] = ..., is_voter: _Optional[bool] = ..., cluster_id: _Optional[str] = ..., leader_endpoint: _Optional[str] = ..., directory_id: _Optional[str] = ..., kraft_version: _Optional[int] = ..., voters: _Optional[_Iterable[_Union[VoterContact, _Mapping]]] = ...) -> None: ...

class VoterContact(_message.Message):
    __slots__ = ("voter_id", "endpoint", "heard_ms_ago", "failed_ms_ago", "failure")
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HEARD_MS_AGO_FIELD_NUMBER: _ClassVar[int]
    FAILED_MS_AGO_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    voter_id: int
    endpoint: str
    heard_ms_ago: int
    failed_ms_ago: int
    failure: str
    def __init__(self, voter_id: _Optional[int] = ..., endpoint: _Optional[str] = ..., heard_ms_ago: _Optional[int] = ..., failed_ms_ago: _Optional[int] = ..., failure: _Optional[str] = ...) -> None: ...

class RaftEndpoint(_message.Message):
    __slots__ = ("name", "host", "port")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class AddRaftVoterRequest(_message.Message):
    __slots__ = ("cluster_id", "timeout_ms", "voter_id", "voter_directory_id", "listeners", "min_kraft_version", "max_kraft_version")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    MIN_KRAFT_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_KRAFT_VERSION_FIELD_NUMBER: _ClassVar[int]
    cluster_id: OptionalString
    timeout_ms: int
    voter_id: int
    voter_directory_id: str
    listeners: _containers.RepeatedCompositeFieldContainer[RaftEndpoint]
    min_kraft_version: int
    max_kraft_version: int
    def __init__(self, cluster_id: _Optional[_Union[OptionalString, _Mapping]] = ..., timeout_ms: _Optional[int] = ..., voter_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[RaftEndpoint, _Mapping]]] = ..., min_kraft_version: _Optional[int] = ..., max_kraft_version: _Optional[int] = ...) -> None: ...

class RemoveRaftVoterRequest(_message.Message):
    __slots__ = ("cluster_id", "voter_id", "voter_directory_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: OptionalString
    voter_id: int
    voter_directory_id: str
    def __init__(self, cluster_id: _Optional[_Union[OptionalString, _Mapping]] = ..., voter_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ...) -> None: ...

class UpdateRaftVoterRequest(_message.Message):
    __slots__ = ("cluster_id", "current_leader_epoch", "voter_id", "voter_directory_id", "listeners", "min_kraft_version", "max_kraft_version")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTER_DIRECTORY_ID_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    MIN_KRAFT_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_KRAFT_VERSION_FIELD_NUMBER: _ClassVar[int]
    cluster_id: OptionalString
    current_leader_epoch: int
    voter_id: int
    voter_directory_id: str
    listeners: _containers.RepeatedCompositeFieldContainer[RaftEndpoint]
    min_kraft_version: int
    max_kraft_version: int
    def __init__(self, cluster_id: _Optional[_Union[OptionalString, _Mapping]] = ..., current_leader_epoch: _Optional[int] = ..., voter_id: _Optional[int] = ..., voter_directory_id: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[RaftEndpoint, _Mapping]]] = ..., min_kraft_version: _Optional[int] = ..., max_kraft_version: _Optional[int] = ...) -> None: ...

class VoterChangeResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "leader_id", "leader_epoch", "leader_endpoint")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    leader_id: int
    leader_epoch: int
    leader_endpoint: str
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, records: _Optional[_Iterable[bytes]] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "last_offset", "epoch", "leader_endpoint")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    last_offset: int
    epoch: int
    leader_endpoint: str
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., last_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_endpoint: _Optional[str] = ...) -> None: ...

class FaultRequest(_message.Message):
    __slots__ = ("blocked_node_ids",)
    BLOCKED_NODE_IDS_FIELD_NUMBER: _ClassVar[int]
    blocked_node_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, blocked_node_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class FaultResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
