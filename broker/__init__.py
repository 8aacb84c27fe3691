"""The broker role: an observer of the metadata log with a live metadata cache, holding the
data of its partition replicas.

| module | what it holds |
|---|---|
| `state.py` | `BrokerState`: Kafka's broker states (STARTING ... SHUTTING_DOWN) |
| `cache.py` | `MetadataCache`: the latest published image and the log position it reflects |
| `publisher.py` | `CachePublisher`: the loader's publisher that feeds the cache and times images |
| `api.py` | the typed contract between the Kafka front and the data plane (`DataPlane`) |
| `records.py` | Kafka record batches (magic 2): header, validation, stamping offsets and epochs |
| `schema_codec.py` | the reader/writer of the coordinators' internal-topic record schemas |
| `log/` | partition logs on `kraft.log.SegmentedLog`, checkpoints, producer state, LogManager |
| `replica/` | `ReplicaManager` (lead/follow, produce, fetch), fetchers, ISR, fetch sessions |
| `kafka/` | the Kafka wire-protocol front: server, codec (kio), one module per API, client |
| `quotas/` | client quotas (produce, fetch, request): rates, sensors, throttle times |
| `producer_ids.py` | `ProducerIdManager`: blocks of cluster-unique producer ids |
| `lifecycle.py` | `BrokerLifecycleManager`: register, heartbeat, unfence, controlled shutdown |
| `service.py` | the client-facing `BrokerMetadata` gRPC service and the broker's Admin service |
| `metrics.py` | Prometheus metrics of the broker role |

`server/broker_role.py` wires these onto a process's RaftNode and MetadataLoader.
"""
