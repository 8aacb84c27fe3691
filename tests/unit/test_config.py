"""Java-properties parsing and writing, and role-config validation with its exact messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.properties import (
    PropertiesError,
    format_properties,
    load_properties,
    parse_entries,
    parse_properties,
)
from server.config import ConfigError, NodeConfig, load_config, parse_config
from server.config_keys import REGISTRY
from server.config_listeners import Endpoint, Listener
from server.config_rules import IGNORED_KAFKA_KEYS, REJECTED_KAFKA_KEYS

ROOT = Path(__file__).resolve().parents[2]
VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
BASE = {
    "process.roles": "controller",
    "node.id": "1",
    "controller.quorum.voters": VOTERS,
    "listeners": "CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "log.dirs": "/data/c1",
}


def config(**overrides: str | None) -> NodeConfig:
    """BASE with keys replaced (use `__` for `.`); None removes a key."""
    props = dict(BASE)
    for name, value in overrides.items():
        key = name.replace("__", ".")
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    return parse_config(props, "test.properties")


def error(**overrides: str | None) -> str:
    with pytest.raises(ConfigError) as info:
        config(**overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


# -- properties: reading ---------------------------------------------------------------------


def test_separators_and_whitespace() -> None:
    text = "a=1\nb: 2\nc 3\n  d\t =  4  \ne\nf=\ng==x\nh = : y\ni:=z\nj\f\fk\n"
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "4  ",  # trailing whitespace is part of the value
        "e": "",
        "f": "",
        "g": "=x",
        "h": ": y",
        "i": "=z",
        "j": "k",
    }


def test_comments_and_blank_lines() -> None:
    text = "# a comment\n   ! another = one\n\n \t \nkey=value # not a comment\n#x=y\n"
    assert parse_properties(text) == {"key": "value # not a comment"}


def test_escaped_separators_in_keys() -> None:
    text = "a\\=b=c\nd\\ e f\ng\\:h:i\n\\#j=k\n"
    assert parse_properties(text) == {"a=b": "c", "d e": "f", "g:h": "i", "#j": "k"}


def test_escapes() -> None:
    text = "k=\\t\\n\\r\\f\\\\\\x\\=\\u0041\\u00e9\nemoji=\\uD83D\\uDE00\n"
    assert parse_properties(text) == {"k": "\t\n\r\f\\x=Aé", "emoji": "\U0001f600"}


def test_line_continuations() -> None:
    text = (
        "list=a,\\\n"
        "     b,\\\n"
        "\t#c\n"  # inside a continuation this is value text, not a comment
        "two=x\\\\\n"  # an even number of backslashes does not continue
        "# comment \\\n"
        "three=3\n"
        "blank=a\\\n"
        "\n"  # an empty continuation line ends the logical line
        "four=4\n"
        "dangling=z\\"
    )
    assert parse_properties(text) == {
        "list": "a,b,#c",
        "two": "x\\",
        "three": "3",
        "blank": "a",
        "four": "4",
        "dangling": "z",
    }


def test_line_endings_and_line_numbers() -> None:
    text = "a=1\r\nb=2\\\r  3\rc=4\n\nd=5"
    assert parse_entries(text) == [("a", "1", 1), ("b", "23", 2), ("c", "4", 4), ("d", "5", 6)]


def test_duplicate_keys_last_wins_first_position_kept() -> None:
    assert list(parse_properties("a=1\nb=2\na=3\n").items()) == [("a", "3"), ("b", "2")]


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("a=1\nb=\\u12G4\n", 2, "malformed \\uXXXX escape \\u12G4 (need 4 hex digits)"),
        ("a=1\n\nb=\\u00\n", 3, "malformed \\uXXXX escape \\u00 (need 4 hex digits)"),
        ("k\\u00=v\n", 1, "malformed \\uXXXX escape \\u00 (need 4 hex digits)"),
        ("x=\\uD83D\n", 1, "a \\uD800-\\uDFFF escape is not part of a surrogate pair"),
    ],
)
def test_malformed_escapes_name_file_and_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(PropertiesError) as info:
        parse_properties(text, "conf/x.properties")
    assert (info.value.source, info.value.line, info.value.reason) == (
        "conf/x.properties",
        line,
        reason,
    )
    assert str(info.value) == f"conf/x.properties:{line}: {reason}"


def test_file_is_utf8_with_optional_bom(tmp_path: Path) -> None:
    path = tmp_path / "a.properties"
    path.write_bytes("\ufeffname=café\n".encode())
    assert load_properties(path) == {"name": "café"}


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "a.properties"
    path.write_bytes(b"a=1\nb=\xff\n")
    with pytest.raises(PropertiesError) as info:
        load_properties(path)
    assert str(info.value) == f"{path}:2: the file is not valid UTF-8"


# -- properties: writing ---------------------------------------------------------------------


def test_writer_escapes_like_java() -> None:
    props = {"a b": " lead and trail ", "k=:#!": "v=:#!", "ü": "é\t\n\U0001f600", "": "\\"}
    text = format_properties(props, comments=["", "two\nlines"])
    assert text == (
        "#\n"
        "#two\n"
        "#lines\n"
        "a\\ b=\\ lead and trail \n"
        "k\\=\\:\\#\\!=v\\=\\:\\#\\!\n"
        "\\u00FC=\\u00E9\\t\\n\\uD83D\\uDE00\n"
        "=\\\\\n"
    )
    assert text.isascii()
    assert parse_properties(text) == props


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.text(st.characters(exclude_categories=("Cs",))),
        st.text(st.characters(exclude_categories=("Cs",))),
        max_size=5,
    )
)
def test_writer_round_trips(props: dict[str, str]) -> None:
    assert parse_properties(format_properties(props)) == props


# -- config: the example files and defaults --------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3])
def test_example_configs_are_valid(n: int) -> None:
    path = ROOT / "config" / f"controller-{n}.properties"
    cfg = load_config(path)
    assert cfg.warnings == ()
    assert cfg.source == str(path)
    assert cfg.process_roles == frozenset({"controller"})
    assert cfg.node_id == n
    assert [str(f"{i}@{e}") for i, e in cfg.voters.items()] == [
        "1@127.0.0.1:19091",
        "2@127.0.0.1:19092",
        "3@127.0.0.1:19093",
    ]
    assert cfg.controller_listener == Listener("CONTROLLER", "127.0.0.1", 19090 + n)
    assert cfg.metrics_port == 19190 + n
    assert cfg.metrics_address == Endpoint("127.0.0.1", 19190 + n)
    assert cfg.log_dirs == (f"./demo-data/controller-{n}",)
    assert cfg.metadata_log_dir == f"./demo-data/controller-{n}"


@pytest.mark.parametrize("n", [4, 5, 6])
def test_example_broker_configs_are_valid(n: int) -> None:
    cfg = load_config(ROOT / "config" / f"broker-{n}.properties")
    controller = load_config(ROOT / "config" / "controller-1.properties")
    assert cfg.warnings == ()
    assert cfg.process_roles == frozenset({"broker"}) and cfg.node_id == n
    assert cfg.voters == controller.voters  # observes the example controllers
    assert cfg.controller_listener is None
    assert cfg.listeners == {"PLAINTEXT": Listener("PLAINTEXT", "127.0.0.1", 9090 + n),
                             "ADMIN": Listener("ADMIN", "127.0.0.1", 19090 + n)}
    assert cfg.kafka_listener_names == ("PLAINTEXT",)
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.grpc_listener_names == ("ADMIN",)
    assert cfg.metrics_address == Endpoint("127.0.0.1", 19190 + n)
    assert cfg.value("broker.heartbeat.interval.ms") == 2000
    assert cfg.value("initial.broker.registration.timeout.ms") == 60000
    assert cfg.value("broker.rack") is None


@pytest.mark.parametrize("n", [1, 2, 3])
def test_example_combined_configs_are_valid(n: int) -> None:
    cfg = load_config(ROOT / "config" / f"combined-{n}.properties")
    assert cfg.warnings == ()
    assert cfg.is_broker and cfg.is_controller and cfg.node_id == n
    assert cfg.controller_listener == Listener("CONTROLLER", "127.0.0.1", 29090 + n)
    assert cfg.listeners["PLAINTEXT"] == Listener("PLAINTEXT", "127.0.0.1", 9290 + n)
    assert cfg.listeners["ADMIN"] == Listener("ADMIN", "127.0.0.1", 29190 + n)
    assert sorted(cfg.voters) == [1, 2, 3]


@pytest.mark.parametrize("n", [1, 2, 3])
def test_example_dynamic_controller_configs_are_valid(n: int) -> None:
    cfg = load_config(ROOT / "config" / f"dynamic-controller-{n}.properties")
    assert cfg.warnings == ()
    assert cfg.is_controller and not cfg.is_broker and cfg.node_id == n
    assert cfg.voters == {}  # the voter set comes from the log (KIP-853)
    assert cfg.bootstrap_servers == tuple(Endpoint("127.0.0.1", 39090 + i) for i in (1, 2, 3))
    assert cfg.controller_listener == Listener("CONTROLLER", "127.0.0.1", 39090 + n)


def test_example_dynamic_broker_config_is_valid() -> None:
    cfg = load_config(ROOT / "config" / "dynamic-broker-4.properties")
    controller = load_config(ROOT / "config" / "dynamic-controller-1.properties")
    assert cfg.warnings == ()
    assert cfg.process_roles == frozenset({"broker"}) and cfg.voters == {}
    assert cfg.bootstrap_servers == controller.bootstrap_servers


def test_broker_lifecycle_keys() -> None:
    cfg = config(broker__rack=" rack-a ", initial__broker__registration__timeout__ms="500",
                 broker__heartbeat__interval__ms="100")
    assert cfg.value("broker.rack") == "rack-a"
    assert cfg.value("initial.broker.registration.timeout.ms") == 500
    assert cfg.value("broker.heartbeat.interval.ms") == 100
    assert cfg.warnings == ()  # supported now, no longer "accepted and ignored"
    assert error(broker__rack=" ") == (
        'Invalid value "" for configuration broker.rack: must not be empty (remove the '
        "line if the broker has no rack)."
    )
    assert "initial.broker.registration.timeout.ms" in error(
        initial__broker__registration__timeout__ms="0")


def test_defaults_are_kafkas() -> None:
    cfg = config(log__dirs=None)
    assert cfg.log_dirs == ("/tmp/kraft-combined-logs",)
    assert cfg.metadata_log_dir == "/tmp/kraft-combined-logs"
    assert (
        cfg.election_timeout_ms,
        cfg.fetch_timeout_ms,
        cfg.election_backoff_max_ms,
        cfg.request_timeout_ms,
        cfg.retry_backoff_ms,
    ) == (1000, 2000, 1000, 2000, 20)
    assert (
        cfg.metadata_log_segment_bytes,
        cfg.metadata_log_segment_min_bytes,
        cfg.metadata_max_idle_interval_ms,
        cfg.metadata_max_retention_bytes,
        cfg.metadata_max_retention_ms,
        cfg.metadata_log_max_record_bytes_between_snapshots,
        cfg.metadata_log_max_snapshot_interval_ms,
    ) == (1073741824, 8388608, 500, 104857600, 604800000, 20971520, 3600000)
    assert (cfg.broker_session_timeout_ms, cfg.broker_heartbeat_interval_ms,
            cfg.initial_broker_registration_timeout_ms, cfg.broker_rack) == (
        9000, 2000, 60000, None)
    assert cfg.bootstrap_servers == ()
    assert cfg.advertised_listeners == cfg.listeners
    assert cfg.metrics_port is None and cfg.metrics_address is None
    assert cfg.test_hooks_enabled is False
    assert cfg.warnings == ()
    assert cfg.raw == {key: value for key, value in BASE.items() if key != "log.dirs"}
    assert cfg.value("broker.session.timeout.ms") == 9000  # any registered key, by name


def test_overrides_are_typed() -> None:
    cfg = config(
        controller__quorum__election__timeout__ms="150",
        controller__quorum__retry__backoff__ms="0",
        metadata__log__segment__min__bytes="1024",
        metadata__log__segment__bytes="4096",
        metadata__max__retention__bytes="-1",
        metadata__log__max__snapshot__interval__ms="0",
        metrics__port="0",
    )
    assert cfg.election_timeout_ms == 150
    assert cfg.retry_backoff_ms == 0
    assert cfg.metadata_log_segment_bytes == 4096
    assert cfg.metadata_max_retention_bytes == -1
    assert cfg.metadata_log_max_snapshot_interval_ms == 0
    assert cfg.metrics_address == Endpoint("127.0.0.1", 0)


def test_log_dirs_and_metadata_log_dir() -> None:
    assert config(log__dirs=None, log__dir="/x").log_dirs == ("/x",)
    cfg = config(log__dirs="/a, /b", log__dir="/x", metadata__log__dir="/m")
    assert cfg.log_dirs == ("/a", "/b")
    assert cfg.metadata_log_dir == "/m"
    assert cfg.storage_dirs == ("/a", "/b", "/m")
    assert config(log__dirs="/a,/b", metadata__log__dir="/b/").storage_dirs == ("/a", "/b")


def test_endpoint_and_listener_text() -> None:
    assert str(Endpoint("127.0.0.1", 9093)) == "127.0.0.1:9093"
    assert str(Endpoint("::1", 9093)) == "[::1]:9093"
    assert str(Listener("CONTROLLER", "", 9093)) == "CONTROLLER://:9093"
    assert str(Listener("CONTROLLER", "::1", 9093)) == "CONTROLLER://[::1]:9093"


def test_ipv6_voters_and_listeners() -> None:
    cfg = config(
        controller__quorum__voters="1@[::1]:9093,2@[fe80::1%eth0]:9094",
        listeners="controller://[::1]:9093",
    )
    assert cfg.voters == {1: Endpoint("::1", 9093), 2: Endpoint("fe80::1%eth0", 9094)}
    assert cfg.listeners == {"CONTROLLER": Listener("CONTROLLER", "::1", 9093)}


def test_combined_mode_with_ephemeral_broker_ports() -> None:
    cfg = config(
        process__roles="broker,controller",
        listeners="PLAINTEXT://:0,EXTRA://:0,CONTROLLER://127.0.0.1:9093",
        listener__security__protocol__map="PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
    )
    assert cfg.is_broker and cfg.is_controller
    assert cfg.controller_listener == Listener("CONTROLLER", "127.0.0.1", 9093)


def test_broker_only_node() -> None:
    cfg = config(process__roles="broker", node__id="7", listeners="PLAINTEXT://:9092")
    assert cfg.controller_listener is None
    assert cfg.metrics_address is None
    assert config(
        process__roles="broker",
        node__id="7",
        controller__quorum__voters="",
        controller__quorum__bootstrap__servers="127.0.0.1:9093,[::1]:9094",
        listeners="PLAINTEXT://:9092",
    ).bootstrap_servers == (Endpoint("127.0.0.1", 9093), Endpoint("::1", 9094))


def test_broker_id_is_a_synonym_of_node_id() -> None:
    assert config(node__id=None, broker__id="1").node_id == 1
    assert config(broker__id="1").node_id == 1


def test_explicit_advertised_listener() -> None:
    cfg = config(
        listeners="CONTROLLER://:9093", advertised__listeners="CONTROLLER://127.0.0.1:9093"
    )
    assert cfg.listeners["CONTROLLER"] == Listener("CONTROLLER", "", 9093)
    assert cfg.advertised_listeners["CONTROLLER"] == Listener("CONTROLLER", "127.0.0.1", 9093)


# -- config: every validation rule, with its message -----------------------------------------


def test_missing_node_id() -> None:
    assert (
        error(node__id=None)
        == 'Missing required configuration "node.id" which has no default value.'
    )


def test_missing_process_roles() -> None:
    assert error(process__roles=None) == (
        'Missing required configuration "process.roles" which has no default value.'
    )


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "", "99999999999"])
def test_invalid_node_id(value: str) -> None:
    shown = value or '""'
    expected = f"Invalid value {shown} for configuration node.id: must be an integer >= 0."
    if value == "99999999999":
        expected = (
            "Invalid value 99999999999 for configuration node.id: must be an integer between 0 "
            "and 2147483647."
        )
    assert error(node__id=value) == expected


def test_node_id_not_among_voters_for_a_controller() -> None:
    assert error(node__id="4") == (
        "The node.id 4 must be one of the voters in controller.quorum.voters "
        "(1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095) when process.roles contains "
        "'controller'."
    )


def test_broker_only_node_id_among_voters() -> None:
    assert error(process__roles="broker", listeners="PLAINTEXT://:9092") == (
        "The node.id 1 must not be one of the voters in controller.quorum.voters "
        "(1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095) when process.roles=broker: give "
        "the broker an id no controller uses."
    )


def test_broker_id_differs_from_node_id() -> None:
    assert error(broker__id="2") == (
        "You must set node.id to the same value as broker.id (node.id=1, broker.id=2); remove "
        "broker.id, it is the old name of node.id."
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (
            "",
            "must list this node's roles, 'controller' and/or 'broker' (an empty process.roles "
            "means ZooKeeper mode, which is not supported)",
        ),
        (
            "controller,foo",
            "unknown process role 'foo' (only 'broker' and 'controller' are allowed roles)",
        ),
        ("controller,controller", "duplicate role names found: controller"),
        ("controller,", "it has an empty entry; remove the stray comma"),
    ],
)
def test_invalid_process_roles(value: str, reason: str) -> None:
    shown = value or '""'
    assert error(process__roles=value) == (
        f"Invalid value {shown} for configuration process.roles: {reason}."
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("1@localhost", '"1@localhost" has no :port (each entry should be {id}@{host}:{port})'),
        (
            "127.0.0.1:9093",
            'entry "127.0.0.1:9093" must be in the form {id}@{host}:{port}, e.g. 1@127.0.0.1:9093',
        ),
        ("x@h:1", 'failed to parse voter ID as a non-negative integer from "x@h:1"'),
        ("-1@h:1", 'failed to parse voter ID as a non-negative integer from "-1@h:1"'),
        ("1@:9093", '"1@:9093" has no host (each entry should be {id}@{host}:{port})'),
        (
            "1@h:0",
            'the port of "1@h:0" must be between 1 and 65535, not 0 (each entry should '
            "be {id}@{host}:{port})",
        ),
        (
            "1@h:65536",
            'the port of "1@h:65536" must be between 1 and 65535, not 65536 (each '
            "entry should be {id}@{host}:{port})",
        ),
        (
            "1@h:abc",
            'the port of "1@h:abc" must be a number between 1 and 65535 (each entry '
            "should be {id}@{host}:{port})",
        ),
        (
            "1@::1:9093",
            '"1@::1:9093": write an IPv6 address in brackets, e.g. [::1]:9093 (each '
            "entry should be {id}@{host}:{port})",
        ),
        (
            "1@h/x:9093",
            '"1@h/x:9093" has an invalid host name "h/x" (each entry should be {id}@{host}:{port})',
        ),
        ("1@h:1,1@g:2", "voter ID 1 appears more than once"),
        ("1@h:1,2@h:1", "voters 1 and 2 have the same address h:1"),
        ("1@h:1,,2@g:2", "it has an empty entry; remove the stray comma"),
    ],
)
def test_invalid_voters(value: str, reason: str) -> None:
    assert error(controller__quorum__voters=value) == (
        f"Invalid value {value} for configuration controller.quorum.voters: {reason}."
    )


def test_invalid_bootstrap_servers() -> None:
    assert error(controller__quorum__bootstrap__servers="h:1,h:1") == (
        "Invalid value h:1,h:1 for configuration controller.quorum.bootstrap.servers: h:1 "
        "appears more than once."
    )


def test_no_voters_and_no_bootstrap_servers() -> None:
    assert error(controller__quorum__voters=None) == (
        "Either controller.quorum.voters must list the controllers as id@host:port,... or "
        "controller.quorum.bootstrap.servers must list them as host:port,...; both are empty."
    )


def test_a_dynamic_controller_needs_only_bootstrap_servers() -> None:
    """KIP-853: the voters come from the storage's bootstrap snapshot or the log; the storage
    tool checks the format flags (test_storage_bootstrap.py)."""
    cfg = config(
        controller__quorum__voters=None,
        controller__quorum__bootstrap__servers="127.0.0.1:9093,127.0.0.1:9094",
        listeners="CONTROLLER://127.0.0.1:9099",  # no voter entry to match: any port
    )
    assert cfg.voters == {}
    assert cfg.bootstrap_servers == (Endpoint("127.0.0.1", 9093), Endpoint("127.0.0.1", 9094))
    assert cfg.warnings == ()
    combined = config(
        process__roles="broker,controller",
        controller__quorum__voters=None,
        controller__quorum__bootstrap__servers="127.0.0.1:9093",
        listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    )
    assert combined.is_controller and combined.voters == {}


def test_a_static_controller_must_still_be_a_voter() -> None:
    assert error(node__id="4", controller__quorum__bootstrap__servers="127.0.0.1:9093") == (
        f"The node.id 4 must be one of the voters in controller.quorum.voters ({VOTERS}) when "
        "process.roles contains 'controller'."
    )


def test_a_dynamic_controller_must_advertise_a_connectable_listener() -> None:
    assert error(
        controller__quorum__voters=None, controller__quorum__bootstrap__servers="127.0.0.1:9093",
        listeners="CONTROLLER://:9093",
    ) == (
        "The advertised controller listener CONTROLLER://:9093 needs a host and a non-zero port "
        "other nodes can connect to: set advertised.listeners=CONTROLLER://<host>:<port> (the "
        "address the voter set will hold for this controller) or put the host and port in "
        "listeners."
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (
            "CONTROLLER:/127.0.0.1:9093",
            'entry "CONTROLLER:/127.0.0.1:9093" must be in the form '
            "NAME://host:port, e.g. CONTROLLER://127.0.0.1:9093",
        ),
        (
            "CONTROL-LER://h:9093",
            'the listener name "CONTROL-LER" in "CONTROL-LER://h:9093" may '
            "contain only letters, digits and underscores (e.g. CONTROLLER)",
        ),
        ("CONTROLLER://h", '"CONTROLLER://h" has no :port'),
        (
            "CONTROLLER://h:-1",
            'the port of "CONTROLLER://h:-1" must be a number between 0 and 65535',
        ),
        (
            "CONTROLLER://h:70000",
            'the port of "CONTROLLER://h:70000" must be between 0 and 65535, not 70000',
        ),
        (
            "CONTROLLER://h:9093,controller://g:9094",
            "the listener name CONTROLLER appears more than once",
        ),
        (
            "CONTROLLER://h:9093,OTHER://:9093",
            "CONTROLLER://h:9093 and OTHER://:9093 use the same "
            "port; each listener needs its own port",
        ),
    ],
)
def test_invalid_listeners(value: str, reason: str) -> None:
    assert error(listeners=value) == f"Invalid value {value} for configuration listeners: {reason}."


def test_controller_listener_name_must_be_a_listener() -> None:
    assert error(listeners="PLAINTEXT://127.0.0.1:9093") == (
        "The controller listener name CONTROLLER from controller.listener.names must be one of "
        "the listeners (PLAINTEXT://127.0.0.1:9093): add CONTROLLER://host:port to listeners."
    )


def test_missing_controller_listener_names() -> None:
    assert error(controller__listener__names=None) == (
        'Missing required configuration "controller.listener.names" which has no default value: '
        "name the listener used for controller traffic, e.g. controller.listener.names=CONTROLLER."
    )


def test_controller_only_node_has_only_controller_listeners() -> None:
    assert error(listeners="CONTROLLER://127.0.0.1:9093,PLAINTEXT://:9092") == (
        "The listeners config must only contain KRaft controller listeners from "
        "controller.listener.names when process.roles=controller: remove PLAINTEXT://:9092 from "
        "listeners."
    )


def test_broker_only_node_must_not_listen_as_controller() -> None:
    assert error(
        process__roles="broker", node__id="7", listeners="PLAINTEXT://:9092,CONTROLLER://:9093"
    ) == (
        "The controller listener name CONTROLLER must not appear in listeners when "
        "process.roles=broker: a broker reaches the controllers through "
        "controller.quorum.voters or controller.quorum.bootstrap.servers; remove "
        "CONTROLLER://:9093 from listeners."
    )


def test_broker_needs_a_broker_listener() -> None:
    assert error(process__roles="broker,controller") == (
        "There must be at least one broker advertised listener. Perhaps all listeners appear in "
        "controller.listener.names? Add e.g. PLAINTEXT://host:9092 to listeners."
    )


def test_grpc_listener_must_be_a_broker_listener() -> None:
    assert error(process__roles="broker", node__id="7", listeners="PLAINTEXT://127.0.0.1:9092",
                 grpc__listener__names="ADMIN") == (
        "The gRPC listener name ADMIN from grpc.listener.names must be a broker listener: add "
        "ADMIN://host:port to listeners (and not to controller.listener.names)."
    )


def test_broker_needs_a_kafka_listener() -> None:
    assert error(process__roles="broker", node__id="7", listeners="PLAINTEXT://127.0.0.1:9092",
                 grpc__listener__names="PLAINTEXT") == (
        "A broker needs a Kafka-protocol listener for clients and replication: add e.g. "
        "PLAINTEXT://host:9092 to listeners (listeners named in grpc.listener.names serve gRPC "
        "only)."
    )


def test_inter_broker_listener_must_speak_kafka() -> None:
    assert error(process__roles="broker", node__id="7",
                 listeners="PLAINTEXT://127.0.0.1:9092,ADMIN://127.0.0.1:9093",
                 listener__security__protocol__map="PLAINTEXT:PLAINTEXT,ADMIN:PLAINTEXT",
                 grpc__listener__names="ADMIN", inter__broker__listener__name="ADMIN") == (
        "inter.broker.listener.name=ADMIN must name one of this broker's Kafka-protocol "
        "listeners (PLAINTEXT)."
    )


def test_broker_advertised_listener_must_be_routable() -> None:
    assert error(process__roles="broker", node__id="7", listeners="PLAINTEXT://0.0.0.0:9092") == (
        "The advertised listener PLAINTEXT://0.0.0.0:9092 uses the non-routable meta-address "
        "0.0.0.0: set advertised.listeners=PLAINTEXT://<host>:9092 with an address clients can "
        "reach."
    )


@pytest.mark.parametrize(
    ("overrides", "shown"),
    [
        ({"listeners": "CONTROLLER://:9093"}, "CONTROLLER://:9093"),
        ({"advertised__listeners": "CONTROLLER://0.0.0.0:9093"}, "CONTROLLER://0.0.0.0:9093"),
        ({"advertised__listeners": "CONTROLLER://127.0.0.1:0"}, "CONTROLLER://127.0.0.1:0"),
    ],
)
def test_advertised_controller_listener_must_be_connectable(
    overrides: dict[str, str], shown: str
) -> None:
    assert error(**overrides) == (
        f"The advertised controller listener {shown} needs a host and a non-zero port other "
        "nodes can connect to: set advertised.listeners=CONTROLLER://127.0.0.1:9093 (this node's "
        "voter entry is 1@127.0.0.1:9093) or put the host and port in listeners."
    )


def test_advertised_listener_names_come_from_listeners() -> None:
    assert error(advertised__listeners="OTHER://h:1") == (
        "The advertised listener OTHER://h:1 has no listener named OTHER in listeners: "
        "advertised.listeners may only use names from listeners."
    )


def test_controller_listener_port_must_match_the_voter_entry() -> None:
    assert error(listeners="CONTROLLER://127.0.0.1:9099") == (
        "The controller listener CONTROLLER://127.0.0.1:9099 does not listen on this node's "
        "voter entry 1@127.0.0.1:9093 in controller.quorum.voters: the other controllers "
        "connect to port 9093, so use that port in listeners (or fix the voter entry)."
    )
    # An ephemeral port can never match the voter entry either.
    assert "does not listen on this node's voter entry" in error(
        listeners="CONTROLLER://127.0.0.1:0", advertised__listeners="CONTROLLER://127.0.0.1:9093"
    )


def test_different_voter_and_listener_hosts_warn() -> None:
    cfg = config(listeners="CONTROLLER://10.0.0.1:9093")
    assert cfg.warnings == (
        "This node's voter entry 1@127.0.0.1:9093 and its controller listener "
        "CONTROLLER://10.0.0.1:9093 name different hosts; the other controllers connect to "
        "127.0.0.1:9093, so make sure that address reaches this node.",
    )


def test_unsupported_security_protocol() -> None:
    assert error(listener__security__protocol__map="CONTROLLER:SASL_SSL") == (
        "The listener CONTROLLER uses SASL_SSL, but SASL is implemented on the brokers' "
        "Kafka-protocol listeners only (controller and gRPC listeners use mutual TLS): map "
        "CONTROLLER to SSL or PLAINTEXT in listener.security.protocol.map."
    )
    assert error(listener__security__protocol__map="CONTROLLER:SSL") == (
        "A listener uses SSL but ssl.keystore.location is not set: point it at a PEM file "
        "(kraft-storage make-test-certs makes a test CA and keystores)."
    )
    assert error(listener__security__protocol__map="CONTROLLER:SSL",
                 ssl__keystore__location="/k.pem") == (
        "A listener uses SSL but ssl.truststore.location is not set: point it at a PEM file "
        "(kraft-storage make-test-certs makes a test CA and keystores)."
    )
    assert "encrypted private keys are not supported" in error(ssl__key__password="secret")
    assert "only PEM is supported" in error(ssl__keystore__type="JKS")
    assert error(
        process__roles="broker,controller", listeners="CONTROLLER://127.0.0.1:9093,INTERNAL://:1"
    ) == (
        "No security protocol is defined for the listener INTERNAL://:1: add INTERNAL:PLAINTEXT "
        "to listener.security.protocol.map."
    )


TIMING_KEYS = {
    "controller.quorum.election.timeout.ms": 1,
    "controller.quorum.fetch.timeout.ms": 1,
    "controller.quorum.election.backoff.max.ms": 1,
    "controller.quorum.request.timeout.ms": 1,
    "controller.quorum.retry.backoff.ms": 0,
    "metadata.max.idle.interval.ms": 0,
    "metadata.log.max.record.bytes.between.snapshots": 1,
    "metadata.log.max.snapshot.interval.ms": 0,
}


@pytest.mark.parametrize(("key", "minimum"), TIMING_KEYS.items())
def test_negative_and_too_small_values(key: str, minimum: int) -> None:
    field = key.replace(".", "__")
    assert error(**{field: "-5"}) == (
        f"Invalid value -5 for configuration {key}: must be an integer >= {minimum}."
    )
    if minimum == 1:
        assert error(**{field: "0"}).startswith(f"Invalid value 0 for configuration {key}")
    config(**{field: str(minimum)})


def test_retention_accepts_minus_one_only() -> None:
    assert error(metadata__max__retention__ms="-2") == (
        "Invalid value -2 for configuration metadata.max.retention.ms: must be an integer >= -1 "
        "(-1 = no limit)."
    )


def test_segment_bytes_at_least_min_bytes() -> None:
    assert error(metadata__log__segment__bytes="1048576") == (
        "Invalid value 1048576 for configuration metadata.log.segment.bytes: must be >= "
        "metadata.log.segment.min.bytes (8388608)."
    )


def test_a_consumer_group_heartbeat_must_be_shorter_than_its_session() -> None:
    assert error(group__consumer__heartbeat__interval__ms="45000") == (
        "group.consumer.heartbeat.interval.ms (45000) must be less than "
        "group.consumer.session.timeout.ms (45000)."
    )


def test_metrics_port_range_and_booleans() -> None:
    assert error(metrics__port="65536") == (
        "Invalid value 65536 for configuration metrics.port: must be an integer between 0 and "
        "65535 (0 = ephemeral)."
    )
    assert error(internal__test__hooks__enable="yes") == (
        "Invalid value yes for configuration internal.test.hooks.enable: must be true or false."
    )


def test_log_dir_rules() -> None:
    assert error(log__dirs="/a,/b,/a/") == (
        "Invalid value /a,/b,/a/ for configuration log.dirs: the directory /a appears more than "
        "once."
    )
    assert error(log__dirs="") == (
        'Invalid value "" for configuration log.dirs: must list at least one directory.'
    )


def test_error_carries_key_and_source() -> None:
    with pytest.raises(ConfigError) as info:
        config(node__id="4")
    assert (info.value.key, info.value.source) == ("node.id", "test.properties")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "zookeeper.connect",
            "localhost:2181",
            "ZooKeeper mode is not supported: remove "
            "zookeeper.connect and run in KRaft mode (process.roles, controller.quorum.voters).",
        ),
        (
            "control.plane.listener.name",
            "CONTROLLER",
            "control.plane.listener.name is not "
            "supported in KRaft mode: remove it and use controller.listener.names.",
        ),
        (
            "controller.quorum.auto.join.enable",
            "true",
            "Auto-join of controllers (KIP-1186) is not supported: remove "
            "controller.quorum.auto.join.enable and add a controller with kraft-admin quorum "
            "add-controller.",
        ),
    ],
)
def test_rejected_kafka_keys(key: str, value: str, message: str) -> None:
    assert error(**{key.replace(".", "__"): value}) == message


def test_unknown_and_ignored_keys_are_warnings() -> None:
    cfg = config(
        nodeid="3",
        num__network__threads="3",
        ssl__enabled__protocols="TLSv1.3",
        controller__quorum__auto__join__enable="false",
        internal__test__hooks__enable="true",
    )
    assert cfg.warnings == (
        "The configuration 'nodeid' was supplied but isn't a known config; it is ignored. Did "
        "you mean 'node.id'?",
        "The Kafka configuration 'num.network.threads' has no effect in this implementation and "
        "is ignored.",
        "The Kafka configuration 'ssl.enabled.protocols' has no effect in this implementation "
        "and is ignored.",
        "internal.test.hooks.enable=true: the transport's fault-injection and raw-append test "
        "hooks are enabled. Never use this in production.",
    )
    assert cfg.test_hooks_enabled is True
    assert cfg.raw["nodeid"] == "3"


def test_kafka_keys_without_effect_say_why() -> None:
    cfg = config(controller__quorum__append__linger__ms="25", metadata__log__segment__ms="x")
    assert cfg.warnings == (
        "The Kafka configuration 'controller.quorum.append.linger.ms' has no effect in this "
        "implementation and is ignored: the active controller does not linger: appends made in "
        "one event-loop turn share a batch, and group commit batches the rest.",
        "The Kafka configuration 'metadata.log.segment.ms' has no effect in this implementation "
        "and is ignored: metadata log segments roll by size only (metadata.log.segment.bytes).",
    )


def test_dynamic_broker_configs_in_the_file_say_how_to_set_them() -> None:
    cfg = config(num__partitions=" 3 ", log__cleanup__policy="compact, delete")
    assert cfg.warnings == (
        "The configuration 'num.partitions' is a dynamic broker config here and is ignored in "
        "the node's file: set it for the cluster with kraft-admin configs alter --entity-type "
        "brokers --entity-default --add-config num.partitions=3",
        "The configuration 'log.cleanup.policy' is a dynamic broker config here and is ignored "
        "in the node's file: set it for the cluster with kraft-admin configs alter "
        "--entity-type brokers --entity-default --add-config "
        "log.cleanup.policy=[compact, delete]",
    )


# -- load_config ------------------------------------------------------------------------------


def test_load_config_reports_duplicates_and_syntax_errors(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    lines = [f"{key}={value}" for key, value in BASE.items()]
    path.write_text("\n".join([*lines, "node.id = 1", "bogus.key=1"]) + "\n")
    cfg = load_config(path)
    assert cfg.warnings[0] == (
        f"The configuration node.id is set more than once in {path} (lines 2 and 7); the value "
        "on line 7 wins."
    )
    assert "'bogus.key'" in cfg.warnings[1]

    path.write_text("node.id=\\u00zz\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}:1: malformed \\uXXXX escape \\u00zz (need 4 hex digits)"
    assert info.value.line == 1


def test_load_config_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.properties")
    assert (
        str(info.value) == f"The configuration file {tmp_path / 'nope.properties'} does not exist."
    )


def _documented_keys() -> dict[str, list[str]]:
    """The rows of the tables under "Supported keys": key -> [type, default, valid values,
    meaning], the key cell keeping its "(internal)" marker."""
    docs = (ROOT / "docs" / "configuration.md").read_text()
    section = docs.split("## Supported keys")[1].split("## Cross-key rules")[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            rows[cells[0]] = cells[1:]
    return rows


def test_every_key_is_documented_and_every_documented_key_exists() -> None:
    rows = _documented_keys()
    names = {cell.split("`")[1]: cell for cell in rows}
    assert sorted(names) == sorted(REGISTRY)  # both ways
    for name, key in REGISTRY.items():
        cell = names[name]
        type_, default = rows[cell][0], rows[cell][1]
        assert ("(internal)" in cell) == key.internal, name
        assert type_ == key.type.name.lower(), name
        if key.required:
            assert default == "*required*", name
        elif key.default is None:  # "*required*" when a cross-key rule requires it
            assert default.startswith("—") or default == "*required*", name
        elif key.default == "":
            assert default in ("empty", '`""`'), name
        else:
            assert default.split("`")[1] == key.default, name


def test_every_ignored_key_is_documented() -> None:
    docs = (ROOT / "docs" / "configuration.md").read_text()
    ignored = docs.split("**Accepted and ignored**")[1].split("**Rejected**")[0]
    assert [key for key in IGNORED_KAFKA_KEYS if f"`{key}`" not in ignored] == []
    assert [key for key in REJECTED_KAFKA_KEYS if f"`{key}`" not in docs] == []
