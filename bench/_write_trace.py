"""A tracer for `bench.write_trace_bench`, installed into a controller process before it starts
(`CodeCluster(prelude=...)`): it wraps the functions one Admin write passes through and records
`time.monotonic_ns()` on entry and exit. CLOCK_MONOTONIC is one clock for every process on a
Linux machine, so the events of the client and the three controllers line up on one time axis.

Events are kept in memory and written to `<directory>/events-<pid>.txt` when the process exits
(the bench stops the controllers with SIGTERM, which they handle by shutting down cleanly).
Measurement only: nothing in the product imports this module.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import time
from typing import Any

_events: list[str] = []


def _record(name: str) -> None:
    _events.append(f"{time.monotonic_ns()} {name}\n")  # list.append is atomic under the GIL


def _wrap(owner: Any, attribute: str, label: str) -> None:
    """Record `label+` and `label-` around every call of `owner.attribute`."""
    original = getattr(owner, attribute)  # AttributeError: the product changed; fix the tracer
    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def traced_async(*args: Any, **kwargs: Any) -> Any:
            _record(label + "+")
            try:
                return await original(*args, **kwargs)
            finally:
                _record(label + "-")
        setattr(owner, attribute, traced_async)
    else:
        @functools.wraps(original)
        def traced(*args: Any, **kwargs: Any) -> Any:
            _record(label + "+")
            try:
                return original(*args, **kwargs)
            finally:
                _record(label + "-")
        setattr(owner, attribute, traced)


def install(directory: str) -> None:
    """Wrap the write path's functions; write the events to `directory` at exit."""
    import kraft.log.segmented as segmented
    import kraft.node.raft_node as raft_node
    import kraft.node.service as service
    import kraft.node.transport as transport
    import metadata.admin_service as admin_service

    convert = service.convert
    to_pb = convert.response_to_pb

    def response_to_pb(response: Any) -> Any:
        # A Fetch answer leaving the leader; the ones carrying records are the write's.
        _record("answer_out_records" if getattr(response, "records", None) else "answer_out")
        return to_pb(response)

    convert.response_to_pb = response_to_pb
    _wrap(convert, "fetch_request", "fetch_in")  # a Fetch arriving at the leader
    _wrap(admin_service.AdminServicer, "_call", "admin")  # the Admin handler, whole
    _wrap(raft_node.RaftNode, "submit", "submit")  # the controller's append
    _wrap(raft_node.RaftNode, "_process", "process")  # one step of the core's output
    _wrap(raft_node.RaftNode, "_poll_listeners", "listeners")  # replay of committed batches
    _wrap(segmented.SegmentFlushJob, "run", "flush_job")  # write + fdatasync, log thread
    _wrap(segmented.SegmentedLog, "complete_flush", "flush_done")  # back on the loop
    _wrap(transport.FetchStream, "fetch", "fetch_call")  # a follower's Fetch, out and back

    def dump() -> None:
        with open(os.path.join(directory, f"events-{os.getpid()}.txt"), "w") as out:
            out.writelines(_events)

    atexit.register(dump)
