"""kraft-snapshot and SCRAM credentials / client quotas: a log that creates, replaces and
removes credentials and quotas, with a snapshot in the middle. The tree shows users, mechanisms
and iterations, diff what changed, dump every record — and no output ever holds a salt or key,
raw or in base64 (kafka-dump-log would print them)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from kraft.log.base import OffsetAndEpoch
from kraft.log.codec import LEADER_CHANGE, encode_control_record
from kraft.log.segmented import SegmentedLog
from kraft.log.snapshots import FileSnapshotStore
from metadata.loader import MetadataLoader
from metadata.records import FeatureLevelRecord, Record, encode_record
from metadata.scram import ScramMechanism, credential_from_password
from metadata.security_records import (
    ClientQuotaRecord,
    EntityData,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from metadata.topics import METADATA_PARTITION_DIR
from snapshots import cli
from snapshots.writer import write_image_snapshot

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def scram(user: str, mechanism: ScramMechanism, password: str, iterations: int = 4096
          ) -> UserScramCredentialRecord:
    c = credential_from_password(mechanism, password, f"salt-{user}-{password}".encode(),
                                 iterations)
    return UserScramCredentialRecord(user, mechanism, c.salt, c.stored_key, c.server_key,
                                     iterations)


ALICE_1 = scram("alice", SHA512, "one", 8192)
ALICE_2 = scram("alice", SHA512, "two", 8192)  # a new password, same iterations
ODD = scram("a/b%c", SHA256, "x")
APP = (EntityData("user", "alice"), EntityData("client-id", "app"))
BATCHES: list[list[Record]] = [
    [FeatureLevelRecord("metadata.version", 21)],                                    # 1
    [ALICE_1, ODD, ClientQuotaRecord(APP, "producer_byte_rate", 1024.0)],             # 2-4
    [ClientQuotaRecord((EntityData("user", None),), "consumer_byte_rate", 2048.0)],  # 5
    [ALICE_2, RemoveUserScramCredentialRecord("a/b%c", SHA256),
     ClientQuotaRecord(APP, "producer_byte_rate", 0.0, remove=True)],                # 6-8
]
END = 9
SECRETS = [s for r in (ALICE_1, ALICE_2, ODD) for s in (r.salt, r.stored_key, r.server_key)]


@pytest.fixture(scope="module")
def meta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scram-meta")
    directory = root / METADATA_PARTITION_DIR
    log = SegmentedLog(directory)
    log.append_as_leader([encode_control_record(LEADER_CHANGE, {
        "leaderId": 1, "voters": [1], "grantingVoters": [1]})], 1, 1000, control=True)
    for records in BATCHES:
        log.append_as_leader([encode_record(r) for r in records], 1, 2000 + log.end_offset)
    log.flush()
    assert log.end_offset == END
    log.close()
    log = SegmentedLog(directory)
    image = MetadataLoader(off_loop_snapshots=False).catch_up(log, 6)
    log.close()
    write_image_snapshot(FileSnapshotStore(directory), image, OffsetAndEpoch(6, 1),
                         image.provenance.timestamp_ms)
    return root


def run(capsys: pytest.CaptureFixture[str], *args: object) -> str:
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    for secret in SECRETS:  # not in base64, not in hex
        for form in (base64.b64encode(secret).decode(), secret.hex()):
            assert form not in out
    for salt in (ALICE_1.salt, ALICE_2.salt, ODD.salt):  # readable salts: not raw either
        assert salt.decode() not in out
    return out


def test_the_tree_shows_users_mechanisms_iterations_and_quotas(meta: Path,
                                                               capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    assert run(capsys, "tree", meta, "/scram", "--at-offset", 6).splitlines() == [
        "scram:",
        "  SCRAM-SHA-256:",
        "    a%2Fb%25c: iterations=4096 (salt and keys not shown)",
        "  SCRAM-SHA-512:",
        "    alice: iterations=8192 (salt and keys not shown)"]
    assert json.loads(run(capsys, "cat", meta, "/scram/SCRAM-SHA-512/alice", "--json")) == {
        "iterations": 8192}
    assert run(capsys, "ls", meta, "/clientQuotas", "--at-offset", 6).split() == [
        "clientId(app)_user(alice)", "user(<default>)"]
    assert run(capsys, "cat", meta, "/clientQuotas/user(<default>)/consumer_byte_rate") \
        .strip() == "2048.0"
    assert run(capsys, "ls", meta, "/clientQuotas").split() == ["user(<default>)"]


def test_diff_and_dump_never_show_a_salt_or_key(meta: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    lines = run(capsys, "diff", meta, "--from", 5, "--to", END).splitlines()[2:]
    assert sorted(lines) == sorted([
        "- /clientQuotas/clientId(app)_user(alice)/producer_byte_rate 1024.0",
        "+ /clientQuotas/user(<default>)/consumer_byte_rate 2048.0",
        "- /scram/SCRAM-SHA-256/a%2Fb%25c {iterations=4096}",
        "~ /scram/SCRAM-SHA-512/alice {iterations=8192} -> {iterations=8192}"])
    dumped = run(capsys, "dump", meta / METADATA_PARTITION_DIR / f"{0:020d}.log")
    assert dumped.count('"type":"USER_SCRAM_CREDENTIAL_RECORD"') == 3
    assert ('"data":{"name":"alice","mechanism":2,"salt":"[redacted]","storedKey":"[redacted]",'
            '"serverKey":"[redacted]","iterations":8192}') in dumped
    snapshot = meta / METADATA_PARTITION_DIR / f"{6:020d}-{1:010d}.checkpoint"
    assert run(capsys, "dump", snapshot, "--json").count("[redacted]") == 6
