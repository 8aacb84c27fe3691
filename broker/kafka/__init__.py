"""The broker's Kafka wire-protocol front: a listener that real Kafka clients talk to
(server.KafkaServer + apis.KafkaApis, translating to broker.api's DataPlane) and the
inter-broker client the replica fetcher uses (client.KafkaClient).

Codec choice: kio 0.6.5, after a short evaluation against the alternatives.
- kio is generated from Kafka's own JSON message schemas, every version of every API, as
  typed frozen dataclasses (py.typed), with a native (Rust) decoder: ~33 us for a 1 MB
  Produce v9, ~78 us to encode a 1 MB Fetch answer, records kept as opaque bytes. The
  reference stub (kafka-data-plane.md Appendix A) decoded librdkafka, kcat and kafka-python
  frames with it and those clients accepted its answers, flexible and not.
- kafka-python's protocol classes are a client's: hand-written, fewer versions (no Fetch
  topic ids), and a test dependency here; hand-writing the schemas ourselves means hundreds of
  request/response versions to get wrong.
- kio's gaps, and what this package does about them: (1) its native decoder trusts lengths —
  an array count of 2**31 makes it allocate before reading and the failed allocation aborts
  the process (found by fuzzing), and it raises KeyError on an unknown tagged field where
  Kafka skips it: scan.py walks every frame against the same schema first, bounds every
  length, and strips unknown tags; decode failures of any kind become codec.FrameError.
  (2) No dispatch, negotiation or ApiVersions error answer: versions.py and
  api_versions_api.py. (3) Its record-batch reader handles only uncompressed batches: the
  front never parses records, it checks the 61-byte batch header only (produce_api.py).

Nothing is imported here: a process that needs only the SASL settings (the config loader, the
CLIs) must not pay for kio and the whole front (~0.8 s at every start).
"""
