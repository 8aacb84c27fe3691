"""The data part of a campaign: the data topic set up, its producers and consumers run through
the faults, and after healing the read-back, the replicas' files, the safety checks (a)-(d)
and the availability of every partition (availability.py)."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable
from pathlib import Path

from harness.cluster import ProcessCluster, wait_for
from metadata.config_def import ConfigKey
from server import config_keys as keys
from server.admin_client import AdminClient
from tests.chaos.availability import DataTimes, Timeouts, check_availability
from tests.chaos.checks import (
    RECORDS_PER_PRODUCER_S,
    Check,
    check_acked_records,
    check_data_floor,
    check_reads,
    check_replicas_agree,
    check_watermarks,
    client_duplicates,
    hw_regressions,
)
from tests.chaos.data import (
    METADATA_REFRESH_MS,
    RETRY_BACKOFF_MAX_MS,
    DataConsumer,
    DataProducer,
    create_data_topic,
    describe_partitions,
    partition_replicas,
    read_back,
)
from tests.chaos.faults import FaultRecord, Outage
from tests.chaos.node_events import NodeEvent
from tests.chaos.partitions import read_replicas
from tests.chaos.schedule import MAX_FAULT_S

# Every replica of every partition back in the ISR, and on disk up to the leader's high
# watermark, after healing.
DATA_BOUND_S = 60.0
SETUP_S = 60.0
# A consumer stops within one consume() call (0.2 s) and a close (data.CLOSE_S) once told to.
JOIN_CONSUMER_S = 60.0
# A broker killed and started again is back in every ISR within this long: issue 28's goal
# for 3,000 partitions (the campaign's metadata writers leave a few thousand one-partition
# topics on the brokers by the end of a 600-s run). No timeout bounds a restart.
RESTART_GOAL_S = 10.0

# (high watermarks, the leaders' logs read back, ISRs) after healing.
HealedData = tuple[dict[int, int], dict[int, dict[int, bytes]], dict[int, list[int]]]
Timed = Callable[[str, float, Callable[[], object], float, Callable[[], str] | None], bool]


def campaign_timeouts(settings: dict[str, str]) -> Timeouts:
    """The availability bound's terms: the cluster's settings (Kafka's defaults where the
    campaign sets none), the producers' client settings and the schedule's longest fault."""
    def seconds(key: ConfigKey[int]) -> float:
        return int(settings.get(key.name, key.default or "0")) / 1000

    return Timeouts(
        max_fault_s=MAX_FAULT_S,
        session_timeout_s=seconds(keys.BROKER_SESSION_TIMEOUT_MS),
        heartbeat_interval_s=seconds(keys.BROKER_HEARTBEAT_INTERVAL_MS),
        liveness_grace_s=seconds(keys.BROKER_LIVENESS_GRACE_MS),
        replica_lag_s=seconds(keys.REPLICA_LAG_TIME_MAX_MS),
        replica_fetch_wait_s=seconds(keys.REPLICA_FETCH_WAIT_MAX_MS),
        quorum_fetch_timeout_s=seconds(keys.QUORUM_FETCH_TIMEOUT_MS),
        election_timeout_s=seconds(keys.QUORUM_ELECTION_TIMEOUT_MS),
        metadata_refresh_s=METADATA_REFRESH_MS / 1000,
        client_backoff_max_s=RETRY_BACKOFF_MAX_MS / 1000,
        restart_s=RESTART_GOAL_S)


class DataPart:
    def __init__(self, cluster: ProcessCluster, brokers: list[int], topic: str,
                 producers: int, consumers: int, partitions: int, duration_s: float) -> None:
        self.cluster = cluster
        self.brokers = brokers
        self.topic = topic
        self.n_producers = producers
        self.n_consumers = consumers
        self.partitions = partitions
        self.duration_s = duration_s
        self.producers: list[DataProducer] = []
        self.consumers: list[DataConsumer] = []
        self.replicas: dict[int, list[int]] = {}  # partition -> replica brokers
        self.hung: list[str] = []  # consumer threads still inside librdkafka when joined

    def setup(self, client: AdminClient) -> None:
        """The topic (RF 3, min.insync.replicas 2), every partition led with a full ISR, and
        its replica sets (the availability check counts a majority of them)."""
        topic, n = self.topic, self.partitions
        wait_for(lambda: create_data_topic(client, topic, n), SETUP_S, f"topic {topic}")

        def full() -> bool:
            parts = describe_partitions(client, topic)
            return len(parts) == n and all(
                leader >= 0 and len(isr) == 3 for leader, isr in parts.values())

        wait_for(full, SETUP_S, f"{topic}'s partitions led, with full ISRs")

        def replicas() -> dict[int, list[int]] | None:
            found = partition_replicas(client, topic)
            return found if len(found) == n else None

        found = wait_for(replicas, SETUP_S, f"{topic}'s replica sets")
        self.replicas = found or {}

    def start(self, t0: float, stop: threading.Event) -> None:
        bootstrap = self.cluster.bootstrap_servers()
        self.producers = [DataProducer(k, bootstrap, self.topic, self.partitions, t0, stop)
                          for k in range(self.n_producers)]
        self.consumers = [DataConsumer(k, bootstrap, self.topic, self.partitions, t0, stop)
                          for k in range(self.n_consumers)]
        for client in [*self.producers, *self.consumers]:
            client.start()

    def join(self) -> None:
        for producer in self.producers:
            producer.join(timeout=120)  # they wait for their records' outcomes
            if producer.is_alive() or producer.error is not None:
                raise RuntimeError(f"{producer.name} failed: {producer.error!r}")
        for consumer in self.consumers:
            consumer.join(timeout=JOIN_CONSUMER_S)
            if consumer.error is not None:
                raise RuntimeError(f"{consumer.name} failed: {consumer.error!r}")
            if consumer.is_alive():
                # Stuck inside librdkafka (#5476): what it read so far is checked all the same.
                self.hung.append(consumer.name)

    def after_heal(self, healed: float, servers: list[str], timed: Timed,
                   checks: list[Check]) -> HealedData | None:
        """Every partition's ISR full again; the log its leader serves, read back from 0 to its
        high watermark; every replica's files up to that HW (read while the brokers run)."""
        client = AdminClient(servers)
        topic, n = self.topic, self.partitions

        def full() -> dict[int, tuple[int, list[int]]] | None:
            parts = describe_partitions(client, topic)
            done = len(parts) == n and all(leader >= 0 and len(isr) == 3
                                           for leader, isr in parts.values())
            return parts if done else None

        timed("data: every partition's ISR full", DATA_BOUND_S, full, healed,
              lambda: f"{describe_partitions(client, topic)}")
        try:
            hws, final = read_back(self.cluster.bootstrap_servers(), topic, n, DATA_BOUND_S)
        except AssertionError as exc:
            checks.append(Check("liveness: data: read back from the partition leaders", False,
                                str(exc)))
            return None
        def every() -> dict[int, tuple[int, list[int]]] | None:
            found = describe_partitions(client, topic)
            return found if len(found) == n else None

        described: dict[int, tuple[int, list[int]]] | None = None
        with contextlib.suppress(AssertionError):  # none known fails check (b), never skips it
            described = wait_for(every, DATA_BOUND_S, f"every partition of {topic} described")
        isr = {p: sorted(i) for p, (_, i) in (described or {}).items()}
        brokers = self.broker_dirs()

        def lagging() -> list[str]:
            replicas = read_replicas(brokers, topic, n)
            ends = {(p, b): None if (log := replicas.get(p, {}).get(b)) is None else log.end
                    for p in range(n) for b in isr.get(p, [])}
            return [f"partition {p} broker {b} at {end} (HW {hws[p]})"
                    for (p, b), end in ends.items() if end is None or end < hws[p]]

        timed("data: every ISR replica on disk up to the high watermark", DATA_BOUND_S,
              lambda: not lagging(), healed, lambda: ", ".join(lagging()))
        return hws, final, isr

    def broker_dirs(self) -> dict[int, Path]:
        return {b: self.cluster.nodes[b].config_path.parent / f"node-{b}" for b in self.brokers}

    def checks(self, data: HealedData | None) -> list[Check]:
        acks = [a for p in self.producers for a in p.acks]
        out = [check_data_floor(len(acks), self.duration_s, self.n_producers)]
        if data is None:
            return [*out, Check("data: acknowledged records present exactly once at their "
                                "offsets", False, "no read-back after healing")]
        hws, final, isr = data
        attempted = {v for p in self.producers for v in p.sent}
        replicas = read_replicas(self.broker_dirs(), self.topic, self.partitions)
        sources: dict[str, dict[int, dict[int, bytes]]] = {"the leaders (read back)": final}
        for p, members in isr.items():
            for b in members:
                log = replicas.get(p, {}).get(b)
                sources.setdefault(f"broker {b}'s files", {})[p] = \
                    {} if log is None else log.records
        watermarks = [w for c in self.consumers for w in c.watermarks]
        twice, explained = client_duplicates(
            replicas, {p.k: p.epoch_lines for p in self.producers})
        return [*out, check_acked_records(acks, sources, hws, attempted, explained), twice,
                check_replicas_agree(replicas, hws, isr), check_watermarks(watermarks, hws),
                check_reads([r for c in self.consumers for r in c.reads], final, hws,
                            attempted, explained)]

    def availability(self, outages: list[Outage], faults: list[FaultRecord],
                     events: list[NodeEvent], bound_s: float | None,
                     terms: list[str]) -> tuple[Check, dict[str, object]]:
        acks: dict[int, list[float]] = {p: [] for p in range(self.partitions)}
        for producer in self.producers:
            for ack in producer.acks:
                acks.setdefault(ack.partition, []).append(ack.at_s)
        sending = [(p.started_s, p.stopped_s) for p in self.producers
                   if p.started_s is not None and p.stopped_s is not None]
        broker_outages = [o for o in outages if o.node in self.brokers]
        controllers = sorted(n for n in self.cluster.nodes if n not in self.brokers)
        return check_availability(DataTimes(self.topic, self.replicas, acks, sending),
                                  broker_outages, faults, events, bound_s, terms, controllers,
                                  [o for o in outages if o.node in controllers])

    def counts(self) -> dict[str, object]:
        acked = [a for p in self.producers for a in p.acks]
        return {
            "topic": self.topic, "partitions": self.partitions,
            "sent": sum(p.stats.sent for p in self.producers), "acknowledged": len(acked),
            "failed": sum(p.stats.failed for p in self.producers),
            "unreported": sum(p.stats.unreported for p in self.producers),
            "producerRestarts": sum(p.stats.restarts for p in self.producers),
            "read": sum(len(c.reads) for c in self.consumers),
            "consumerRestarts": sum(c.restarts for c in self.consumers),
            "consumersHung": self.hung,
            "hwRegressions": hw_regressions([w for c in self.consumers for w in c.watermarks]),
            "floor": math.floor(RECORDS_PER_PRODUCER_S * self.n_producers * self.duration_s),
        }

    def journal(self) -> dict[str, object]:
        return {
            "acks": [[a.producer, a.partition, a.offset, a.value.decode(), round(a.at_s, 4)]
                     for p in self.producers for a in p.acks],
            "failed": {v.decode(): e for p in self.producers for v, e in p.failed.items()},
            "reads": [[r.consumer, r.partition, r.offset, r.value.decode(), round(r.at_s, 4)]
                      for c in self.consumers for r in c.reads],
            "watermarks": [[w.consumer, w.partition, w.high, round(w.at_s, 4)]
                           for c in self.consumers for w in c.watermarks],
            "events": [[e.who, round(e.at_s, 3), e.what]
                       for x in [*self.producers, *self.consumers] for e in x.events],
            "sending": [[p.started_s, p.stopped_s] for p in self.producers],
            "epochLines": {f"producer {p.k}": p.epoch_lines for p in self.producers},
        }
