"""Regenerate the committed gRPC code with the pinned grpcio-tools.

Each package owns its protos and their generated code, side by side: kraft/rpc (the Raft
protocol), metadata/rpc (records, the Admin API, broker lifecycle), broker/rpc (the broker's
metadata service). `python tools/gen_proto.py` writes every <package>/rpc/*_pb2*.py[i];
`--check` regenerates into a temporary directory and fails when the committed files differ
(run by `make test`).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIRS = [Path("kraft") / "rpc", Path("metadata") / "rpc", Path("broker") / "rpc"]
PROTOS = sorted(p.relative_to(ROOT) for d in PROTO_DIRS for p in (ROOT / d).glob("*.proto"))


def generate(out: Path) -> list[Path]:
    include = Path(protoc.__file__).parent / "_proto"
    for proto in PROTOS:
        code = protoc.main([
            "grpc_tools.protoc",
            f"--proto_path={ROOT}",
            f"--proto_path={include}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            str(ROOT / proto),
        ])
        if code != 0:
            raise SystemExit(f"protoc failed on {proto}")
    return sorted(p.relative_to(out) for d in PROTO_DIRS for p in (out / d).glob("*_pb2*.py*"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if committed code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generated = generate(Path(tmp))
        stale = []
        for path in generated:
            fresh, committed = Path(tmp) / path, ROOT / path
            if args.check:
                if not committed.exists() or not filecmp.cmp(fresh, committed, shallow=False):
                    stale.append(committed)
            else:
                shutil.copyfile(fresh, committed)
    if stale:
        names = ", ".join(str(p.relative_to(ROOT)) for p in stale)
        print(f"generated gRPC code is stale: {names}; run python tools/gen_proto.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
