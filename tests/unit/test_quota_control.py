"""The controller's client quota rules (metadata/quotas.py, Kafka's ClientQuotaControlManager):
AlterClientQuotas' validation of entities, keys and values and the records it writes, replayed
as every node does; DescribeClientQuotas' filters as Kafka's ClientQuotasImage.describe."""

from __future__ import annotations

from typing import Any

import pytest

from kraft.errors import Errors
from metadata.delta import MetadataDelta
from metadata.errors import ControllerApiError, ControllerResult
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.quotas import (
    MatchType,
    QuotaAlteration,
    QuotaFilterComponent,
    QuotaOp,
    alter_client_quotas,
    describe_client_quotas,
)
from metadata.security_records import ClientQuotaRecord

ALICE = (("user", "alice"),)
APP = (("client-id", "app"),)
ALICE_APP = (("user", "alice"), ("client-id", "app"))
DEFAULT_USER = (("user", None),)


def alter(entity: tuple[tuple[str, str | None], ...], **ops: float | None) -> QuotaAlteration:
    return QuotaAlteration(entity, tuple(QuotaOp(k, v) for k, v in ops.items()))


def commit(image: MetadataImage, result: ControllerResult[Any]) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(result.records, start=image.provenance.offset + 1):
        delta.replay(record, offset, 1, 0)
    return delta.apply()


def messages(result: ControllerResult[tuple[ControllerApiError | None, ...]]) -> list[str | None]:
    for error in result.response:
        assert error is None or error.error == Errors.INVALID_REQUEST
    return [None if e is None else e.message for e in result.response]


def test_quotas_are_set_changed_and_removed_writing_only_changes() -> None:
    result = alter_client_quotas(EMPTY_IMAGE, [
        alter(ALICE_APP, producer_byte_rate=1048576, request_percentage=12.5),
        alter(DEFAULT_USER, consumer_byte_rate=2000), alter((("ip", "10.0.0.1"),),
                                                            connection_creation_rate=5)])
    assert messages(result) == [None, None, None] and len(result.records) == 4
    image = commit(EMPTY_IMAGE, result)
    assert dict(image.client_quotas[(("client-id", "app"), ("user", "alice"))]) == {
        "producer_byte_rate": 1048576.0, "request_percentage": 12.5}
    again = alter_client_quotas(image, [alter(ALICE_APP, producer_byte_rate=1048576,
                                              request_percentage=None, consumer_byte_rate=None)])
    assert messages(again) == [None]
    # the same value writes nothing; the unset consumer_byte_rate is no removal
    assert again.records == (ClientQuotaRecord(
        result.records[0].entity, "request_percentage", 0.0, True),)  # type: ignore[union-attr]
    assert dict(commit(image, again).client_quotas[(("client-id", "app"), ("user", "alice"))]) \
        == {"producer_byte_rate": 1048576.0}
    assert alter_client_quotas(image, [alter(ALICE, producer_byte_rate=5)],
                               validate_only=True).records == ()


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ((), {"producer_byte_rate": 1}, "Invalid empty client quota entity"),
    ((("user", "a"), ("user", "b")), {"producer_byte_rate": 1},
     "Invalid client quota entity, duplicate entity entry user"),
    ((("group", "g"),), {"producer_byte_rate": 1}, "Unhandled client quota entity type: group"),
    ((("user", ""),), {"producer_byte_rate": 1}, "Empty user not supported"),
    ((("ip", "1.2.3.4"), ("user", "a")), {"connection_creation_rate": 1},
     "Invalid quota entity combination, IP entity should not be combined with User or "
     "ClientId"),
    ((("ip", "no such host"),), {"connection_creation_rate": 1},
     "no such host is not a valid IP or resolvable host."),
    (ALICE, {"connection_creation_rate": 1}, "Invalid configuration key connection_creation_rate"),
    ((("ip", None),), {"producer_byte_rate": 1}, "Invalid configuration key producer_byte_rate"),
    (ALICE, {"producer_byte_rate": 0}, "Quota producer_byte_rate must be greater than 0"),
    (ALICE, {"request_percentage": -1.5}, "Quota request_percentage must be greater than 0"),
    (ALICE, {"consumer_byte_rate": 10.5}, "consumer_byte_rate cannot be a fractional value."),
    (ALICE, {"producer_byte_rate": 1e19},
     "Proposed value for producer_byte_rate is too large for a LONG."),
    ((("ip", "::1"),), {"connection_creation_rate": 3e9},
     "Proposed value for connection_creation_rate is too large for an INT."),
    (ALICE, {"request_percentage": float("nan")}, "Quota request_percentage must be a finite "
     "number"),
    (ALICE, {"producer_byte_rate": 10, "consumer_byte_rate": 2.5},
     "consumer_byte_rate cannot be a fractional value."),
])
def test_a_bad_entity_key_or_value_refuses_that_entity_alone(
    entity: tuple[tuple[str, str | None], ...], ops: dict[str, float], message: str,
) -> None:
    result = alter_client_quotas(EMPTY_IMAGE, [alter(entity, **ops),
                                               alter(APP, producer_byte_rate=7)])
    assert messages(result) == [message, None]
    assert [r.entity[0].entity_name for r in result.records  # nothing of the first
            if isinstance(r, ClientQuotaRecord)] == ["app"]
    assert len(result.records) == 1


