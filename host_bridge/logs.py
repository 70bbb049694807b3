"""Log lines of the long-running commands (`run`, `record`): one line per event on stdout, key=value."""

from __future__ import annotations

import logging
import sys


def log_to_stdout(
    logger_name: str, fmt: str, level: int = logging.INFO, line_filter: logging.Filter | None = None
) -> None:
    """Send `logger_name` and its children to stdout in `fmt`, and nowhere else."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(fmt))
    if line_filter is not None:
        handler.addFilter(line_filter)
    root = logging.getLogger(logger_name)
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
