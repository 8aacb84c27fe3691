"""DescribeUserScramCredentials (API 50) and AlterUserScramCredentials (51), v0: translated
onto the admin operations (metadata/security_ops.py), which read the broker's committed image
for a description and forward alterations to the active controller, answered once committed.

Kafka's answers: a refusal of the whole request (CLUSTER_AUTHORIZATION_FAILED without DESCRIBE
or ALTER on the cluster, no controller in time) is DescribeUserScramCredentials' top-level
error, and the error of every user named in AlterUserScramCredentials; otherwise each user's
own result (metadata/scram.py has the rules). Keys never leave the controller: a description
holds mechanisms and iterations only.
"""

from __future__ import annotations

from typing import Any

from broker.kafka.admin_common import AdminBackend, call_controller, message, status_error
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.rpc import admin_pb2 as pb

# The request carries no timeout; a forwarded write waits for a controller this long
# (Kafka's default request.timeout.ms).
WRITE_TIMEOUT_MS = 30_000


def _error(code: int, text: str | None) -> dict[str, Any]:
    return {"error_code": error_code(code), "error_message": message(code, text)}


async def handle_describe_user_scram_credentials(admin: AdminBackend, version: int,
                                                 request: Any) -> Reply:
    module = response_module(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version)
    users = [u.name for u in request.users or ()]  # null or empty: every user
    response = await admin.call("DescribeUserScramCredentials",
                                pb.DescribeUserScramCredentialsRequest(users=users))
    failure = status_error(response)
    if failure is not None:
        return Reply(build(module, "DescribeUserScramCredentialsResponse",
                           throttle_time=NO_THROTTLE, results=(), **_error(*failure)))
    return Reply(build(
        module, "DescribeUserScramCredentialsResponse", throttle_time=NO_THROTTLE,
        **_error(Errors.NONE, None), results=tuple(
            build(module, "DescribeUserScramCredentialsResult", user=r.user,
                  **_error(r.error_code, r.error_message), credential_infos=tuple(
                      build(module, "CredentialInfo", mechanism=c.mechanism,
                            iterations=c.iterations) for c in r.credential_infos))
            for r in response.results)))


async def handle_alter_user_scram_credentials(admin: AdminBackend, version: int,
                                              request: Any) -> Reply:
    module = response_module(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, version)
    named = list(dict.fromkeys([d.name for d in request.deletions]
                               + [u.name for u in request.upsertions]))
    results: list[tuple[str, int, str | None]] = []
    if named:
        response = await call_controller(
            admin, "AlterUserScramCredentials", pb.AlterUserScramCredentialsRequest(
                deletions=[pb.ScramCredentialDeletion(name=d.name, mechanism=d.mechanism)
                           for d in request.deletions],
                upsertions=[pb.ScramCredentialUpsertion(
                    name=u.name, mechanism=u.mechanism, iterations=u.iterations, salt=u.salt,
                    salted_password=u.salted_password) for u in request.upsertions]),
            WRITE_TIMEOUT_MS)
        failure = status_error(response)
        if failure is not None:  # Kafka's getErrorResponse: every user named gets it
            results = [(user, *failure) for user in named]
        else:
            results = [(r.user, r.error_code, r.error_message) for r in response.results]
    return Reply(build(module, "AlterUserScramCredentialsResponse", throttle_time=NO_THROTTLE,
                       results=tuple(
                           build(module, "AlterUserScramCredentialsResult", user=user,
                                 **_error(code, text))
                           for user, code, text in results)))
