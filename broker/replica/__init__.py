"""The data plane's replica side: `Partition` (leader/follower state, ISR, HW), the
`ReplicaManager` that serves the Kafka front and acts on metadata, the replica fetchers and
the ISR updater (AlterPartition), and incremental fetch sessions (`fetch_sessions`: the cache
and the client's handler; `incremental_fetch`: the leader's read). See docs/data-plane.md."""
