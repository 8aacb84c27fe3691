"""The broker's gRPC code, generated from broker_metadata.proto beside it (do not edit the *_pb2*
files; `python tools/gen_proto.py`): the metadata service on the broker listener."""
