"""The chaos campaign on real processes: `python -m tests.chaos --help`, docs/chaos.md."""
