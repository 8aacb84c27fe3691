"""The server layer: role config files, storage formatting, process start-up, admin tools."""

from kraft.server.config import (
    ConfigError,
    Endpoint,
    Listener,
    NodeConfig,
    load_config,
    parse_config,
)
from kraft.server.meta_properties import (
    MetaProperties,
    StorageError,
    ensure_formatted,
    random_uuid,
)

__all__ = [
    "ConfigError",
    "Endpoint",
    "Listener",
    "MetaProperties",
    "NodeConfig",
    "StorageError",
    "ensure_formatted",
    "load_config",
    "parse_config",
    "random_uuid",
]
