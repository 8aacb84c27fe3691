"""The node config's addresses: listeners (`NAME://host:port`), controller voters
(`id@host:port`), bootstrap servers and the listener-to-security-protocol map, parsed from
Kafka's LIST values. Each parser takes the raw string and raises ValueError(reason);
server/config_keys.py names them in the keys it declares, and server/config_rules.py checks
the rules across keys (which listener a controller advertises, and so on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from metadata.config_def import INT_MAX, split_list

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_LISTENER_NAME = re.compile(r"[A-Z0-9_]+")
_HOST = re.compile(r"[0-9A-Za-z._%-]+")
_IPV6_HOST = re.compile(r"[0-9A-Za-z.:%_-]+")
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


# -- endpoints -------------------------------------------------------------------------------


def _format_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True, order=True)
class Endpoint:
    """A host and port; IPv6 hosts are stored bare and printed in brackets."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{_format_host(self.host)}:{self.port}"


@dataclass(frozen=True)
class Listener:
    """A named listener: `NAME://host:port`. An empty host binds every interface."""

    name: str
    host: str
    port: int

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.host, self.port)

    def __str__(self) -> str:
        return f"{self.name}://{_format_host(self.host)}:{self.port}"


# -- value parsers: each takes the raw string and raises ValueError(reason) --------------------


def split_entries(raw: str) -> list[str]:
    """Kafka's LIST type; an empty entry (`a,,b`) is an error here."""
    items = split_list(raw)
    if "" in items:
        raise ValueError("it has an empty entry; remove the stray comma")
    return items


def _parse_port(text: str, entry: str, lo: int) -> int:
    if not text.isascii() or not text.isdigit():
        raise ValueError(f'the port of "{entry}" must be a number between {lo} and 65535')
    port = int(text)
    if not lo <= port <= 65535:
        raise ValueError(f'the port of "{entry}" must be between {lo} and 65535, not {port}')
    return port


def _parse_host_port(text: str, entry: str, *, min_port: int, host_required: bool) -> Endpoint:
    """`host:port`, `[ipv6]:port`, or (when the host is optional) `:port`."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise ValueError(f'"{entry}" has a "[" without a matching "]"')
        host, rest = text[1:close], text[close + 1 :]
        if not rest.startswith(":"):
            raise ValueError(f'"{entry}" must have a :port after the "]"')
        if not _IPV6_HOST.fullmatch(host):
            raise ValueError(f'"{entry}" has an invalid IPv6 address [{host}]')
        return Endpoint(host, _parse_port(rest[1:], entry, min_port))
    host, colon, port = text.rpartition(":")
    if not colon:
        raise ValueError(f'"{entry}" has no :port')
    if ":" in host:
        raise ValueError(f'"{entry}": write an IPv6 address in brackets, e.g. [::1]:{port}')
    if host and not _HOST.fullmatch(host):
        raise ValueError(f'"{entry}" has an invalid host name "{host}"')
    if not host and host_required:
        raise ValueError(f'"{entry}" has no host')
    return Endpoint(host, _parse_port(port, entry, min_port))

def parse_voters(raw: str) -> dict[int, Endpoint]:
    """`controller.quorum.voters`: `id@host:port,...` -> {id: Endpoint}, in the given order."""
    voters: dict[int, Endpoint] = {}
    for entry in split_entries(raw):
        voter_id, at, address = entry.partition("@")
        if not at:
            raise ValueError(
                f'entry "{entry}" must be in the form {{id}}@{{host}}:{{port}}, '
                "e.g. 1@127.0.0.1:9093"
            )
        if not voter_id.isascii() or not voter_id.isdigit():
            raise ValueError(f'failed to parse voter ID as a non-negative integer from "{entry}"')
        node_id = int(voter_id)
        if node_id > INT_MAX:
            raise ValueError(f'voter ID {node_id} in "{entry}" is too large')
        if node_id in voters:
            raise ValueError(f"voter ID {node_id} appears more than once")
        try:
            endpoint = _parse_host_port(address, entry, min_port=1, host_required=True)
        except ValueError as err:
            raise ValueError(f"{err} (each entry should be {{id}}@{{host}}:{{port}})") from None
        for other_id, other in voters.items():
            if other == endpoint:
                raise ValueError(f"voters {other_id} and {node_id} have the same address {other}")
        voters[node_id] = endpoint
    return voters


def parse_endpoints(raw: str) -> tuple[Endpoint, ...]:
    """`controller.quorum.bootstrap.servers`: `host:port,...`."""
    endpoints: list[Endpoint] = []
    for entry in split_entries(raw):
        endpoint = _parse_host_port(entry, entry, min_port=1, host_required=True)
        if endpoint in endpoints:
            raise ValueError(f"{endpoint} appears more than once")
        endpoints.append(endpoint)
    return tuple(endpoints)


def normalise_listener_name(name: str, entry: str) -> str:
    # Kafka normalises listener names to upper case (ListenerName.normalised).
    normalised = name.upper()
    if not _LISTENER_NAME.fullmatch(normalised):
        raise ValueError(
            f'the listener name "{name}" in "{entry}" may contain only letters, digits and '
            "underscores (e.g. CONTROLLER)"
        )
    return normalised


def _listeners(raw: str, *, distinct_ports: bool) -> dict[str, Listener]:
    listeners: dict[str, Listener] = {}
    for entry in split_entries(raw):
        name, sep, address = entry.partition("://")
        if not sep:
            raise ValueError(
                f'entry "{entry}" must be in the form NAME://host:port, '
                "e.g. CONTROLLER://127.0.0.1:9093"
            )
        name = normalise_listener_name(name, entry)
        endpoint = _parse_host_port(address, entry, min_port=0, host_required=False)
        listener = Listener(name, endpoint.host, endpoint.port)
        if name in listeners:
            raise ValueError(f"the listener name {name} appears more than once")
        for other in listeners.values():
            # Port 0 asks the OS for a free port, so two of them never clash.
            if distinct_ports and listener.port != 0 and other.port == listener.port:
                raise ValueError(
                    f"{other} and {listener} use the same port; each listener needs its own port"
                )
        listeners[name] = listener
    return listeners


def parse_listeners(raw: str) -> dict[str, Listener]:
    """`listeners`: `NAME://host:port,...` -> {NAME: Listener}; names and ports distinct."""
    return _listeners(raw, distinct_ports=True)


def parse_advertised_listeners(raw: str) -> dict[str, Listener]:
    # Kafka allows advertised ports to repeat (hosts behind different load balancers).
    return _listeners(raw, distinct_ports=False)


def parse_listener_names(raw: str) -> tuple[str, ...]:
    names = tuple(normalise_listener_name(name, raw) for name in split_entries(raw))
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"duplicate listener names: {', '.join(duplicates)}")
    return names


def parse_protocol_map(raw: str) -> dict[str, str]:
    protocols: dict[str, str] = {}
    for entry in split_entries(raw):
        name, colon, protocol = entry.partition(":")
        if not colon:
            raise ValueError(f'entry "{entry}" must be in the form NAME:PROTOCOL')
        name = normalise_listener_name(name.strip(), entry)
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f'"{entry}" names an unknown security protocol; use one of '
                + ", ".join(SECURITY_PROTOCOLS)
            )
        if name in protocols:
            raise ValueError(f"the listener name {name} appears more than once")
        protocols[name] = protocol
    return protocols
