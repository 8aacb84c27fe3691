"""`kraft-storage format --add-scram` (KIP-900, server/bootstrap_metadata.py): Kafka's
ScramParser syntax and refusals, the credential written into bootstrap.checkpoint (never the
password), and a new cluster's first active controller appending it, so the user is in the
committed image."""

from __future__ import annotations

import asyncio
import base64
import random
from pathlib import Path

import pytest

from kraft.core.config import RaftConfig
from kraft.log.meta_properties import StorageError
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.raft_node import RaftNode
from metadata.scram import (
    ScramMechanism,
    credential_from_password,
    salted_password,
    scram_credential,
)
from metadata.security_records import UserScramCredentialRecord
from server.bootstrap_metadata import (
    BOOTSTRAP_CHECKPOINT,
    parse_add_scram,
    random_salt,
    read_bootstrap_records,
)
from server.config import load_config
from tests.unit.controller_harness import attach_controller
from tests.unit.test_admin_service import until
from tests.unit.test_storage_cli import CLUSTER, run, write_config

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def test_a_password_becomes_keys_with_kafkas_defaults() -> None:
    record = parse_add_scram(" SCRAM-SHA-512=[name=admin,password=\"s3cret\"] ")
    assert (record.name, record.mechanism, record.iterations) == ("admin", SHA512, 4096)
    assert record.salt.isalnum() and len(record.salt) <= 26  # base 36 of 130 random bits
    assert (record.salt, record.stored_key, record.server_key) == tuple(
        getattr(credential_from_password(SHA512, "s3cret", record.salt, 4096), field)
        for field in ("salt", "stored_key", "server_key"))
    assert b"s3cret" not in repr(record).encode()
    assert random_salt() != random_salt()


def test_salt_iterations_and_a_salted_password_are_taken_as_given() -> None:
    salt = base64.b64encode(b"pepper").decode()
    record = parse_add_scram(f"SCRAM-SHA-256=[name=svc,salt={salt},iterations=8192,"
                             "password=pw]")
    assert record == _record("svc", SHA256, b"pepper", 8192, "pw")
    given = base64.b64encode(salted_password(SHA256, b"pw", b"pepper", 8192)).decode()
    assert parse_add_scram(f"SCRAM-SHA-256=[name=svc,salt={salt},iterations=8192,"
                           f"saltedpassword={given}]") == record


def _record(name: str, mechanism: ScramMechanism, salt: bytes, iterations: int,
            password: str) -> UserScramCredentialRecord:
    c = credential_from_password(mechanism, password, salt, iterations)
    return UserScramCredentialRecord(name, mechanism, salt, c.stored_key, c.server_key,
                                     iterations)


@pytest.mark.parametrize(("argument", "message"), [
    ("SCRAM-SHA-512", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-512'"),
    ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    ("SCRAM-SHA-512=name=a,password=b]", "Expected configuration string to start with ["),
    ("SCRAM-SHA-512=[name=a,password=b", "Expected configuration string to end with ]"),
    ("SCRAM-SHA-512=[password=b]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-512=[name=a]", "You must supply one of 'password' or 'saltedpassword' to "
     "add-scram"),
    ("SCRAM-SHA-512=[name=a,saltedpassword=YWJj]",
     "You must supply 'salt' with 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-512=[name=a,salt=!!,password=b]", "Failed to decode given salt: !!"),
    ("SCRAM-SHA-512=[name=a,iterations=many,password=b]",
     "Failed to parse iterations count: many"),
    ("SCRAM-SHA-512=[name=a,password=b,colour=blue,size=9]",
     "Unknown SCRAM configurations: colour, size"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=4095]",
     "The 'iterations' value must be >= 4096 for add-scram using SCRAM-SHA-512"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=16385]",
     "The 'iterations' value must be <= 16384 for add-scram using SCRAM-SHA-256"),
    ("SCRAM-SHA-512=[name=a,password]", "No equals sign found in SCRAM component: password"),
])
def test_kafkas_refusals(argument: str, message: str) -> None:
    with pytest.raises(StorageError) as refused:
        parse_add_scram(argument)
    assert str(refused.value) == message


def test_format_writes_the_users_into_bootstrap_checkpoint_and_the_first_controller_commits_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    config_path = write_config(tmp_path)
    code, out, err = run(capsys, "format", "-t", CLUSTER, "-c", config_path, "--add-scram",
                         "SCRAM-SHA-512=[name=admin,password=admin-secret]", "-S",
                         "SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=8192]")
    assert (code, err) == (0, "")
    assert "with SCRAM credentials for admin (SCRAM-SHA-512), alice (SCRAM-SHA-256)." in out
    checkpoint = tmp_path / "data" / BOOTSTRAP_CHECKPOINT
    assert b"admin-secret" not in checkpoint.read_bytes()
    config = load_config(config_path)
    records = read_bootstrap_records(config)
    assert [(r.name, r.mechanism) for r in records] == [  # type: ignore[union-attr]
        ("admin", SHA512), ("alice", SHA256)]

    async def start() -> None:
        node = RaftNode(RaftConfig(CLUSTER, 1, {1: "127.0.0.1:1"}), SegmentedLog(tmp_path / "log"),
                        QuorumStateStore(tmp_path / "quorum-state"), rng=random.Random(1))
        controller = attach_controller(node, noop_interval_ms=0, bootstrap_records=records)
        await node.start()
        try:
            await until(lambda: "metadata.version" in controller.committed_image.features)
            image = controller.committed_image
            admin = scram_credential(image, "admin", SHA512)
            assert admin is not None and admin.iterations == 4096
            alice = scram_credential(image, "alice", SHA256)
            assert alice is not None
            assert alice == credential_from_password(SHA256, "alice-secret", alice.salt, 8192)
        finally:
            await controller.close()
            await node.stop()

    asyncio.run(start())


def test_a_bad_argument_fails_the_format_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    config_path = write_config(tmp_path)
    code, _, err = run(capsys, "format", "-t", CLUSTER, "-c", config_path, "--add-scram",
                       "SCRAM-SHA-512=[name=admin]")
    assert code == 1
    assert err == ("kraft-storage: error: You must supply one of 'password' or 'saltedpassword' "
                   "to add-scram\n")
    assert not (tmp_path / "data").exists()  # nothing formatted
    assert read_bootstrap_records(load_config(config_path)) == ()


def test_a_damaged_bootstrap_file_is_a_storage_error(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / BOOTSTRAP_CHECKPOINT).write_bytes(b"\x00" * 40)
    with pytest.raises(StorageError, match="cannot be read"):
        read_bootstrap_records(config)
