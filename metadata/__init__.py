"""metadata: Kafka's metadata records, the immutable MetadataImage built by replaying them, and
the controller's replication rules as pure functions from an image to records."""
