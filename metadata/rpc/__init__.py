"""The metadata layer's gRPC code, generated from the .proto files beside it (do not edit the
*_pb2* files; `python tools/gen_proto.py`): metadata records, the Admin API and the broker
lifecycle API the active controller serves."""

# Trailing metadata key of every Admin answer: the answering node's cluster id, so a client can
# tell a node of its cluster from another process that took the port of one that is down.
CLUSTER_ID_KEY = "kraft-cluster-id"