def test_duplicate_keys_and_entities_refuse_the_entity_and_write_nothing_of_it() -> None:
    twice = QuotaAlteration(ALICE, (QuotaOp("producer_byte_rate", 1),
                                    QuotaOp("producer_byte_rate", 2)))
    result = alter_client_quotas(EMPTY_IMAGE, [twice])
    assert messages(result) == ["Duplicate quota key producer_byte_rate not updating quota for "
                                "this entity ClientQuotaEntity(entries={user=alice})"]
    same = (("client-id", "app"), ("user", "alice"))  # ALICE_APP in another order
    result = alter_client_quotas(EMPTY_IMAGE, [alter(ALICE_APP, producer_byte_rate=1),
                                               alter(same, consumer_byte_rate=2)])
    assert all(m is not None and m.startswith("Ignoring duplicate entity") for m in
               messages(result))
    assert result.records == ()


def test_a_host_name_counts_as_resolvable_only_when_the_caller_resolved_it() -> None:
    entity = (("ip", "broker.example"),)
    assert messages(alter_client_quotas(EMPTY_IMAGE, [alter(
        entity, connection_creation_rate=3)], resolved_hosts=frozenset({"broker.example"}))) \
        == [None]


def describe(image: MetadataImage, *components: tuple[str, int, str | None],
             strict: bool = False) -> list[tuple[tuple[str, str | None], ...]]:
    return [entity for entity, _ in describe_client_quotas(
        image, [QuotaFilterComponent(*c) for c in components], strict)]


@pytest.fixture
def quotas() -> MetadataImage:
    entities = [ALICE, DEFAULT_USER, APP, ALICE_APP, (("user", "bob"), ("client-id", None)),
                (("ip", "10.0.0.1"),), (("ip", None),)]
    def key(e: tuple[tuple[str, str | None], ...]) -> str:
        if e == ALICE:
            return "producer_byte_rate"
        return "connection_creation_rate" if e[0][0] == "ip" else "consumer_byte_rate"

    return commit(EMPTY_IMAGE, alter_client_quotas(EMPTY_IMAGE, [
        alter(e, **{key(e): 10}) for e in entities]))


def test_describe_filters_match_as_kafkas(quotas: MetadataImage) -> None:
    E, D, S = MatchType.EXACT, MatchType.DEFAULT, MatchType.SPECIFIED
    assert len(describe(quotas)) == 7
    assert describe(quotas, strict=True) == []
    assert describe(quotas, ("user", E, "alice")) == [
        (("client-id", "app"), ("user", "alice")), (("user", "alice"),)]
    assert describe(quotas, ("user", E, "alice"), strict=True) == [(("user", "alice"),)]
    assert describe(quotas, ("user", D, None)) == [(("user", None),)]
    assert describe(quotas, ("user", S, None), strict=True) == [
        (("user", None),), (("user", "alice"),)]
    assert describe(quotas, ("user", S, None), ("client-id", S, None)) == [
        (("client-id", None), ("user", "bob")), (("client-id", "app"), ("user", "alice"))]
    assert describe(quotas, ("client-id", D, None), ("user", E, "bob")) == [
        (("client-id", None), ("user", "bob"))]
    assert describe(quotas, ("ip", S, None)) == [(("ip", None),), (("ip", "10.0.0.1"),)]
    assert describe(quotas, ("user", E, "nobody")) == []
    [(_, values)] = describe_client_quotas(
        quotas, [QuotaFilterComponent("user", E, "alice")], True)
    assert dict(values) == {"producer_byte_rate": 10.0}


@pytest.mark.parametrize(("components", "code", "message"), [
    ([("", 0, "x")], Errors.INVALID_REQUEST, "Invalid empty entity type."),
    ([("user", 2, None), ("user", 0, "a")], Errors.INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("group", 2, None)], Errors.UNSUPPORTED_VERSION, "Unsupported entity type group"),
    ([("user", 0, None)], Errors.INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", 1, "a")], Errors.INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", 2, "a")], Errors.INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 7, None)], Errors.INVALID_REQUEST, "Unknown match type 7"),
    ([("ip", 2, None), ("client-id", 1, None)], Errors.INVALID_REQUEST,
     "Invalid entity filter component combination. IP filter component should not be used "
     "with user or clientId filter component."),
])
def test_bad_describe_filters_are_refused_whole(
    components: list[tuple[str, int, str | None]], code: Errors, message: str,
) -> None:
    with pytest.raises(ControllerApiError) as refused:
        describe(EMPTY_IMAGE, *components)
    assert (refused.value.error, refused.value.message) == (code, message)
