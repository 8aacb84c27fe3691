"""The transaction coordinator (KIP-98, transaction version 0): InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, with each transactional id's
state in the internal, replicated `__transaction_state` topic (docs/transactions.md).

- records.py: Kafka's key/value formats of that topic (TransactionLogKey/Value) and the states.
- model.py: a transactional id's state (TransactionMetadata) and the replay of a partition.
- coordinator.py: the rules (epochs, fencing, the state machine, timeouts, expiry).
- markers.py: WriteTxnMarkers to the partitions' leaders, retried until all are written.
- storage.py: the coordinator on the data plane (appends, loading on leadership, timers,
  creation of the topic).
- config.py, errors.py: Kafka's settings and error codes of the transaction APIs.
"""
