"""The deterministic cluster simulator: the real core, in-memory logs, a virtual clock and a
seeded lossy network, with safety invariants checked after every event."""
