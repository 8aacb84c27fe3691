"""`make audit-demo`: a real three-controller cluster runs briefly (brokers register, topics
are created through kraft-admin, a broker is fenced, the active controller is killed with
SIGKILL, the broker returns, the killed controller rejoins), then `kraft-audit` audits the
three nodes' logs. The report stays in build/audit-demo/ (or the directory given)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from audit import cli
from tests.audit.real_run import run_cluster


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "build/audit-demo").resolve()
    work = Path(tempfile.mkdtemp(prefix="kraft-audit-demo-"))
    try:
        print(f"running a 3-controller cluster under {work} ...", flush=True)
        run = run_cluster(work)
        print(f"controller leadership seen: {run.leaders}; killed node {run.killed} (SIGKILL); "
              f"broker {run.fenced_broker} fenced and re-registered", flush=True)
        args = [arg for n in sorted(run.node_dirs) for arg in ("--log-dir", str(run.node_dirs[n]))]
        code = cli.main([*args, "--out", str(out), "--master", "local[2]"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"kraft-audit exit status {code}; open {out / 'report.html'}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
