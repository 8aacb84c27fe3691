"""Benchmarks: `python -m bench.<name>`; results go to docs/benchmarks.md."""
