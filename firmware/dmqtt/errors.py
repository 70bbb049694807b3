# Every exception the dmqtt package raises derives from DmqttError, so an application can catch the client's
# failures in one clause and still tell them apart. Kept in a module of its own: the codec (shared with the
# host), the journals and the client all raise these, and none of them should import another to do so.


class DmqttError(Exception):
    """Base of every dmqtt exception."""


class CodecError(DmqttError):
    """A packet that breaks the protocol. `reason_code` is the MQTT 5.0 reason code to send (0x81 Malformed
    Packet unless a rule says otherwise); the caller closes the connection."""

    def __init__(self, reason: str, reason_code: int = 0x81) -> None:
        super().__init__(reason)
        self.reason = reason
        self.reason_code = reason_code


class ProtocolError(DmqttError):
    """The broker broke a rule of the session (not of the packet format); `reason_code` is the MQTT 5.0 code to
    disconnect with. The client turns it into MQTTError after disconnecting."""

    def __init__(self, reason, reason_code=0x82):
        super().__init__(reason)
        self.reason_code = reason_code


class MQTTError(DmqttError):
    """The connection failed or the broker broke the protocol; the connection is closed. `code` carries the
    CONNACK return code or the 5.0 reason code when there is one."""

    def __init__(self, reason, code=None):
        super().__init__(reason)
        self.code = code


class PublishRefused(DmqttError):
    """publish() did not accept the message, and never will as things stand: nothing was journaled and the
    connection is unaffected. `code` is the 5.0 reason code that says why: 0x95 Packet too large (the broker's
    Maximum Packet Size forbids it [MQTT-3.2.2-15], or it does not fit the journal's records or the client's
    max_packet), 0x90 Topic Name invalid, 0x99 Payload format invalid (not bytes, bytearray, memoryview or str),
    0x9B QoS not supported (not 0, 1 or 2)."""

    def __init__(self, reason, code):
        super().__init__(reason)
        self.code = code


class QueueFull(DmqttError):
    """Every slot holds a message in flight; publish again once some are acknowledged."""


class JournalError(DmqttError):
    """The journal cannot take this record (full, or the flash failed)."""


def explain(module, rule, arg=None):
    """A rule's words: TEXT[rule] of `module` (dmqtt.codec_text, dmqtt.client_text), `arg` filling its %-fields
    (or given to it, where the text is a function).
    The module is loaded for this text only and, on MicroPython, dropped again: kept, its texts would hold a
    deployed board's heap for good (about twice their length on 64-bit objects). A board without the memory (or
    the file) for them names the rule instead: "<module> rule N"."""
    import sys

    try:
        __import__(module)
        text = sys.modules[module].TEXT[rule]
        if arg is not None:
            text = text(arg) if callable(text) else text % arg
    except (MemoryError, ImportError):
        text = "%s rule %d" % (module, rule)
    finally:
        forget(module)
    return text


def forget(module):
    """Drop a loaded module that is needed only now and then (texts, a board's boot code):
    on a deployed board (.mpy files) a module's code holds the heap for as long as it is loaded. MicroPython
    only: CPython keeps its modules (a host test's classes stay the same objects)."""
    import sys

    if sys.implementation.name == "micropython" and module in sys.modules:
        del sys.modules[module]
        package, _, name = module.rpartition(".")
        if package:
            delattr(sys.modules[package], name)
