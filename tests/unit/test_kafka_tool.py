"""server/kafka_tool.py: the run of a `kraft-admin groups` / `transactions` command (its admin
client built from the arguments, closed after the handler, failures as CommandError)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from server.admin_client import CommandError
from server.group_client import GroupAdmin, GroupCommandError
from server.kafka_tool import run_command


class RecordingAdmin(GroupAdmin):
    closed = 0

    async def close(self) -> None:
        RecordingAdmin.closed += 1
        await super().close()


def args(command: str, command_config: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(bootstrap_server="127.0.0.1:9092,127.0.0.2:9093",
                              command_config=command_config, command=command)


async def describe(admin: RecordingAdmin, parsed: argparse.Namespace) -> str:
    return f"{parsed.command} over {','.join(admin.bootstrap)}"


async def unreachable(admin: RecordingAdmin, parsed: argparse.Namespace) -> str:
    raise GroupCommandError("no bootstrap server answered")


HANDLERS = {"describe": describe, "unreachable": unreachable}


def test_the_handler_runs_on_an_admin_of_the_servers_and_the_admin_is_closed() -> None:
    RecordingAdmin.closed = 0
    assert run_command(args("describe"), RecordingAdmin, HANDLERS) == (
        "describe over 127.0.0.1:9092,127.0.0.2:9093")
    assert RecordingAdmin.closed == 1


def test_a_connection_failure_is_a_command_error_after_the_admin_is_closed() -> None:
    RecordingAdmin.closed = 0
    with pytest.raises(CommandError, match="no bootstrap server answered"):
        run_command(args("unreachable"), RecordingAdmin, HANDLERS)
    assert RecordingAdmin.closed == 1


def test_a_bad_command_config_is_a_command_error_before_any_connection(tmp_path: Path) -> None:
    RecordingAdmin.closed = 0
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=CARRIER_PIGEON\n")
    with pytest.raises(CommandError, match=r"security\.protocol"):
        run_command(args("describe", str(config)), RecordingAdmin, HANDLERS)
    assert RecordingAdmin.closed == 0
