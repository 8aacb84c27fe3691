"""KIP-853's ACLs: changing the voter set needs ALTER on the cluster, a voter updating its own
entry CLUSTER_ACTION (spec section 0)."""

from __future__ import annotations

import pytest

from kraft.security.authorizer import METHOD_OPERATIONS
from metadata.authorizer.model import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.authorizer.standard import StandardAuthorizer

OPS = "User:CN=ops"


def granted(operation: AclOperation, *, everyone: bool = False) -> StandardAuthorizer:
    authorizer = StandardAuthorizer(allow_everyone_if_no_acl_found=everyone)
    authorizer.load([AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, OPS,
                                "*", operation, AclPermissionType.ALLOW)])
    return authorizer


@pytest.mark.parametrize(
    ("method", "operation"),
    [("AddRaftVoter", "ALTER"), ("RemoveRaftVoter", "ALTER"),
     ("UpdateRaftVoter", "CLUSTER_ACTION")],
)
def test_voter_changes_need_their_operation(method: str, operation: str) -> None:
    path = f"/kraft.raft.v1.Quorum/{method}"
    assert METHOD_OPERATIONS[path] == operation
    assert granted(AclOperation[operation]).authorize_cluster(OPS, "127.0.0.1", operation)
    # Reading the cluster never allows a membership change, even open to everyone.
    reader = granted(AclOperation.DESCRIBE, everyone=True)
    assert not reader.authorize_cluster(OPS, "127.0.0.1", METHOD_OPERATIONS[path])
