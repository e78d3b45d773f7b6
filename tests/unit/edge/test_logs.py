"""Log lines are JSON (orjson), with any field whose name suggests a credential redacted and
whatever JSON cannot hold written as its repr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog

from gangsched.edge import logs


def test_lines_are_json_with_secrets_redacted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    logs.configure("json")
    try:
        log = structlog.get_logger("test")
        log.info("bound", pod="ns/p", node="n-1", bearer_token="abc", Authorization="Bearer x")
        log.info("odd", path=tmp_path, counts={1: "one"}, huge=2**70)
    finally:
        structlog.reset_defaults()
    first, second = (json.loads(line) for line in capsys.readouterr().err.splitlines())
    assert first["event"] == "bound" and (first["pod"], first["node"]) == ("ns/p", "n-1")
    assert first["bearer_token"] == first["Authorization"] == "[redacted]"
    assert first["level"] == "info" and first["timestamp"].endswith("Z")
    assert second["path"] == repr(tmp_path) and second["huge"] == 2**70
    assert second["counts"] == {"1": "one"}


def test_a_connections_fatal_error_is_one_line_and_a_bug_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What uvloop reports when the API server drops a TLS connection mid-read is a warning
    naming the error; any other report reaches the loop's default handler, traceback and all."""
    import asyncio

    from structlog.testing import capture_logs

    loop = asyncio.new_event_loop()
    try:
        logs.quiet_transport_errors(loop)
        with capture_logs() as captured:
            loop.call_exception_handler(
                {
                    "message": "Fatal error on SSL protocol",
                    "exception": RuntimeError("unable to perform operation; handler is closed"),
                    "protocol": object(),
                    "transport": object(),
                }
            )
        assert captured == [
            {
                "event": "connection failed",
                "log_level": "warning",
                "message": "Fatal error on SSL protocol",
                "error": "RuntimeError('unable to perform operation; handler is closed')",
            }
        ]
        with capture_logs() as captured:
            loop.call_exception_handler(
                {"message": "Task exception was never retrieved", "exception": KeyError("x")}
            )
        assert captured == []
        assert "Task exception was never retrieved" in caplog.text
        assert "KeyError" in caplog.text
    finally:
        loop.close()
