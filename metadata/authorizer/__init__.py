"""Kafka's authorization model (KIP-801): ACL bindings as metadata records, the controller's
rules for creating and deleting them, and StandardAuthorizer, which every node feeds from its
metadata image and asks for every Kafka API and gRPC RPC."""
