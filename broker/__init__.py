"""The broker role: an observer of the metadata log with a live metadata cache.

| module | what it holds |
|---|---|
| `state.py` | `BrokerState`: Kafka's broker states (STARTING ... SHUTTING_DOWN) |
| `cache.py` | `MetadataCache`: the latest published image and the log position it reflects |
| `publisher.py` | `MetadataPublisher`: drives the shared loader, times images, feeds the cache |
| `lifecycle.py` | `BrokerLifecycleManager`: register, heartbeat, unfence, controlled shutdown |
| `service.py` | the client-facing `BrokerMetadata` gRPC service and the broker's Admin service |
| `metrics.py` | Prometheus metrics of the broker role |
| `role.py` | `BrokerRole`: wires the above onto a RaftNode (broker-only or combined mode) |
"""
