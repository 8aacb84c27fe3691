"""Local clusters of real `kraft-server` processes on loopback, for the integration tests, the
chaos campaign and the benchmarks (nothing in the product imports this package)."""
