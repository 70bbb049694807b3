# The signatures of dmqtt/codec_host.py (the broker's half of the codec, and whole-packet decoding), for type
# checkers. It re-exports dmqtt.codec.
from collections.abc import Iterator, Sequence
from typing import Any, overload

from dmqtt.codec import *  # noqa: F403
from dmqtt.codec import StreamDecoder
from dmqtt.errors import CodecError
from dmqtt.interfaces import Bytes as _Bytes
from dmqtt.interfaces import Props as _Props
from dmqtt.interfaces import Text as _Text

NAMES: tuple[str, ...]

def malformed(why: str) -> CodecError: ...
def protocol_error(why: str) -> CodecError: ...
@overload
def encode_publish(
    topic: _Text,
    payload: _Bytes,
    qos: int = 0,
    pid: int = 0,
    retain: bool = False,
    dup: bool = False,
    version: int = ...,
    props: _Props = None,
    into: None = None,
) -> bytes: ...
@overload
def encode_publish(
    topic: _Text,
    payload: _Bytes,
    qos: int,
    pid: int,
    retain: bool,
    dup: bool,
    version: int,
    props: _Props,
    into: bytearray,
) -> int: ...
def decode_ack(ptype: int, body: _Bytes, version: int = ...) -> tuple[int, int, _Props]: ...
@overload
def encode_connack(
    session_present: bool, code: int = 0, version: int = ..., props: _Props = None, into: None = None
) -> bytes: ...
@overload
def encode_connack(session_present: bool, code: int, version: int, props: _Props, into: bytearray) -> int: ...
@overload
def encode_suback(
    pid: int, codes: Sequence[int], version: int = ..., props: _Props = None, into: None = None
) -> bytes: ...
@overload
def encode_suback(pid: int, codes: Sequence[int], version: int, props: _Props, into: bytearray) -> int: ...
@overload
def encode_unsuback(
    pid: int, codes: Sequence[int] = (), version: int = ..., props: _Props = None, into: None = None
) -> bytes: ...
@overload
def encode_unsuback(pid: int, codes: Sequence[int], version: int, props: _Props, into: bytearray) -> int: ...
@overload
def encode_auth(reason: int = ..., props: _Props = None, into: None = None) -> bytes: ...
@overload
def encode_auth(reason: int, props: _Props, into: bytearray) -> int: ...
def decode_connect(body: _Bytes) -> dict[str, Any]: ...
def decode_subscribe(body: _Bytes, version: int = ...) -> tuple[int, list[tuple[str, int]], _Props]: ...
def decode_unsubscribe(body: _Bytes, version: int = ...) -> tuple[int, list[str], _Props]: ...

class Packet:
    """A decoded packet: `type`, `flags` and the fields of its kind as attributes."""

    type: int
    flags: int
    fields: dict[str, Any]
    def __init__(self, ptype: int, flags: int, fields: dict[str, Any]) -> None: ...
    def __getattr__(self, name: str) -> Any: ...

def decode(ptype: int, flags: int, body: _Bytes, version: int = ...) -> Packet: ...

class PacketDecoder(StreamDecoder):
    def packets(self, data: _Bytes) -> Iterator[Packet]: ...
