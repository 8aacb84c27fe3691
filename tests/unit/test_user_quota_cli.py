"""`kraft-admin users` and `kraft-admin quotas` (server/user_commands.py, quota_commands.py)
against a real one-voter controller: kafka-configs.sh's options, value syntax and output lines,
the credentials the controller stores for the password the tool salted, and the controller's
refusals as one line and exit 1."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from metadata.scram import ScramMechanism, credential_from_password, scram_credential
from server import admin_cli
from server.quota_commands import java_double
from server.user_commands import parse_scram_configs
from tests.unit.test_admin_service import AdminHarness

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminHarness]:
    harness = AdminHarness(tmp_path_factory.mktemp("users-cli"), brokers=())
    yield harness
    harness.close()


def cli(admin: AdminHarness, capsys: pytest.CaptureFixture[str], *args: str
        ) -> tuple[int, str, str]:
    code = admin_cli.main(["--bootstrap-server", admin.endpoint, *args])
    out, err = capsys.readouterr()
    return code, out, err


def ok(admin: AdminHarness, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = cli(admin, capsys, *args)
    assert (code, err) == (0, ""), err
    return out


def fails(admin: AdminHarness, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = cli(admin, capsys, *args)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1, err
    return err.removeprefix("kraft-admin: ").rstrip("\n")


def test_users_alter_stores_what_the_password_derives_and_describe_shows_no_keys(
    admin: AdminHarness, capsys: pytest.CaptureFixture[str],
) -> None:
    out = ok(admin, capsys, "users", "--alter", "--entity-name", "alice", "--add-config",
             "SCRAM-SHA-512=[iterations=8192,password=alice-secret],"
             "SCRAM-SHA-256=[password=other]")
    assert out == "Completed updating config for user alice.\n"
    stored = scram_credential(admin.image, "alice", SHA512)
    assert stored is not None and stored == credential_from_password(
        SHA512, "alice-secret", stored.salt, 8192)
    other = scram_credential(admin.image, "alice", SHA256)
    assert other is not None and other.iterations == 4096 and other.salt != stored.salt
    ok(admin, capsys, "users", "--alter", "--entity-name", "bob", "--add-config",
       "SCRAM-SHA-256=[password=b]")
    described = ok(admin, capsys, "users", "--describe")
    assert described == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096, "
        "SCRAM-SHA-512=iterations=8192\n"
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096\n")
    assert ok(admin, capsys, "users", "--describe", "--entity-name", "carol") == (
        "Error retrieving SCRAM credential configs for user-principal 'carol': "
        "RESOURCE_NOT_FOUND: Attempt to describe a user credential that does not exist: "
        "carol\n")
    assert json.loads(ok(admin, capsys, "users", "--describe", "--entity-name", "bob",
                         "--json")) == [{"user": "bob", "credentials": [
                             {"mechanism": "SCRAM-SHA-256", "iterations": 4096}], "error": None}]
    ok(admin, capsys, "users", "--alter", "--entity-name", "alice", "--delete-config",
       "SCRAM-SHA-256")
    assert set(admin.image.scram["alice"]) == {SHA512}


def test_users_refusals_are_one_line(admin: AdminHarness,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert fails(admin, capsys, "users", "--alter", "--entity-name", "dave", "--add-config",
                 "SCRAM-SHA-512=[iterations=100,password=p]") == (
        "UNACCEPTABLE_CREDENTIAL: Too few iterations")
    assert fails(admin, capsys, "users", "--alter", "--entity-name", "dave", "--delete-config",
                 "SCRAM-SHA-512") == (
        "RESOURCE_NOT_FOUND: Attempt to delete a user credential that does not exist")
    assert fails(admin, capsys, "users", "--alter", "--entity-name", "dave", "--add-config",
                 "SCRAM-SHA-1=[password=p]").startswith("Invalid SCRAM mechanism 'SCRAM-SHA-1'")
    assert fails(admin, capsys, "users", "--alter", "--entity-name", "dave", "--add-config",
                 "SCRAM-SHA-512=[iterations=8192]") == "SCRAM-SHA-512 needs password=P"
    assert fails(admin, capsys, "users", "--alter", "--add-config",
                 "SCRAM-SHA-512=[password=p]") == "--alter needs exactly one --entity-name"
    assert "dave" not in admin.image.scram


def test_scram_add_config_parses_as_kafka_configs() -> None:
    # a comma inside the brackets separates settings, so a password cannot hold one
    with pytest.raises(Exception, match="expected iterations=N or password=P"):
        parse_scram_configs("SCRAM-SHA-256=[iterations=8192,password=a,b]")
    assert parse_scram_configs(" SCRAM-SHA-512=[password=x] , SCRAM-SHA-256=[iterations=5000,"
                               "password=y]") == [(SHA512, 4096, "x"), (SHA256, 5000, "y")]


def test_quotas_alter_and_describe_as_kafka_configs(admin: AdminHarness,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert ok(admin, capsys, "quotas", "--alter", "--entity-type", "users", "--entity-name",
              "alice", "--add-config", "producer_byte_rate=1048576,request_percentage=12.5") \
        == "Completed updating config for user alice.\n"
    assert ok(admin, capsys, "quotas", "--alter", "--entity-type", "users", "--entity-default",
              "--add-config", "consumer_byte_rate=20000000") == (
        "Completed updating default config for users in the cluster.\n")
    ok(admin, capsys, "quotas", "--alter", "--entity-type", "users", "--entity-name", "alice",
       "--entity-type", "clients", "--entity-name", "app", "--add-config",
       "producer_byte_rate=2048")
    ok(admin, capsys, "quotas", "--alter", "--entity-type", "ips", "--entity-name", "10.0.0.1",
       "--add-config", "connection_creation_rate=10")
    assert ok(admin, capsys, "quotas", "--describe") == (
        "Quota configs for user-principal 'alice', client-id 'app' are "
        "producer_byte_rate=2048.0\n"
        "Quota configs for ip '10.0.0.1' are connection_creation_rate=10.0\n"
        "Quota configs for the default user-principal are consumer_byte_rate=2.0E7\n"
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0, "
        "request_percentage=12.5\n")
    # kafka-configs.sh's containsOnly: users alone, any name (the default included)
    assert ok(admin, capsys, "quotas", "--describe", "--entity-type", "users").splitlines() == [
        "Quota configs for the default user-principal are consumer_byte_rate=2.0E7",
        "Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0, "
        "request_percentage=12.5"]
    assert json.loads(ok(admin, capsys, "quotas", "--describe", "--entity-type", "users",
                         "--entity-name", "alice", "--entity-type", "clients",
                         "--entity-name", "app", "--json")) == [
        {"entity": {"user": "alice", "client-id": "app"}, "quotas": {"producer_byte_rate": 2048.0}}]
    ok(admin, capsys, "quotas", "--alter", "--entity-type", "users", "--entity-name", "alice",
       "--delete-config", "request_percentage")
    assert dict(admin.image.client_quotas[(("user", "alice"),)]) == {
        "producer_byte_rate": 1048576.0}


def test_quotas_refusals_are_one_line(admin: AdminHarness,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert fails(admin, capsys, "quotas", "--alter", "--entity-type", "users", "--entity-name",
                 "eve", "--add-config", "producer_byte_rate=10.5") == (
        "INVALID_REQUEST: producer_byte_rate cannot be a fractional value.")
    assert fails(admin, capsys, "quotas", "--alter", "--entity-type", "ips", "--entity-name",
                 "10.0.0.2", "--entity-type", "users", "--entity-default", "--add-config",
                 "connection_creation_rate=1").startswith(
        "INVALID_REQUEST: Invalid quota entity combination")
    assert fails(admin, capsys, "quotas", "--alter", "--entity-type", "users", "--entity-name",
                 "eve", "--add-config", "producer_byte_rate=fast") == (
        "Invalid value 'fast' for producer_byte_rate: expected a number")
    assert fails(admin, capsys, "quotas", "--alter", "--entity-type", "users",
                 "--add-config", "producer_byte_rate=1") == (
        "--alter needs --entity-type with --entity-name or --entity-default")
    with pytest.raises(SystemExit):
        admin_cli.main(["--bootstrap-server", admin.endpoint, "quotas", "--describe",
                        "--entity-name", "x"])
    assert (("user", "eve"),) not in admin.image.client_quotas


def test_java_double_prints_as_kafka_configs() -> None:
    assert [java_double(v) for v in (1048576.0, 12.5, 2e7, 10485760.0, 0.0005, 1e19, 0.001)] \
        == ["1048576.0", "12.5", "2.0E7", "1.048576E7", "5.0E-4", "1.0E19", "0.001"]


def test_both_groups_have_help(capsys: pytest.CaptureFixture[str]) -> None:
    for group in ("users", "quotas"):
        with pytest.raises(SystemExit):
            admin_cli.main([group, "--help"])
        assert "--describe" in capsys.readouterr().out
