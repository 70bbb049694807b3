# The signatures of dmqtt/codec.py, for type checkers (the module itself stays lightly annotated: it runs on
# MicroPython). mypy checks the host against these; `make typecheck` checks them against the module (stubtest).
from collections.abc import Sequence
from typing import Any, Final, overload

from dmqtt.errors import CodecError as CodecError  # re-exported: codec users catch it as codec.CodecError
from dmqtt.interfaces import Buffer as _Buffer
from dmqtt.interfaces import Bytes as _Bytes
from dmqtt.interfaces import Props as _Props
from dmqtt.interfaces import Text as _Text

V31: Final[int]
V311: Final[int]
V5: Final[int]

CONNECT: Final[int]
CONNACK: Final[int]
PUBLISH: Final[int]
PUBACK: Final[int]
PUBREC: Final[int]
PUBREL: Final[int]
PUBCOMP: Final[int]
SUBSCRIBE: Final[int]
SUBACK: Final[int]
UNSUBSCRIBE: Final[int]
UNSUBACK: Final[int]
PINGREQ: Final[int]
PINGRESP: Final[int]
DISCONNECT: Final[int]
AUTH: Final[int]
RETAIN_FLAG: Final[int]
QOS_SHIFT: Final[int]
DUP_FLAG: Final[int]

SUCCESS: Final[int]
NO_MATCHING_SUBSCRIBERS: Final[int]
UNSPECIFIED_ERROR: Final[int]
MALFORMED_PACKET: Final[int]
PROTOCOL_ERROR: Final[int]
UNSUPPORTED_PROTOCOL_VERSION: Final[int]
NOT_AUTHORIZED: Final[int]
KEEP_ALIVE_TIMEOUT: Final[int]
TOPIC_NAME_INVALID: Final[int]
PACKET_ID_NOT_FOUND: Final[int]
RECEIVE_MAXIMUM_EXCEEDED: Final[int]
PACKET_TOO_LARGE: Final[int]
CONNACK_REASONS: Final[bytes]
SUBACK_REASONS: Final[bytes]
UNSUBACK_REASONS: Final[bytes]
AUTH_REASONS: Final[bytes]

USER_PROPERTY: Final[int]
SUBSCRIPTION_IDENTIFIER: Final[int]
TOPIC_ALIAS: Final[int]
TOPIC_ALIAS_MAXIMUM: Final[int]
RECEIVE_MAXIMUM: Final[int]
MAXIMUM_QOS: Final[int]
RETAIN_AVAILABLE: Final[int]
MAXIMUM_PACKET_SIZE: Final[int]
SESSION_EXPIRY_INTERVAL: Final[int]
SERVER_KEEP_ALIVE: Final[int]
REASON_STRING: Final[int]

def refused(rule: int, arg: object = None, reason_code: int = ...) -> CodecError: ...

# Writers: each returns the position after what it wrote.
def varint_size(value: int) -> int: ...
def put_varint(buf: _Buffer, pos: int, value: int) -> int: ...
def put_u16(buf: _Buffer, pos: int, value: int) -> int: ...
def put_raw(buf: _Buffer, pos: int, data: _Bytes) -> int: ...
def props_size(props: _Props) -> int: ...
def put_props(buf: _Buffer, pos: int, props: _Props, size: int) -> int: ...
def props_block_size(version: int, props: _Props) -> int: ...
def start_packet(into: _Buffer | None, remaining: int, at: int = 0) -> _Buffer: ...
def put_header(buf: _Buffer, first_byte: int, remaining: int, at: int = 0) -> int: ...
@overload
def finish_packet(into: None, buf: _Buffer, pos: int) -> bytes: ...
@overload
def finish_packet(into: _Buffer, buf: _Buffer, pos: int) -> int: ...
def check_pid(pid: int) -> None: ...
def check_topic(topic: _Text, allow_empty: bool = False) -> bytes: ...
def publish_size(topic_len: int, payload_len: int, qos: int, version: int) -> int: ...

