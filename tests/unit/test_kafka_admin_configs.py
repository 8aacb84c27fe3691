"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs on the Kafka front (broker/kafka/
admin_configs_api.py): the broker's local checks (Kafka's ConfigAdminManager.preprocess) and
the answers of the admin operations, through the whole codec."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.kafka.codec import build
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.config_def import ConfigType
from metadata.configs import AlterConfigOp, ConfigSource
from metadata.image import ConfigResource
from metadata.records import ConfigResourceType
from tests.unit.test_kafka_admin_topics import TIMEOUT, AdminFront, creatable, run

TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER


async def topic(front: AdminFront, name: str = "t") -> None:
    m = front.module(ApiKey.CREATE_TOPICS, 7)
    await front.call(ApiKey.CREATE_TOPICS, 7, topics=(creatable(m, name),), timeout=TIMEOUT,
                     validate_only=False)


async def describe(front: AdminFront, version: int, *resources: tuple[int, str, Any],
                   synonyms: bool = False, documentation: bool = False) -> list[Any]:
    m = front.module(ApiKey.DESCRIBE_CONFIGS, version)
    response = await front.call(
        ApiKey.DESCRIBE_CONFIGS, version, include_synonyms=synonyms,
        include_documentation=documentation, resources=tuple(
            build(m, "DescribeConfigsResource", resource_type=t, resource_name=n,
                  configuration_keys=keys) for t, n, keys in resources))
    return list(response.results)


