"""Processes a peer benchmark starts: each in its own session and process group (so a Ctrl-C at
the terminal reaches only the benchmark, and a stop reaches the whole group), with
PR_SET_PDEATHSIG=SIGKILL so the kernel kills it should the benchmark die without cleaning up,
and one `ProcessGroup.stop_all()` that kills and reaps everything still running."""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.ports import free_ports as free_ports  # re-exported for the peers

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/PID/stat; NaN once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class ProcessGroup:
    """Every process one peer cluster runs, by name (a name can be started again after a stop)."""

    root: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.Popen:
        old = self.procs.get(name)
        if old is not None and old.poll() is None:
            raise RuntimeError(f"{name} is already running (pid {old.pid})")
        log = self.root / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=_die_with_parent, env=env, cwd=cwd)
        self.procs[name] = proc
        return proc

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def signal(self, name: str, sig: int) -> None:
        """Signal the whole process group of `name` (a launcher script and what it runs)."""
        proc = self.procs[name]
        if proc.poll() is not None:
            raise RuntimeError(f"{name} is not running")
        os.killpg(proc.pid, sig)

    def wait(self, name: str, timeout_s: float) -> int:
        return self.procs[name].wait(timeout=timeout_s)

    def kill(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is None:
            return
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be caught
            print(f"warning: {name} (pid {proc.pid}) did not exit", file=sys.stderr)

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.kill(name)

    def cpu_seconds(self, name: str) -> float:
        proc = self.procs.get(name)
        return proc_cpu_seconds(proc.pid) if proc is not None else float("nan")

    def log_tail(self, name: str, chars: int = 2000) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def which(program: str, *extra_dirs: str) -> str | None:
    found = shutil.which(program)
    if found:
        return found
    for directory in extra_dirs:
        candidate = Path(directory) / program
        if candidate.exists():
            return str(candidate)
    return None
