"""What `kraft-admin groups` (server/group_tool.py) and `kraft-admin transactions`
(server/txn_tool.py) share: one command's run over a Kafka admin client of the broker's Kafka
listener, built from --bootstrap-server and --command-config and closed after the command."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from server.admin_client import CommandError, parse_servers
from server.group_client import GroupAdmin, GroupCommandError
from server.kafka_client_config import KafkaClientConfigError, load_kafka_client_config

AdminT = TypeVar("AdminT", bound=GroupAdmin)  # TxnAdmin is one


def run_command(args: argparse.Namespace, admin_type: type[AdminT],
                handlers: Mapping[str, Callable[[AdminT, argparse.Namespace], Awaitable[str]]],
                ) -> str:
    """The output of `handlers[args.command]`; a bad config file or the connection's own
    failure (no bootstrap server answered: GroupCommandError) is a CommandError."""
    servers = parse_servers(getattr(args, "bootstrap_server", None))
    try:
        config = load_kafka_client_config(getattr(args, "command_config", None))
    except KafkaClientConfigError as exc:
        raise CommandError(str(exc)) from None
    admin = admin_type(servers, config.ssl_context, sasl=config.sasl_exchange)
    handler = handlers[args.command]

    async def main() -> str:
        try:
            return await handler(admin, args)
        finally:
            await admin.close()

    try:
        return asyncio.run(main())
    except GroupCommandError as exc:
        raise CommandError(str(exc)) from exc
