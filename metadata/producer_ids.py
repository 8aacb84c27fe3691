"""Cluster-unique producer ids (Kafka's ProducerIdControlManager, KIP-730).

The controller hands out ids in blocks: a broker asks for one (AllocateProducerIds) and gets
`[start, start + 1000)`; the ProducerIdsRecord that says so moves the image's next block start
past it. The record is the only state: a new active controller continues from the committed
image, and a block is answered only after its record commits, so no id is ever handed out
twice, across failovers and snapshots alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.errors import Errors
from metadata.errors import ControllerApiError, ControllerResult
from metadata.image import MetadataImage
from metadata.records import ProducerIdsRecord

PRODUCER_ID_BLOCK_SIZE = 1000  # Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
MAX_PRODUCER_ID = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdsBlock:
    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def next_block_first_id(self) -> int:
        return self.first_producer_id + self.size


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> None:
    """Kafka's ClusterControlManager.checkBrokerEpoch: STALE_BROKER_EPOCH unless `broker_id`
    is registered with exactly `broker_epoch`."""
    registration = image.cluster.broker(broker_id)
    if registration is None:
        raise ControllerApiError(
            Errors.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}")
    if registration.epoch != broker_epoch:
        raise ControllerApiError(
            Errors.STALE_BROKER_EPOCH,
            f"Expected broker epoch {registration.epoch}, but got broker epoch {broker_epoch}")


def allocate_producer_ids(
    image: MetadataImage, broker_id: int, broker_epoch: int
) -> ControllerResult[ProducerIdsBlock]:
    """The next block for `broker_id`, and the record that moves the next block start."""
    check_broker_epoch(image, broker_id, broker_epoch)
    first = max(0, image.producer_ids.next_producer_id)
    if first > MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
        raise ControllerApiError(
            Errors.UNKNOWN_SERVER_ERROR,
            "Exhausted all producerIds as the next block's end producerId will exceed long "
            "max value")
    block = ProducerIdsBlock(broker_id, first, PRODUCER_ID_BLOCK_SIZE)
    record = ProducerIdsRecord(broker_id, broker_epoch, block.next_block_first_id)
    return ControllerResult((record,), block)
