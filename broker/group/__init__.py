"""The group coordinator: Kafka's classic consumer-group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup), committed offsets, and the group inspection APIs, with group state
and offsets kept in the internal, replicated `__consumer_offsets` topic.

- placement.py: which `__consumer_offsets` partition holds a group (Java's String.hashCode).
- records.py: Kafka's key/value formats of that topic (offset commits, group metadata).
- model.py: a group and its members (pure data, no I/O).
- coordinator.py: the state machine of every group on the partitions this broker leads.
  Its parts: coordinator_core.py (state, loading and unloading, the join phase, members and
  sessions), join_group.py (the JoinGroup requests).
- loader.py: the replay of a partition into groups when this broker starts leading it.
- offsets.py: OffsetCommit/OffsetFetch rules (part of the coordinator).
- admin.py: ListGroups, DescribeGroups, DeleteGroups; retention.py: expiry of offsets.
- config.py, errors.py: Kafka's settings and error codes of the group protocol.
- storage.py: the coordinator's log: appends through the replica manager (acks=all),
  replay of a partition on becoming its leader, creation of the topic through the controller.
"""
