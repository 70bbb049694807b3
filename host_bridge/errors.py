"""One exception type per layer; the CLI turns each into a message that says what to do next."""


class HostBridgeError(Exception):
    """Base of every error the host tools report to a user."""


class VBoardError(HostBridgeError):
    """The virtual board could not be set up or run."""


class BrokerError(HostBridgeError):
    """The MQTT broker could not be started or reached."""


class FirmwareBuildError(HostBridgeError):
    """The firmware could not be compiled or laid out for a board."""
