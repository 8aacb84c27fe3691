"""The data plane's replica side: `Partition` (leader/follower state, ISR, HW), the
`ReplicaManager` that serves the Kafka front and acts on metadata, the replica fetchers and
the ISR updater (AlterPartition). See docs/data-plane.md."""
