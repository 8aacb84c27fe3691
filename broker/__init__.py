"""The broker role: an observer of the metadata log with a live metadata cache.

| module | what it holds |
|---|---|
| `state.py` | `BrokerState`: Kafka's broker states (STARTING ... SHUTTING_DOWN) |
| `cache.py` | `MetadataCache`: the latest published image and the log position it reflects |
| `publisher.py` | `CachePublisher`: the loader's publisher that feeds the cache and times images |
| `isr.py` | `IsrExpander`: the loader's publisher that asks to add live replicas back to ISRs |
| `lifecycle.py` | `BrokerLifecycleManager`: register, heartbeat, unfence, controlled shutdown |
| `service.py` | the client-facing `BrokerMetadata` gRPC service and the broker's Admin service |
| `metrics.py` | Prometheus metrics of the broker role |

`server/broker_role.py` wires these onto a process's RaftNode and MetadataLoader.
"""
