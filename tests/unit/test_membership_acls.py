"""KIP-853's ACLs: changing the voter set needs ALTER on the cluster, a voter updating its own
entry CLUSTER_ACTION (spec section 0)."""

from __future__ import annotations

import pytest

from kraft.security.authorizer import METHOD_OPERATIONS, Authorizer


@pytest.mark.parametrize(
    ("method", "operation"),
    [("AddRaftVoter", "Alter"), ("RemoveRaftVoter", "Alter"),
     ("UpdateRaftVoter", "ClusterAction")],
)
def test_voter_changes_need_their_operation(method: str, operation: str) -> None:
    path = f"/kraft.raft.v1.Quorum/{method}"
    assert METHOD_OPERATIONS[path] == operation
    granted = Authorizer(frozenset(), {"User:CN=ops": frozenset({operation})})
    assert granted.allows("User:CN=ops", METHOD_OPERATIONS[path])
    # Open reads never open a membership change.
    reader = Authorizer(frozenset(), {"User:CN=ops": frozenset({"Describe"})}, reads_open=True)
    assert not reader.allows("User:CN=ops", METHOD_OPERATIONS[path])
