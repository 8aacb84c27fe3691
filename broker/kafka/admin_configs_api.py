"""DescribeConfigs (API 32, v1-4), IncrementalAlterConfigs (API 44, v0-1) and the legacy
AlterConfigs (API 33, v0-2) on the admin operations: describes answer from this broker's
metadata image, alters are forwarded to the active controller. AlterConfigs replaces a
resource's whole set of dynamic configs: it becomes a SET of each key given and a DELETE of
every other key the resource has in this broker's image (a change committed meanwhile and not
yet seen here survives it; Kafka's controller applies the replacement against its own state).

Before forwarding, the broker makes Kafka's local checks (ConfigAdminManager.preprocess): a
resource named twice, a key named twice in one resource, a null value for SET/APPEND/SUBTRACT
and a BROKER resource that is neither "" (the cluster default) nor this broker refuse that
resource with INVALID_REQUEST. Resource types other than TOPIC and BROKER (BROKER_LOGGER,
CLIENT_METRICS, GROUP) are refused by the operations with INVALID_REQUEST.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from broker.kafka.admin_common import AdminBackend, call_controller, message, status_error
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.configs import AlterConfigOp
from metadata.image import ConfigResource, MetadataImage
from metadata.records import ConfigResourceType
from metadata.rpc import admin_pb2 as pb

Failure = tuple[int, str | None]
Key = tuple[int, str]
LOCAL_TIMEOUT_MS = 30_000  # neither API has a timeout field


def _wrong_broker(resource_type: int, name: str, broker_id: int) -> Failure | None:
    if resource_type == ConfigResourceType.BROKER and name not in ("", str(broker_id)):
        return Errors.INVALID_REQUEST, (f"Unexpected broker id, expected {broker_id} or "
                                        f"empty string, but received {name}")
    return None


# ---- DescribeConfigs ----

async def handle_describe_configs(admin: AdminBackend, broker_id: int, version: int,
                                  request: Any) -> Reply:
    module = response_module(ApiKey.DESCRIBE_CONFIGS, version)
    local: dict[int, Failure] = {}
    asked = []
    for index, r in enumerate(request.resources):
        failure = _wrong_broker(r.resource_type, r.resource_name, broker_id)
        if failure is not None:
            local[index] = failure
        else:
            asked.append(pb.DescribeConfigsResource(
                resource_type=r.resource_type, resource_name=r.resource_name,
                config_names=list(r.configuration_keys or ())))
    answered: Iterator[pb.DescribeConfigsResult] = iter(())
    whole: Failure | None = None
    if asked:
        response = await admin.call("DescribeConfigs", pb.DescribeConfigsRequest(resources=asked))
        whole = status_error(response)
        answered = iter(response.results)
    synonyms = getattr(request, "include_synonyms", False)
    documentation = getattr(request, "include_documentation", False)
    results = []
    for index, r in enumerate(request.resources):
        failure = local.get(index) or whole
        result = None if index in local or whole is not None else next(answered)
        if result is not None and result.error_code != Errors.NONE:
            failure = (result.error_code, message(result.error_code, result.error_message))
        configs: tuple[Any, ...] = ()
        if failure is None and result is not None:
            configs = tuple(_entry(module, e, synonyms, documentation) for e in result.configs)
        code, text = failure or (Errors.NONE, None)
        results.append(build(
            module, "DescribeConfigsResult", error_code=error_code(code), error_message=text,
            resource_type=r.resource_type, resource_name=r.resource_name, configs=configs))
    return Reply(build(module, "DescribeConfigsResponse", throttle_time=NO_THROTTLE,
                       results=tuple(results)))


def _entry(module: Any, entry: pb.ConfigEntry, synonyms: bool, documentation: bool) -> Any:
    return build(
        module, "DescribeConfigsResourceResult", name=entry.name,
        value=None if entry.is_sensitive else entry.value, read_only=entry.read_only,
        config_source=int(entry.source), is_sensitive=entry.is_sensitive,
        synonyms=tuple(build(module, "DescribeConfigsSynonym", name=s.name, value=s.value,
                             source=int(s.source)) for s in entry.synonyms) if synonyms else (),
        config_type=int(entry.config_type),
        documentation=entry.documentation if documentation else None)


# ---- IncrementalAlterConfigs ----

def _alter_failure(resource: Any, counts: Counter[Key], broker_id: int) -> Failure | None:
    """Kafka's local checks of an (Incremental)AlterConfigs resource; AlterConfigs' entries
    are all SETs."""
    if counts[(resource.resource_type, resource.resource_name)] > 1:
        return Errors.INVALID_REQUEST, "Each resource must appear at most once."
    keys = Counter(c.name for c in resource.configs)
    duplicated = sorted(name for name, n in keys.items() if n > 1)
    if duplicated:
        return Errors.INVALID_REQUEST, f"Error due to duplicate config keys: {duplicated}"
    for c in resource.configs:
        if c.value is None and getattr(c, "config_operation", AlterConfigOp.SET) \
                != AlterConfigOp.DELETE:
            return Errors.INVALID_REQUEST, f"Null value not supported for : {c.name}"
    return _wrong_broker(resource.resource_type, resource.resource_name, broker_id)


def _incremental(resource: Any) -> list[pb.AlterableConfig]:
    return [pb.AlterableConfig(name=c.name, op=c.config_operation, value=c.value or "")
            for c in resource.configs]


def _replacing(image: MetadataImage) -> Callable[[Any], list[pb.AlterableConfig]]:
    """AlterConfigs as incremental changes: SET what is given, DELETE the rest."""

    def changes(resource: Any) -> list[pb.AlterableConfig]:
        given = {c.name: c.value for c in resource.configs}
        current = image.config(ConfigResource(resource.resource_type, resource.resource_name))
        return [pb.AlterableConfig(name=name, op=pb.ALTER_CONFIG_OP_SET, value=value)
                for name, value in given.items()] + [
            pb.AlterableConfig(name=name, op=pb.ALTER_CONFIG_OP_DELETE)
            for name in sorted(current) if name not in given]

    return changes


async def handle_incremental_alter_configs(admin: AdminBackend, broker_id: int, version: int,
                                           request: Any) -> Reply:
    return await _alter(admin, broker_id, ApiKey.INCREMENTAL_ALTER_CONFIGS, version, request,
                        _incremental, "IncrementalAlterConfigsResponse")


async def handle_alter_configs(admin: AdminBackend, image: MetadataImage, broker_id: int,
                               version: int, request: Any) -> Reply:
    return await _alter(admin, broker_id, ApiKey.ALTER_CONFIGS, version, request,
                        _replacing(image), "AlterConfigsResponse")


async def _alter(admin: AdminBackend, broker_id: int, api_key: int, version: int, request: Any,
                 changes: Callable[[Any], list[pb.AlterableConfig]], response_name: str) -> Reply:
    module = response_module(api_key, version)
    counts = Counter((r.resource_type, r.resource_name) for r in request.resources)
    local: dict[int, Failure] = {}
    forwarded = []
    for index, r in enumerate(request.resources):
        failure = _alter_failure(r, counts, broker_id)
        if failure is not None:
            local[index] = failure
            continue
        forwarded.append(pb.AlterConfigsResource(
            resource_type=r.resource_type, resource_name=r.resource_name, configs=changes(r)))
    answered: Iterator[pb.AlterConfigsResourceResult] = iter(())
    whole: Failure | None = None
    if forwarded:
        response = await call_controller(
            admin, "IncrementalAlterConfigs",
            pb.IncrementalAlterConfigsRequest(resources=forwarded,
                                              validate_only=request.validate_only),
            LOCAL_TIMEOUT_MS)
        whole = status_error(response)
        answered = iter(response.results)
    responses = []
    for index, r in enumerate(request.resources):
        failure = local.get(index) or whole
        if index not in local and whole is None:
            result = next(answered)
            if result.error_code != Errors.NONE:
                failure = (result.error_code, message(result.error_code, result.error_message))
        code, text = failure or (Errors.NONE, None)
        responses.append(build(
            module, "AlterConfigsResourceResponse", error_code=error_code(code),
            error_message=text, resource_type=r.resource_type, resource_name=r.resource_name))
    return Reply(build(module, response_name, throttle_time=NO_THROTTLE,
                       responses=tuple(responses)))
