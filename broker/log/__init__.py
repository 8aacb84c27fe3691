"""A broker's partition logs: Kafka record batches in kraft.log's SegmentedLog (write-through),
leader epochs, producer state, retention, and the manager of every log under log.dirs.

Import from the modules (broker.log.partition_log, broker.log.log_manager, broker.log.config):
this package re-exports nothing, so that a module of it importing a sibling
(`from broker.log import checkpoints`) does not run every other module first — the import
circle issue 32 found (broker/log/{__init__, cleaner, leader_epochs, log_manager,
partition_log}). The acyclic_siblings contract in pyproject.toml keeps the modules acyclic.
"""