async def alter(front: AdminFront, *resources: tuple[int, str, list[tuple[str, int, str | None]]],
                validate_only: bool = False) -> list[tuple[int, str | None]]:
    m = front.module(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    response = await front.call(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, validate_only=validate_only, resources=tuple(
            build(m, "AlterConfigsResource", resource_type=t, resource_name=n, configs=tuple(
                build(m, "AlterableConfig", name=k, config_operation=op, value=v)
                for k, op, v in changes))
            for t, n, changes in resources))
    return [(r.error_code, r.error_message) for r in response.responses]


def test_describe_configs_by_version(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        await topic(front)
        [v1] = await describe(front, 1, (TOPIC, "t", ("retention.ms",)), synonyms=True)
        [entry] = v1.configs
        assert (entry.name, entry.value, entry.config_source) == (
            "retention.ms", "604800000", ConfigSource.DEFAULT_CONFIG)
        assert [(s.name, s.source) for s in entry.synonyms] == [
            ("log.retention.ms", ConfigSource.DEFAULT_CONFIG)]
        [v4] = await describe(front, 4, (TOPIC, "t", None), documentation=True)
        by_name = {c.name: c for c in v4.configs}
        assert by_name["cleanup.policy"].config_type == ConfigType.LIST
        assert by_name["retention.ms"].documentation
        assert by_name["retention.ms"].synonyms == ()  # not asked for
        [plain] = await describe(front, 4, (TOPIC, "t", ("retention.ms",)))
        assert plain.configs[0].documentation is None

    run(tmp_path, scenario)


def test_describe_configs_refusals(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        results = await describe(front, 4, (TOPIC, "missing", None), (BROKER, "2", None),
                                 (BROKER, "", ("num.partitions",)), (BROKER, "1", None),
                                 (8, "1", None))
        assert [(r.error_code, r.error_message) for r in results[:2]] == [
            (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
            (Errors.INVALID_REQUEST,
             "Unexpected broker id, expected 1 or empty string, but received 2")]
        assert results[0].configs == () and results[1].configs == ()
        assert [c.name for c in results[2].configs] == ["num.partitions"]
        assert results[3].error_code == Errors.NONE and results[3].configs
        assert results[4].error_code == Errors.INVALID_REQUEST  # BROKER_LOGGER: not served

    run(tmp_path, scenario)


def test_incremental_alter_sets_and_describe_shows_the_dynamic_value(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        await topic(front)
        assert await alter(front, (TOPIC, "t", [("retention.ms", AlterConfigOp.SET, "5000")]),
                           validate_only=True) == [(Errors.NONE, None)]
        [unchanged] = await describe(front, 4, (TOPIC, "t", ("retention.ms",)))
        assert unchanged.configs[0].value == "604800000"
        assert await alter(front, (TOPIC, "t", [("retention.ms", AlterConfigOp.SET, "5000")]),
                           (BROKER, "", [("num.partitions", AlterConfigOp.SET, "4")])) == [
            (Errors.NONE, None), (Errors.NONE, None)]
        [changed] = await describe(front, 4, (TOPIC, "t", ("retention.ms",)))
        assert (changed.configs[0].value, changed.configs[0].config_source) == (
            "5000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        assert front.image.cluster_setting("num.partitions") == 4
        assert await alter(front, (TOPIC, "t", [("retention.ms", AlterConfigOp.DELETE, None)])
                           ) == [(Errors.NONE, None)]
        [deleted] = await describe(front, 4, (TOPIC, "t", ("retention.ms",)))
        assert deleted.configs[0].config_source == ConfigSource.DEFAULT_CONFIG

    run(tmp_path, scenario)


def test_incremental_alter_refusals(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        await topic(front)
        await topic(front, "u")
        results = await alter(
            front, (TOPIC, "t", [("retention.ms", AlterConfigOp.APPEND, "1")]),
            (TOPIC, "missing", [("retention.ms", AlterConfigOp.SET, "1")]),
            (TOPIC, "dup", [("retention.ms", AlterConfigOp.SET, "1")]),
            (TOPIC, "dup", [("retention.ms", AlterConfigOp.SET, "2")]),
            (TOPIC, "keys", [("retention.ms", AlterConfigOp.SET, "1"),
                             ("retention.ms", AlterConfigOp.DELETE, None)]),
            (TOPIC, "null", [("retention.ms", AlterConfigOp.SET, None)]),
            (BROKER, "3", [("num.partitions", AlterConfigOp.SET, "2")]),
            (TOPIC, "u", [("no.such.key", AlterConfigOp.SET, "1")]))
        codes = [code for code, _ in results]
        assert codes == [Errors.INVALID_CONFIG, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                         Errors.INVALID_REQUEST, Errors.INVALID_REQUEST, Errors.INVALID_REQUEST,
                         Errors.INVALID_REQUEST, Errors.INVALID_REQUEST, Errors.INVALID_CONFIG]
        assert results[2][1] == "Each resource must appear at most once."
        assert results[4][1] == "Error due to duplicate config keys: ['retention.ms']"
        assert results[5][1] == "Null value not supported for : retention.ms"
        assert results[6][1] == \
            "Unexpected broker id, expected 1 or empty string, but received 3"
        assert front.image.topic_setting("t", "retention.ms") == 604800000

    run(tmp_path, scenario)


# ---- AlterConfigs (legacy: replaces the whole set) ----

async def replace(front: AdminFront, version: int,
                  *resources: tuple[int, str, dict[str, str | None]]) -> list[int]:
    m = front.module(ApiKey.ALTER_CONFIGS, version)
    response = await front.call(
        ApiKey.ALTER_CONFIGS, version, validate_only=False, resources=tuple(
            build(m, "AlterConfigsResource", resource_type=t, resource_name=n, configs=tuple(
                build(m, "AlterableConfig", name=k, value=v) for k, v in configs.items()))
            for t, n, configs in resources))
    return [r.error_code for r in response.responses]


def test_alter_configs_replaces_the_whole_set(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        await topic(front)
        assert await alter(front, (TOPIC, "t", [("retention.ms", AlterConfigOp.SET, "5000"),
                                                ("segment.ms", AlterConfigOp.SET, "60000")])
                           ) == [(Errors.NONE, None)]
        assert await replace(front, 2, (TOPIC, "t", {"segment.ms": "70000",
                                                     "cleanup.policy": "compact"})) == [
            Errors.NONE]
        own = dict(front.image.config(ConfigResource(TOPIC, "t")))
        assert own == {"segment.ms": "70000", "cleanup.policy": "compact"}  # retention.ms gone
        assert await replace(front, 0, (TOPIC, "t", {})) == [Errors.NONE]
        assert dict(front.image.config(ConfigResource(TOPIC, "t"))) == {}
        assert await replace(front, 1, (TOPIC, "t", {"retention.ms": None}),
                             (TOPIC, "missing", {"retention.ms": "1"})) == [
            Errors.INVALID_REQUEST, Errors.UNKNOWN_TOPIC_OR_PARTITION]

    run(tmp_path, scenario)