# Encoders: into a caller's buffer (returning the length used, or where the packet ends when written at `at`)
# or into new bytes.
@overload
def write_publish(
    topic: _Bytes,
    payload: _Bytes,
    flags: int,
    pid: int,
    version: int,
    props: _Props = None,
    into: None = None,
) -> bytes: ...
@overload
def write_publish(
    topic: _Bytes,
    payload: _Bytes,
    flags: int,
    pid: int,
    version: int,
    props: _Props,
    into: _Buffer,
    at: int = 0,
    alias: int = 0,
) -> int: ...
@overload
def encode_ack(
    ptype: int, pid: int, reason: int = ..., version: int = ..., props: _Props = None, into: None = None
) -> bytes: ...
@overload
def encode_ack(ptype: int, pid: int, reason: int, version: int, props: _Props, into: bytearray, at: int = 0) -> int: ...
def check_reason(reason: int, allowed: bytes) -> None: ...
@overload
def encode_connect(
    client_id: _Text,
    version: int = ...,
    keepalive: int = 60,
    clean: bool = True,
    username: _Text | None = None,
    password: _Bytes | None = None,
    will_topic: _Text | None = None,
    will_payload: _Bytes = b"",
    will_qos: int = 0,
    will_retain: bool = False,
    will_props: _Props = None,
    props: _Props = None,
    into: None = None,
) -> bytes: ...
@overload
def encode_connect(
    client_id: _Text,
    version: int,
    keepalive: int,
    clean: bool,
    username: _Text | None,
    password: _Bytes | None,
    will_topic: _Text | None,
    will_payload: _Bytes,
    will_qos: int,
    will_retain: bool,
    will_props: _Props,
    props: _Props,
    into: bytearray,
) -> int: ...
@overload
def encode_subscribe(
    pid: int, topics: Sequence[tuple[_Text, int]], version: int = ..., props: _Props = None, into: None = None
) -> bytes: ...
@overload
def encode_subscribe(
    pid: int, topics: Sequence[tuple[_Text, int]], version: int, props: _Props, into: bytearray
) -> int: ...
@overload
def encode_unsubscribe(
    pid: int, filters: Sequence[_Text], version: int = ..., props: _Props = None, into: None = None
) -> bytes: ...
@overload
def encode_unsubscribe(pid: int, filters: Sequence[_Text], version: int, props: _Props, into: bytearray) -> int: ...
@overload
def encode_empty(ptype: int, into: None = None) -> bytes: ...
@overload
def encode_empty(ptype: int, into: bytearray) -> int: ...
@overload
def encode_disconnect(reason: int = ..., version: int = ..., props: _Props = None, into: None = None) -> bytes: ...
@overload
def encode_disconnect(reason: int, version: int, props: _Props, into: bytearray) -> int: ...
@overload
def encode_reason_only(ptype: int, allowed: bytes, reason: int, version: int, props: _Props, into: None) -> bytes: ...
@overload
def encode_reason_only(
    ptype: int, allowed: bytes, reason: int, version: int, props: _Props, into: bytearray
) -> int: ...
def check_filter(data: bytes) -> None: ...
def check_sub_options(options: int, version: int) -> None: ...

# Readers: each returns the value and the position after it; CodecError on bytes that break a rule.
def u16_at(body: _Bytes, pos: int) -> int: ...
def varint_at(body: _Bytes, pos: int) -> tuple[int, int]: ...
def field_at(body: _Bytes, pos: int) -> tuple[memoryview, int]: ...
def str_at(body: _Bytes, pos: int) -> tuple[str, int]: ...
def decode_utf8(raw: _Bytes) -> str: ...
def props_at(body: _Bytes, pos: int, ptype: int) -> tuple[dict[int, Any], int]: ...
def expect_end(body: _Bytes, pos: int) -> None: ...
def check_flags(ptype: int, flags: int, version: int) -> None: ...
def decode_publish(flags: int, body: _Bytes, version: int = ...) -> tuple[str, int, memoryview, _Props]: ...
def check_ack(ptype: int, body: _Bytes, version: int = ...) -> int: ...
def ack_reason(body: _Bytes) -> int: ...
def decode_connack(body: _Bytes, version: int = ...) -> tuple[bool, int, _Props]: ...
def pid_and_props(body: _Bytes, ptype: int, version: int) -> tuple[int, _Props, int]: ...
def decode_suback(body: _Bytes, version: int = ...) -> tuple[int, list[int], _Props]: ...
def decode_unsuback(body: _Bytes, version: int = ...) -> tuple[int, list[int], _Props]: ...
def decode_reason_only(ptype: int, body: _Bytes, version: int = ...) -> tuple[int, _Props]: ...

class StreamDecoder:
    """Whole packets out of a byte stream: after feed(), `ready`, then `ptype`, `flags`, `body`."""

    version: int
    max_packet_size: int
    ready: bool
    ptype: int
    flags: int
    body: memoryview
    def __init__(self, version: int = ..., max_packet_size: int = 65536, capacity: int | None = None) -> None: ...
    def restart(self) -> None: ...
    def feed(self, data: _Bytes, start: int = 0, end: int = -1) -> int: ...
    def short_ack(self, data: _Bytes, pos: int, end: int) -> int: ...
