"""Schemas of the old API versions kio does not generate, written in kio's pattern (frozen
dataclasses with `kafka_type` metadata, read and written by kio's own serializers): the
versions Kafka 3.9 still served for lag monitors and old clients (KIP-896 removed them in 4.0).
broker/kafka/codec.py falls back to this index when kio has no schema for a version."""

from __future__ import annotations

from types import ModuleType

from broker.kafka.legacy import (
    describe_transactions_v0,
    list_offsets_v0,
    offset_commit_v0,
    offset_commit_v1,
    offset_fetch_v0,
)

LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH = 2, 8, 9
DESCRIBE_TRANSACTIONS = 65  # kio has it, but cannot read its -1 start time

_MODULES: dict[tuple[int, int], ModuleType] = {
    (LIST_OFFSETS, 0): list_offsets_v0,
    (OFFSET_COMMIT, 0): offset_commit_v0,
    (OFFSET_COMMIT, 1): offset_commit_v1,
    (OFFSET_FETCH, 0): offset_fetch_v0,
    (DESCRIBE_TRANSACTIONS, 0): describe_transactions_v0,
}
_REQUESTS: dict[tuple[int, int], type] = {
    (LIST_OFFSETS, 0): list_offsets_v0.ListOffsetsRequest,
    (OFFSET_COMMIT, 0): offset_commit_v0.OffsetCommitRequest,
    (OFFSET_COMMIT, 1): offset_commit_v1.OffsetCommitRequest,
    (OFFSET_FETCH, 0): offset_fetch_v0.OffsetFetchRequest,
}
_RESPONSES: dict[tuple[int, int], type] = {
    (LIST_OFFSETS, 0): list_offsets_v0.ListOffsetsResponse,
    (OFFSET_COMMIT, 0): offset_commit_v0.OffsetCommitResponse,
    (OFFSET_COMMIT, 1): offset_commit_v1.OffsetCommitResponse,
    (OFFSET_FETCH, 0): offset_fetch_v0.OffsetFetchResponse,
    (DESCRIBE_TRANSACTIONS, 0): describe_transactions_v0.DescribeTransactionsResponse,
}


def legacy_module(api_key: int, api_version: int) -> ModuleType | None:
    """The module holding a version's request and response classes, or None."""
    return _MODULES.get((api_key, api_version))


def legacy_request(api_key: int, api_version: int) -> type | None:
    return _REQUESTS.get((api_key, api_version))


def legacy_response(api_key: int, api_version: int) -> type | None:
    return _RESPONSES.get((api_key, api_version))
