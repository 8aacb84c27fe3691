"""KIP-848's consumer group protocol (ConsumerGroupHeartbeat, ConsumerGroupDescribe) beside the
classic one, as Kafka 4.0's GroupMetadataManager serves it: the group epoch, a target assignment
computed by a server-side assignor, and each member's epoch reconciled towards it with every
partition revoked by its old owner before it goes to a new one.

- records.py: the records of `__consumer_offsets` key types 3-8, in Kafka's formats.
- model.py: a consumer group's state and its members (pure data).
- assignors.py: the server-side assignors `uniform` and `range`.
- reconciliation.py: Kafka's CurrentAssignmentBuilder (a member's next epoch and partitions).
- replay.py: the records of a partition back into groups when this broker loads it.
- manager.py: ConsumerGroupHeartbeat, leaving, fencing, the timers, the writes.
- describe.py: ConsumerGroupDescribe and the offset-commit check by member epoch.

A consumer group is a broker/group/model.py Group (its committed offsets, its place in the
coordinator's dictionary, loading and unloading) whose `consumer` holds this protocol's state;
the classic state machine sees it as a group without classic members.
"""
