"""AclPublisher: hands each image's ACL bindings to the node's authorizer (Kafka's
AclPublisher), so every node decides from the bindings it has replayed, and no other path
changes what the authorizer holds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from metadata.authorizer.model import AclBinding
from metadata.authorizer.standard import StandardAuthorizer

if TYPE_CHECKING:  # the loader's types; importing them at run time would make a cycle
    from kraft.client import LeaderAndEpoch
    from metadata.delta import MetadataDelta
    from metadata.image import MetadataImage
    from metadata.loader import LoaderManifest


class AclPublisher:
    def __init__(self, authorizer: StandardAuthorizer) -> None:
        self.authorizer = authorizer
        self._published: Mapping[str, AclBinding] | None = None

    def on_metadata_update(self, delta: MetadataDelta | None, image: MetadataImage,
                           manifest: LoaderManifest) -> None:
        # An image shares its ACL mapping with the one before unless a record changed it, so
        # identity tells whether to reload, for deltas and snapshot loads alike. The first
        # image completes the initial load (until then only super users are allowed).
        if image.acls is not self._published:
            self.authorizer.load(image.acls.values())
            self._published = image.acls

    def on_leader_change(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        pass
