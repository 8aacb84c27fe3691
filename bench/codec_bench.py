"""What a topic's compression.type costs the leader (broker/log/validator.py): one producer
batch recompressed to each codec, in CPU time of the calling thread (the event loop), and how
it splits between decompressing, decoding the records, re-encoding them and compressing.

    python -m bench.codec_bench [--records 2000] [--record-bytes 500] [--source lz4]

The batch is JSON-like records with a key, a UUID, a counter and some text, as a producer's
1 MB batch (librdkafka's batch.size) would hold them; MB/s counts the records' uncompressed
bytes per CPU second.
"""

from __future__ import annotations

import argparse
import json
import random
import time
import uuid
from collections.abc import Callable
from functools import partial

from broker.compression import NAMES, assemble_batch, batch_records, compress, decompress
from broker.log.config import LogConfig
from broker.log.validator import TARGET_CODECS, validate_records
from broker.records import HEADER_SIZE, Record, encode_record, parse_header

CODEC_IDS = {name: codec for codec, name in NAMES.items()}


def producer_batch(records: int, record_bytes: int, codec: int, seed: int = 7) -> bytes:
    rng = random.Random(seed)
    words = ["order", "user", "created", "shipped", "paid", "refund", "eu-west", "us-east"]
    body = []
    for i in range(records):
        doc = {"id": str(uuid.UUID(int=rng.getrandbits(128))), "seq": i,
               "ts": 1_700_000_000_000 + i, "event": rng.choice(words),
               "text": " ".join(rng.choice(words) for _ in range(record_bytes // 8))}
        value = json.dumps(doc).encode()[:record_bytes]
        body.append(encode_record(Record(value, b"key-%d" % rng.randrange(10_000)), i,
                                  1_700_000_000_000))
    return assemble_batch(0, -1, codec, records - 1, 1_700_000_000_000,
                          1_700_000_000_000 + records - 1, 1, 0, 0, records, b"".join(body))


def cpu_seconds(action: Callable[[], object], repeat: int) -> float:
    """The best of `repeat` runs, in CPU seconds of this thread."""
    best = float("inf")
    for _ in range(repeat):
        start = time.thread_time()
        action()
        best = min(best, time.thread_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--record-bytes", type=int, default=500)
    parser.add_argument("--source", default="lz4", choices=sorted(CODEC_IDS))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    batch = producer_batch(args.records, args.record_bytes, CODEC_IDS[args.source])
    header = parse_header(batch)
    records = batch_records(header, batch)
    plain = decompress(header.compression, batch[HEADER_SIZE:])
    mb = len(plain) / 1e6
    print(f"{args.records} records, {len(plain)} bytes plain, {len(batch)} bytes as sent in "
          f"{args.source}")
    decode = cpu_seconds(lambda: batch_records(header, batch), args.repeat)
    unpack = cpu_seconds(lambda: decompress(header.compression, batch[HEADER_SIZE:]),
                         args.repeat)
    print(f"  decompress {args.source}: {mb / unpack:8.0f} MB/s; decompress + decode the "
          f"records: {mb / decode:6.1f} MB/s ({decode / len(records) * 1e6:.1f} us/record)")
    compacted = LogConfig(cleanup_policy=("compact",))
    seconds = cpu_seconds(lambda: validate_records(batch, header, compacted, "t", 0),
                          args.repeat)
    print(f"  compacted topic, producer codec (keys checked, stored as sent): "
          f"{mb / seconds:6.1f} MB/s ({seconds * 1e3:.1f} ms a batch)")
    for target in TARGET_CODECS:
        config = LogConfig(compression_type=target)
        stored = validate_records(batch, header, config, "t", 0)[0]
        if stored is batch:
            print(f"  -> {target:12s} stored as sent: no work")
            continue
        codec = TARGET_CODECS[target]
        seconds = cpu_seconds(partial(validate_records, batch, header, config, "t", 0),
                              args.repeat)
        packing = cpu_seconds(partial(compress, codec, plain), args.repeat)
        print(f"  -> {target:12s} {mb / seconds:6.1f} MB/s ({seconds * 1e3:6.1f} ms a batch, "
              f"compressing {packing * 1e3:5.1f} ms of it), stored {len(stored)} bytes")


if __name__ == "__main__":
    main()
