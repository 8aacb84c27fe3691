"""metadata: what every node shares above the Raft log.

records.py       Kafka's metadata record types and their encoding (u16 key, u16 version, protobuf)
record_json.py   a record as kafka-dump-log prints it (camelCase JSON)
image.py         the immutable MetadataImage and its indexes
delta.py         MetadataDelta: replays records on an image and builds the next one
placement.py     replica placement (the seed rule, rack-alternating)
partition_change.py, topics.py, replication.py, reassignment.py
                 the controller's rules as pure functions from an image to records
errors.py        Kafka's API errors and the ControllerResult the rules return

See docs/metadata.md.
"""
