"""The Raft protocol's gRPC code, generated from raft.proto beside it (do not edit the *_pb2*
files; `python tools/gen_proto.py`), and the conversions between its messages and the core's
dataclasses, which stay in this transport layer."""
