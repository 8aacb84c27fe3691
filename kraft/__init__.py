"""kraft: Kafka's pull-based Raft variant (KRaft) as a sans-I/O core, a durable log and drivers."""
