"""The process composition root and the command-line tools: role config files, storage checks,
`kraft-server` start-up, `kraft-admin` and `kraft-storage`. Nothing below imports this package."""

import sys


def _import_kio_without_hypothesis() -> None:
    """kio.static._phantom imports hypothesis.strategies whenever it can (to register strategies
    for kio's types, which nothing here uses): with hypothesis installed, as in any test
    environment, that was 0.2-0.4 s of every broker's start. Loaded first with hypothesis
    hidden, kio's other modules find it loaded. A process that already imported hypothesis
    keeps kio's hook."""
    if "hypothesis" in sys.modules or "kio.static._phantom" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # makes `import` fail
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        del sys.modules["hypothesis"]


_import_kio_without_hypothesis()
