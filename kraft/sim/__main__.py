"""Run simulator seeds: `python -m kraft.sim --seeds 1000 [--scenario NAME | --membership]
[--jobs 2]`.

Seeds are spread over the scenarios (seed s runs scenario s mod the number of scenarios unless
one is named; `--membership` spreads them over the membership scenarios only). A failure
prints the one command that replays it; `--seed S --scenario NAME` replays exactly that run,
with `--verbose` for the protocol's debug log.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from kraft.sim.cluster import SimCluster
from kraft.sim.invariants import SimViolation
from kraft.sim.membership_scenarios import MEMBERSHIP_SCENARIOS
from kraft.sim.scenarios import SCENARIOS, ScenarioStats
from kraft.sim.storage_scenarios import STORAGE_SCENARIOS

ALL_SCENARIOS: dict[str, Callable[[int], SimCluster]] = {
    **SCENARIOS, **STORAGE_SCENARIOS, **MEMBERSHIP_SCENARIOS,
}
NAMES = sorted(ALL_SCENARIOS)
MEMBERSHIP_NAMES = sorted(MEMBERSHIP_SCENARIOS)


def run(name: str, seed: int) -> ScenarioStats:
    cluster = ALL_SCENARIOS[name](seed)
    return ScenarioStats(
        events=cluster.event_count,
        virtual_ms=cluster.now,
        committed=cluster.committed_offset(),
        acknowledged=cluster.verified_acks,
    )


@dataclass(frozen=True)
class SeedResult:
    scenario: str
    seed: int
    ok: bool
    detail: str
    events: int
    virtual_ms: int
    cpu_s: float


def run_seed(scenario: str, seed: int) -> SeedResult:
    started = time.process_time()
    try:
        stats = run(scenario, seed)
    except SimViolation as exc:
        return SeedResult(scenario, seed, False, str(exc), exc.event, exc.time_ms,
                          time.process_time() - started)
    except Exception:  # any crash of the core is a finding too
        return SeedResult(scenario, seed, False, traceback.format_exc(limit=8), 0, 0,
                          time.process_time() - started)
    return SeedResult(scenario, seed, True, "", stats.events, stats.virtual_ms,
                      time.process_time() - started)


def plan(
    seeds: int, first_seed: int, scenario: str | None, names: list[str] | None = None
) -> list[tuple[str, int]]:
    if scenario is not None:
        return [(scenario, s) for s in range(first_seed, first_seed + seeds)]
    names = names or NAMES
    return [(names[s % len(names)], s) for s in range(first_seed, first_seed + seeds)]


def replay_command(result: SeedResult) -> str:
    return f"python -m kraft.sim --scenario {result.scenario} --seed {result.seed} --verbose"


def run_many(runs: list[tuple[str, int]], jobs: int) -> list[SeedResult]:
    if jobs <= 1:
        return [run_seed(name, seed) for name, seed in runs]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(run_seed, *zip(*runs, strict=True), chunksize=4))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kraft.sim", description=__doc__)
    parser.add_argument("--seeds", type=int, default=1, help="how many seeds to run")
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--scenario", choices=NAMES, help="run only this scenario")
    parser.add_argument("--membership", action="store_true",
                        help="spread the seeds over the membership scenarios only")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--verbose", action="store_true", help="log the protocol at DEBUG")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1 or args.seed < 0:
        parser.error("--seeds and --jobs must be >= 1 and --seed >= 0")
    # The protocol's own warnings (check-quorum resignations, ...) are expected under faults.
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.CRITICAL, format="%(name)s %(message)s"
    )
    started = time.monotonic()
    names = MEMBERSHIP_NAMES if args.membership else None
    results = run_many(plan(args.seeds, args.seed, args.scenario, names), args.jobs)
    wall = time.monotonic() - started
    failures = [r for r in results if not r.ok]
    events = sum(r.events for r in results)
    cpu = sum(r.cpu_s for r in results)
    for failure in failures:
        print(f"FAIL {failure.scenario} seed {failure.seed}: {failure.detail.strip()}")
        print(f"  replay: {replay_command(failure)}")
    by_scenario: dict[str, int] = {}
    for r in results:
        by_scenario[r.scenario] = by_scenario.get(r.scenario, 0) + 1
    print(
        f"{len(results) - len(failures)} passed, {len(failures)} failed "
        f"({len(results)} seeds over {len(by_scenario)} scenarios; {events} events, "
        f"{events / cpu if cpu else 0:,.0f} events per CPU-second, {wall:.1f} s wall)"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
