# TLS for the board's TCP transport: an ssl.SSLContext built from the board's config (the same `ssl` module,
# on mbedTLS, on the ESP32 port and on the Unix port of the virtual board).
#
# - Verification is explicit: MicroPython's SSLContext(PROTOCOL_TLS_CLIENT) starts with verify_mode CERT_NONE
#   (measured on 1.29), so the context sets CERT_REQUIRED and loads the CA; only `insecure` turns it off.
# - Certificates and keys go to mbedTLS as DER: the Unix port's build parses no PEM ("invalid cert" for a PEM
#   CA that DER of the same certificate loads), so PEM is decoded here with binascii. One certificate per
#   source (the first block of a PEM file).
# - A source is a path on the board's filesystem (relative paths from its root) or the PEM text itself.

import binascii

from dmqtt.errors import DmqttError

_BEGIN = b"-----BEGIN "
_END = b"-----END "


class TLSConfigError(DmqttError):
    """A certificate or key in the config cannot be used (the message never contains key material)."""


def der(data):
    """DER bytes from PEM or DER: the first PEM block's base64 body decoded, or the bytes as they are."""
    start = data.find(_BEGIN)
    if start < 0:
        return data
    body_start = data.find(b"\n", start) + 1
    body_end = data.find(_END, body_start)
    if body_start <= 0 or body_end < 0:
        raise TLSConfigError("a PEM block without its END line")
    try:
        return binascii.a2b_base64(data[body_start:body_end].replace(b"\r", b"").replace(b"\n", b""))
    except ValueError:
        raise TLSConfigError("a PEM block whose body is not base64")


def read_source(source, root, what):
    """The bytes of a certificate or key given as inline PEM or as a path (relative: from `root`)."""
    if source.startswith("-----BEGIN"):
        return source.encode()
    path = source if source.startswith("/") else root + "/" + source
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        raise TLSConfigError("%s: cannot read %s on the board (put it there with --put)" % (what, path))


def context(tls, root):
    """An ssl.SSLContext for `tls` (the checked config: ca, cert, key, insecure)."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # verify_mode is a property of MicroPython's SSLContext that the ESP32 stubs do not list yet.
    if tls["insecure"]:
        ctx.verify_mode = ssl.CERT_NONE  # type: ignore[attr-defined]
    else:
        ctx.verify_mode = ssl.CERT_REQUIRED  # type: ignore[attr-defined]
        try:
            ctx.load_verify_locations(cadata=der(read_source(tls["ca"], root, "tls.ca")))
        except ValueError as exc:
            raise TLSConfigError("tls.ca is not a certificate mbedTLS accepts (%s)" % exc)
    if tls["cert"]:
        cert = der(read_source(tls["cert"], root, "tls.cert"))
        key = der(read_source(tls["key"], root, "tls.key"))
        try:
            ctx.load_cert_chain(cert, key)
        except ValueError:
            raise TLSConfigError("tls.cert and tls.key are not a certificate and key mbedTLS accepts")
    return ctx
