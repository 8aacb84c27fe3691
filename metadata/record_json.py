"""Metadata records as JSON, with Kafka's camelCase field names: what `kafka-dump-log
--cluster-metadata-decoder` prints (kraft-snapshot, the audit's decoders)."""

from __future__ import annotations

from typing import Any

from metadata.records import (
    NO_LEADER_CHANGE,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ControlledShutdownChange,
    FeatureLevelRecord,
    FencingChange,
    LeaderRecoveryState,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    record_version,
)
from metadata.security_records import security_record_json


def _broker_json(r: RegisterBrokerRecord) -> dict[str, Any]:
    return {
        "brokerId": r.broker_id,
        "incarnationId": r.incarnation_id,
        "brokerEpoch": r.broker_epoch,
        "endPoints": [{"name": e.name, "host": e.host, "port": e.port} for e in r.endpoints],
        "rack": r.rack,
        "fenced": r.fenced,
        "inControlledShutdown": r.in_controlled_shutdown,
    }


def _partition_json(r: PartitionRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "partitionId": r.partition_id,
        "topicId": r.topic_id,
        "replicas": list(r.replicas),
        "isr": list(r.isr),
        "removingReplicas": list(r.removing_replicas),
        "addingReplicas": list(r.adding_replicas),
        "leader": r.leader,
    }
    if r.leader_recovery_state != LeaderRecoveryState.RECOVERED:  # tagged: printed if set
        data["leaderRecoveryState"] = r.leader_recovery_state
    data["leaderEpoch"] = r.leader_epoch
    data["partitionEpoch"] = r.partition_epoch
    return data


def _partition_change_json(r: PartitionChangeRecord) -> dict[str, Any]:
    # Kafka's tagged fields are printed only when they carry a change.
    data: dict[str, Any] = {"partitionId": r.partition_id, "topicId": r.topic_id}
    if r.isr is not None:
        data["isr"] = list(r.isr)
    if r.leader != NO_LEADER_CHANGE:
        data["leader"] = r.leader
    if r.replicas is not None:
        data["replicas"] = list(r.replicas)
    if r.removing_replicas is not None:
        data["removingReplicas"] = list(r.removing_replicas)
    if r.adding_replicas is not None:
        data["addingReplicas"] = list(r.adding_replicas)
    if r.leader_recovery_state != -1:
        data["leaderRecoveryState"] = r.leader_recovery_state
    return data


def _registration_change_json(r: BrokerRegistrationChangeRecord) -> dict[str, Any]:
    data: dict[str, Any] = {"brokerId": r.broker_id, "brokerEpoch": r.broker_epoch}
    if r.fenced != FencingChange.NONE:
        data["fenced"] = r.fenced
    if r.in_controlled_shutdown != ControlledShutdownChange.NONE:
        data["inControlledShutdown"] = r.in_controlled_shutdown
    return data


def _record_data_json(record: Record) -> dict[str, Any]:
    match record:
        case RegisterBrokerRecord():
            return _broker_json(record)
        case UnregisterBrokerRecord():
            return {"brokerId": record.broker_id, "brokerEpoch": record.broker_epoch}
        case TopicRecord():
            return {"name": record.name, "topicId": record.topic_id}
        case PartitionRecord():
            return _partition_json(record)
        case ConfigRecord():
            return {
                "resourceType": record.resource_type,
                "resourceName": record.resource_name,
                "name": record.name,
                "value": record.value,
            }
        case PartitionChangeRecord():
            return _partition_change_json(record)
        case RemoveTopicRecord():
            return {"topicId": record.topic_id}
        case FeatureLevelRecord():
            return {"name": record.name, "featureLevel": record.feature_level}
        case BrokerRegistrationChangeRecord():
            return _registration_change_json(record)
        case ProducerIdsRecord():
            return {"brokerId": record.broker_id, "brokerEpoch": record.broker_epoch,
                    "nextProducerId": record.next_producer_id}
        case AccessControlEntryRecord():
            return {"id": record.id, "resourceType": record.resource_type,
                    "resourceName": record.resource_name, "patternType": record.pattern_type,
                    "principal": record.principal, "host": record.host,
                    "operation": record.operation, "permissionType": record.permission_type}
        case RemoveAccessControlEntryRecord():
            return {"id": record.id}
        case NoOpRecord():
            return {}
    return security_record_json(record)  # the only records left; it refuses a non-record


def record_to_json(record: Record) -> dict[str, Any]:
    """`{"type": ..., "version": ..., "data": {...}}` with Kafka's camelCase field names, the
    payload `kafka-dump-log --cluster-metadata-decoder` prints."""
    return {
        "type": record.record_type.name,
        "version": record_version(record),
        "data": _record_data_json(record),
    }
