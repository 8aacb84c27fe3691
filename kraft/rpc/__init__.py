"""gRPC code generated from proto/ (do not edit the *_pb2* files) and the conversions between
protobuf messages and the core's dataclasses, which stay in this transport layer."""
