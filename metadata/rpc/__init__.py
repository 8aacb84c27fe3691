"""The metadata layer's gRPC code, generated from the .proto files beside it (do not edit the
*_pb2* files; `python tools/gen_proto.py`): metadata records, the Admin API and the broker
lifecycle API the active controller serves."""
