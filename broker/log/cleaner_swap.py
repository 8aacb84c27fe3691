"""Installing cleaned segments crash-safely, as Kafka's log does (LocalLog.replaceSegments).

The cleaner writes `<base>.log.cleaned` (fsynced) in its thread. The swap, on the event loop:
1. `commit`: rename it `<base>.log.swap` and fsync the directory: from here on the cleaned
   data is the log's, whatever happens;
2. `install`: unlink the segments it replaces, rename it `<base>.log`, fsync the directory.

`recover`, before a partition's segments are opened: a `.cleaned` file is an unfinished
cleaning and is deleted; a `.swap` file is finished: every segment whose base offset lies in
the swap's offsets goes, and the swap becomes the segment. A crash at any point thus leaves
either the old segments or the cleaned one, never both or neither.
"""

from __future__ import annotations

import logging
import os
import re

from broker.records import scan_batches
from kraft.log._common import fsync_dir
from kraft.log.segmented import list_segments, segment_path

logger = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SWAP_NAME = re.compile(r"(\d{20})\.log\.swap")


def cleaned_path(directory: str, base: int) -> str:
    """Where the cleaner writes the segment that will start at `base`."""
    return segment_path(directory, base) + CLEANED_SUFFIX


def commit(cleaned: str) -> str:
    """`.cleaned` -> `.swap`, durably; the swap's path."""
    if not cleaned.endswith(CLEANED_SUFFIX):
        raise ValueError(f"{cleaned} is not a cleaned segment")
    swap = cleaned.removesuffix(CLEANED_SUFFIX) + SWAP_SUFFIX
    os.rename(cleaned, swap)
    fsync_dir(os.path.dirname(swap))
    return swap


def install(swap: str, old_paths: list[str]) -> None:
    """Delete the segments the swap replaces, then make it the segment (durably)."""
    for path in old_paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    os.rename(swap, swap.removesuffix(SWAP_SUFFIX))
    fsync_dir(os.path.dirname(swap))


def discard(cleaned: str) -> None:
    """Remove a `.cleaned` file the swap will not use."""
    try:
        os.unlink(cleaned)
    except FileNotFoundError:
        pass


def recover(directory: str, names: list[str] | None = None) -> int:
    """Finish or discard what a crash interrupted (module docstring); swaps installed.
    `names`: the directory's listing, when the caller has it."""
    installed = 0
    changed = False
    for name in sorted(os.listdir(directory) if names is None else names):
        if not name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)):
            continue
        path = os.path.join(directory, name)
        if name.endswith(".log" + CLEANED_SUFFIX):
            os.unlink(path)
            changed = True
            logger.info("deleted %s: a cleaning the broker did not finish", path)
            continue
        match = _SWAP_NAME.fullmatch(name)
        if match is None:
            continue
        base = int(match.group(1))
        with open(path, "rb") as file:
            frames = scan_batches(file.read(), path)  # fsynced before its rename: whole
        end = frames[-1].base_offset + frames[-1].record_count if frames else base
        old = [segment for offset, segment in list_segments(directory) if base <= offset < end]
        install(path, old)
        installed += 1
        logger.warning("%s: finished a cleaner swap a crash interrupted (offsets %d to %d, "
                       "%d old segment(s) replaced)", directory, base, end, len(old))
    if changed and not installed:
        fsync_dir(directory)
    return installed
