"""Datavo's log lines (skipped tiers, promotions, install failures, ...) go to Python's logging, logger "datavo".

The C++ library queues its lines; they are handed to the logger by the Python thread whose call returns next
(every blocking call drains the queue on its way back), and at exit. The C++ level follows the logger's effective
level when a stream, hierarchy or fetch starts, unless $DATAVO_LOG_LEVEL pins it.
"""

import atexit
import logging
import os

from . import _datavo

logger = logging.getLogger("datavo")

_LEVELS = ((logging.DEBUG, 3), (logging.INFO, 2), (logging.WARNING, 1))


def sync_level() -> None:
    """Sets the C++ library's level from the logger's effective level (DATAVO_LOG_LEVEL, when set, wins)."""
    if os.environ.get("DATAVO_LOG_LEVEL"):
        return
    effective = logger.getEffectiveLevel()
    for threshold, native in _LEVELS:
        if effective <= threshold:
            _datavo.set_log_level(native)
            return
    _datavo.set_log_level(0)


def install() -> None:
    _datavo.set_log_forwarding(logger)
    atexit.register(_datavo.drain_logs)
    sync_level()
