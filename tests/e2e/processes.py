"""Starting and stopping the real processes the e2e tests run beside the control plane
(gangsched, Prometheus): wait for an HTTP readiness endpoint, stop with SIGTERM, then SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable


def wait_ready(url: str, *, alive: Callable[[], None], timeout: float) -> bool:
    """Poll `url` until it answers 200 (True) or `timeout` passes (False); `alive()` raises
    as soon as the process has died, so a crash is reported at once, not after the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive()
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.3)
    return False


def terminate(process: subprocess.Popen[bytes], *, grace: float = 30.0) -> int | None:
    """SIGTERM, SIGKILL after `grace` seconds; the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    return process.returncode
