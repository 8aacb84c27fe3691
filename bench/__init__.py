"""Benchmarks: `python -m bench.<name>`; each run is recorded in docs/benchmarks-history.md and the
latest figure of each measure in docs/benchmarks.md (the results page)."""
