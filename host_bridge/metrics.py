"""`--metrics HOST:PORT` for the long-running commands (`host-bridge run`, `host-bridge record`): Prometheus's text
format on `/metrics` and a health check on `/healthz`, from one small HTTP server in a thread of its own.

The commands keep their counters as they always have (they log them too); a collector reads them at each scrape,
so nothing is counted twice. Names follow Prometheus's conventions: a `dmqtt_` prefix, the command's subsystem,
base units (`_bytes`, `_seconds`), `_total` on counters (the library adds it). docs/metrics.md lists every
metric and gives alert rules."""

from __future__ import annotations

import platform
import threading
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import version
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from host_bridge.errors import HostBridgeError

# What /healthz asks: (healthy, why) now.
Health = Callable[[], tuple[bool, str]]


class MetricsError(HostBridgeError):
    """The metrics endpoint cannot start (a bad address, a port in use)."""


class Families(Collector):
    """A collector made of a function that yields the metric families at each scrape."""

    def __init__(self, families: Callable[[], Iterable[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families()


def counter(name: str, doc: str, labels: list[str] | None = None, value: float | None = None) -> CounterMetricFamily:
    """A counter family: with `value`, its one unlabelled sample; with `labels`, samples added per label set."""
    return CounterMetricFamily(name, doc, labels=labels, value=value)


def gauge(name: str, doc: str, labels: list[str] | None = None, value: float | None = None) -> GaugeMetricFamily:
    """A gauge family, as counter()."""
    return GaugeMetricFamily(name, doc, labels=labels, value=value)


def build_info() -> Iterator[Metric]:
    """dmqtt_build_info{version, python}: always 1, the version of the host package that serves the page (a
    fleet's dashboard tells an upgraded host by it)."""
    info = gauge("dmqtt_build_info", "the host package's version and the Python it runs on", ["version", "python"])
    info.add_metric([version("durable-mqtt"), platform.python_version()], 1)
    yield info


def metrics_address(address: str) -> tuple[str, int]:
    """`--metrics HOST:PORT` as the server binds it (port 0: any free one); MetricsError when it is not one."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        raise MetricsError(f"--metrics {address!r} is not HOST:PORT (127.0.0.1:9464, say; port 0: any free one)")
    return host, int(port)


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """A scrape every few seconds is not worth a log line."""


class MetricsServer:
    """/metrics and /healthz on `address` (HOST:PORT; port 0: any free one, then `address` says which)."""

    def __init__(self, address: str, families: Callable[[], Iterable[Metric]], health: Health) -> None:
        host, port = metrics_address(address)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(Families(families))
        registry.register(Families(build_info))
        # process_cpu_seconds_total, process_resident_memory_bytes, process_start_time_seconds, process_open_fds...:
        # the process as /proc tells it, for the usual dashboards and a leak's alert.
        ProcessCollector(registry=registry)
        metrics = make_wsgi_app(registry)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ.get("PATH_INFO") == "/healthz":
                ok, why = health()
                start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
                return [(why + "\n").encode()]
            page: Iterable[bytes] = metrics(environ, start_response)
            return page

        try:
            self._server: WSGIServer = make_server(host, port, app, handler_class=_Quiet)
        except OSError as exc:
            raise MetricsError(f"--metrics {address}: {exc.strerror or exc}") from None
        self.address = f"{host}:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
