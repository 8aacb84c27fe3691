"""Is anything listening where a broker registered? The active controller's probe after a
broker's liveness stream broke (metadata/broker_liveness.py).

A TCP connection to each of the broker's registered listeners: a refusal (RST, or an ICMP
port-unreachable) means no socket is bound there, which a live broker never shows — it binds
its listeners before it registers and keeps them until it exits. Anything else — a connection
made, no answer within the timeout, an unreachable network, a name that does not resolve — is
no proof of death, and the probe says so. Nothing is sent on a connection that opens; it is
closed at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from metadata.records import Endpoint

# A listener registered without a routable host: connecting there would ask this controller's
# own machine, whose refusal says nothing of the broker's.
UNROUTABLE_HOSTS = frozenset({"", "0.0.0.0", "::"})


async def refused(host: str, port: int, timeout_s: float) -> bool:
    """True only when a TCP connection to host:port is refused within `timeout_s`."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except ConnectionRefusedError:
        return True
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return False


async def all_refused(endpoints: Iterable[Endpoint], timeout_s: float) -> bool:
    """True when the broker registered at least one listener and every one refused."""
    targets = [(e.host, e.port) for e in endpoints]
    if not targets or any(host in UNROUTABLE_HOSTS for host, _ in targets):
        return False
    answers = await asyncio.gather(*(refused(host, port, timeout_s) for host, port in targets))
    return all(answers)
