"""SCRAM credentials and client quotas as kraft-snapshot shows them: users and mechanisms with
their iterations, never a salt or key (as kafka-metadata-shell redacts them), and each quota
entity's values.

    /scram/<mechanism>/<user>          iterations (kafka-metadata-shell's /image/scram)
    /clientQuotas/<entity>/<key>       value (its /image/clientQuotas); the entity is named
                                       like `user(alice)_clientId(app)`, `user(<default>)`

A `/` or `%` in a name is written %2F / %25, so every name is one path component.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metadata.image import MetadataImage
from metadata.scram import ScramCredential, ScramMechanism
from metadata.security_records import QuotaEntity

DEFAULT_NAME = "<default>"
# Kafka's ClientQuotasImageNode order and names of the entity parts.
_PARTS = (("client-id", "clientId"), ("ip", "ip"), ("user", "user"))
Leaves = dict[str, dict[str, tuple[Any, str]]]  # directory -> name -> (JSON, text)


def escape(name: str) -> str:
    return name.replace("%", "%25").replace("/", "%2F")


def entity_label(entity: QuotaEntity) -> str:
    parts = dict(entity)
    return "_".join(f"{label}({DEFAULT_NAME if parts[kind] is None else escape(parts[kind] or '')})"
                    for kind, label in _PARTS if kind in parts)


def credential_json(credential: ScramCredential) -> dict[str, Any]:
    return {"iterations": credential.iterations}


def _mechanism_name(code: int) -> str:
    return ScramMechanism.of_code(code).mechanism_name


def scram_leaves(image: MetadataImage) -> Leaves:
    """Mechanism -> user -> (JSON, text)."""
    leaves: Leaves = {}
    for user, credentials in image.scram.items():
        for mechanism, credential in credentials.items():
            leaves.setdefault(_mechanism_name(mechanism), {})[escape(user)] = (
                credential_json(credential),
                f"iterations={credential.iterations} (salt and keys not shown)")
    return leaves


def quota_leaves(image: MetadataImage) -> Leaves:
    """Entity -> key -> (value, text)."""
    return {entity_label(entity): {key: (value, repr(value)) for key, value in values.items()}
            for entity, values in image.client_quotas.items()}


def scram_flat(image: MetadataImage) -> Mapping[str, ScramCredential]:
    """`<mechanism>/<user>` -> credential, for diffs (a replaced credential differs)."""
    return {f"{_mechanism_name(mechanism)}/{escape(user)}": credential
            for user, credentials in image.scram.items()
            for mechanism, credential in credentials.items()}


def quota_flat(image: MetadataImage) -> Mapping[str, float]:
    """`<entity>/<key>` -> value, for diffs."""
    return {f"{entity_label(entity)}/{key}": value
            for entity, values in image.client_quotas.items() for key, value in values.items()}
