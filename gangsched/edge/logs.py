"""structlog set-up: one JSON line per event (or readable console lines), no secrets.

Bearer tokens never reach the logs: we log keys (namespace/name), decisions and errors from
the API server, and a processor drops any field whose name suggests a credential, in case a
library hands one over.

A line is logged per bind and per cycle, so their cost counts: rendered with orjson, and
each field name looked at once for what suggests a credential, logging was 4% of
gangsched's samples binding 3,000 precreated pods instead of 6% (py-spy, issue 30).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import orjson
import structlog

log = structlog.get_logger("gangsched.loop")

_SECRET_WORDS = ("token", "password", "secret", "authorization", "credential")
#: Field names seen, and whether each suggests a credential (they come from code: few).
_SECRET_NAMES: dict[str, bool] = {}


def _suggests_secret(key: str) -> bool:
    secret = _SECRET_NAMES.get(key)
    if secret is None:
        secret = any(word in key.lower() for word in _SECRET_WORDS)
        if len(_SECRET_NAMES) < 4096:
            _SECRET_NAMES[key] = secret
    return secret


def _drop_secrets(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in event:
        if _suggests_secret(key):
            event[key] = "[redacted]"
    return event


def _json(event: Any, **_: Any) -> str:
    """One line of JSON; what orjson cannot encode is written as its repr (and what it
    refuses outright, an integer over 64 bits, goes through the standard library)."""
    try:
        return orjson.dumps(event, default=repr, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(event, default=repr)


def configure(fmt: str = "json", level: int = logging.INFO) -> None:
    renderer: Any = (
        structlog.processors.JSONRenderer(serializer=_json)
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _drop_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(message)s")
    for noisy in ("kopf", "aiohttp"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def quiet_transport_errors(loop: asyncio.AbstractEventLoop) -> None:
    """A connection's fatal error, reported by the event loop itself, as one log line.

    When the API server goes away mid-read (a restart, a dropped watch), uvloop's TLS layer
    can still try to answer on the closed socket, and reports it through the loop's
    exception handler ("Fatal error on SSL protocol", a RuntimeError on the closed
    transport), which prints a traceback. The request or watch on that connection fails
    and is retried as any lost connection is; the report is no bug of ours, so it is
    logged as a warning naming the error. Anything else the loop reports keeps its
    traceback."""

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exception = context.get("exception")
        if "protocol" in context and isinstance(exception, (OSError, RuntimeError)):
            log.warning("connection failed", message=context.get("message"), error=repr(exception))
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handle)
