"""Writer threads: each makes admin writes with values no other write uses and records, for
every one, when it started and whether (and when) it was acknowledged.

Two kinds of write, alternating: create a topic with a unique name, and set `retention.ms` on
the writer's own topic to a unique value. A write that fails in any way (timeout, refusal,
unreachable servers) has an unknown outcome: it may or may not be in the log, but at most
once; an acknowledged one must be there exactly once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from metadata.rpc import admin_pb2 as apb
from server.admin_client import AdminClient, CommandError

CONFIG_KEY = "retention.ms"
TOPIC_RESOURCE = apb.CONFIG_RESOURCE_TYPE_TOPIC


@dataclass
class Write:
    writer: int
    seq: int
    kind: str  # "create" or "config"
    topic: str
    value: str  # the config value; "" for a create
    start_s: float
    end_s: float | None = None
    acked: bool = False
    error: str = ""
    answered: str = ""  # the endpoint whose answer ended the write ("" for none)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.topic, self.value)

    def to_json(self) -> dict[str, object]:
        return {"writer": self.writer, "seq": self.seq, "kind": self.kind, "topic": self.topic,
                "value": self.value or None, "startS": round(self.start_s, 4),
                "endS": None if self.end_s is None else round(self.end_s, 4),
                "acked": self.acked, "error": self.error or None,
                "answered": self.answered or None}


def config_topic(prefix: str, writer: int) -> str:
    return f"{prefix}-w{writer}-cfg"


def config_value(writer: int, seq: int) -> str:
    return str((writer + 1) * 1_000_000_000 + seq)  # unique across writers and writes


class Refused(CommandError):
    """A per-resource error in an otherwise successful answer."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def create_topic(client: AdminClient, name: str) -> None:
    topic = apb.CreatableTopic(name=name, num_partitions=1, replication_factor=-1)
    [result] = client.call("CreateTopics", apb.CreateTopicsRequest(topics=[topic])).topics
    if result.error_code:
        raise Refused(result.error_code, f"CreateTopics {name}: error {result.error_code}: "
                                         f"{result.error_message}")


def set_config(client: AdminClient, topic: str, value: str) -> None:
    request = apb.IncrementalAlterConfigsRequest(resources=[apb.AlterConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic,
        configs=[apb.AlterableConfig(name=CONFIG_KEY, op=apb.ALTER_CONFIG_OP_SET,
                                     value=value)])])
    [result] = client.call("IncrementalAlterConfigs", request).results
    if result.error_code:
        raise Refused(result.error_code, f"IncrementalAlterConfigs {topic}: error "
                                         f"{result.error_code}: {result.error_message}")


class Writer(threading.Thread):
    def __init__(self, writer: int, prefix: str, servers: list[str], t0: float,
                 stop: threading.Event, pace_s: float, cluster_id: str | None = None) -> None:
        """`cluster_id`: answers from any other cluster are refused (a process of another
        cluster on a shared machine can be handed the port of a node that is down)."""
        super().__init__(name=f"chaos-writer-{writer}", daemon=True)
        self.writer = writer
        self.prefix = prefix
        self.servers = servers
        self.cluster_id = cluster_id
        self.t0 = t0
        self.stop_event = stop
        self.pace_s = pace_s
        self.writes: list[Write] = []
        self._rotation = writer  # writers start on different servers
        self.error: BaseException | None = None

    def _client(self) -> AdminClient:
        k = self._rotation % len(self.servers)
        return AdminClient(self.servers[k:] + self.servers[:k], cluster_id=self.cluster_id)

    def run(self) -> None:
        try:
            client = self._client()
            seq = 0
            while not self.stop_event.is_set():
                if seq % 2 == 0:
                    write = Write(self.writer, seq, "create",
                                  f"{self.prefix}-w{self.writer}-{seq}", "", self._now())
                else:
                    write = Write(self.writer, seq, "config",
                                  config_topic(self.prefix, self.writer),
                                  config_value(self.writer, seq), self._now())
                self.writes.append(write)
                try:
                    if write.kind == "create":
                        create_topic(client, write.topic)
                    else:
                        set_config(client, write.topic, write.value)
                    write.acked = True
                    write.answered = client.answered or ""
                except CommandError as exc:
                    write.error = str(exc)[:300]
                    write.answered = client.answered or ""
                    self._rotation += 1  # a failing server: start from the next one
                    client = self._client()
                write.end_s = self._now()
                seq += 1
                # Pacing, so six nodes and the writers share two cores; stop() cuts it short.
                self.stop_event.wait(self.pace_s)
        except BaseException as exc:  # reported by the campaign, never swallowed
            self.error = exc

    def _now(self) -> float:
        return time.monotonic() - self.t0
