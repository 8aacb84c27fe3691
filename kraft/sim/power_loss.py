"""What a power loss leaves of the bytes a flush job wrote but had not fdatasynced yet.

The page cache writes pages back in any order, a page can reach the disk in part (a sector at a
time), a block the file grew into can hold garbage, and the file's new size may or may not have
reached the disk. `torn_writes(rng)` returns a function from the bytes written to the bytes a
reopen finds past the durable image; `MemoryLog.crash(power_loss=...)` applies it to the flush
job in flight. Every shape the recovery rule must handle comes out of it: nothing at all, a
prefix of whole batches, a frame cut short, zeros to the end, a zeroed frame followed by
non-zero bytes (a later page that made it), garbage.
"""

from __future__ import annotations

import random
from collections.abc import Callable

# Simulator batches are ~60 bytes, so pages are small here to give multi-page writes.
PAGE_SIZES = (16, 32, 64, 512)


def torn_writes(rng: random.Random) -> Callable[[bytes], bytes]:
    """A power-loss model drawing its choices from `rng`."""

    def apply(written: bytes) -> bytes:
        if not written:
            return b""
        page = rng.choice(PAGE_SIZES)
        size = len(written)
        image = bytearray(size)  # what never reached the disk reads as zeros
        last_reached = 0
        for start in range(0, size, page):
            stop = min(start + page, size)
            roll = rng.random()
            if roll < 0.5:  # this page was written back
                if rng.random() < 0.2:  # ... only its first sectors: torn
                    stop = rng.randint(start, stop)
                image[start:stop] = written[start:stop]
                last_reached = max(last_reached, stop)
            elif roll < 0.6:  # a block allocated to the file but never written: stale data
                image[start:stop] = rng.randbytes(stop - start)
                last_reached = max(last_reached, stop)
        roll = rng.random()
        if roll < 0.15:
            length = 0  # the size update was lost: the file ends at the durable image
        elif roll < 0.55:
            length = size  # the size made it, some data did not: zeros where it is missing
        else:
            length = last_reached  # the file ends with the last block that made it
        return bytes(image[:length])

    return apply
