"""Regenerate the committed gRPC code from proto/ with the pinned grpcio-tools.

`python tools/gen_proto.py` writes kraft/rpc/*_pb2*.py[i]; `--check` regenerates into a temporary
directory and fails when the committed files differ (run by `make test`).
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
PROTOS = sorted((ROOT / "proto").glob("*.proto"))
PACKAGE_DIR = Path("kraft") / "rpc"


def generate(out: Path) -> list[Path]:
    include = Path(protoc.__file__).parent / "_proto"
    for proto in PROTOS:
        code = protoc.main([
            "grpc_tools.protoc",
            f"--proto_path={PACKAGE_DIR}={ROOT / 'proto'}",
            f"--proto_path={include}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            str(PACKAGE_DIR / proto.name),
        ])
        if code != 0:
            raise SystemExit(f"protoc failed on {proto}")
    return sorted((out / PACKAGE_DIR).glob("*_pb2*.py*"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if committed code is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generated = generate(Path(tmp))
        stale = []
        for path in generated:
            committed = ROOT / PACKAGE_DIR / path.name
            if args.check:
                if not committed.exists() or not filecmp.cmp(path, committed, shallow=False):
                    stale.append(committed)
            else:
                shutil.copyfile(path, committed)
    if stale:
        names = ", ".join(str(p.relative_to(ROOT)) for p in stale)
        print(f"generated gRPC code is stale: {names}; run python tools/gen_proto.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
