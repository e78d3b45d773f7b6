"""One way to wait for a process's readiness URL and to stop it.

A crash is reported as soon as it happens (the `alive` check runs between polls), not after
the readiness timeout; stopping is SIGTERM, then SIGKILL after a grace period, as the kubelet
does, so a process that hangs on shutdown cannot hang the run.
"""

from __future__ import annotations

import asyncio
import random
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

#: Where free_ports looks when the kernel's ephemeral range cannot be read.
_EPHEMERAL_DEFAULT = (32768, 60999)
#: The lowest port free_ports hands out (clear of well-known and registered service ports
#: people run by hand).
_LOWEST = 20000


def ephemeral_port_range() -> tuple[int, int]:
    """The range the kernel takes ports from for outgoing connections and `bind(0)`."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return _EPHEMERAL_DEFAULT


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports free right now (bound together, then released).

    Chosen below the kernel's ephemeral range: a port from `bind(0)` is in that range, and
    between its release here and the server's bind there any outgoing connection on the
    machine (kubectl, an HTTP poll, another test session) could be given it as its local
    port, and the server would then fail with "address already in use". Below the range only
    a program binding that very port explicitly can take it."""
    low, _ = ephemeral_port_range()
    candidates = list(range(_LOWEST, low)) if low - _LOWEST >= 10 * count else []
    random.shuffle(candidates)
    sockets: list[socket.socket] = []
    try:
        for port in candidates:
            if len(sockets) == count:
                break
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            sockets.append(s)
        while len(sockets) < count:  # no room below the range: the kernel's choice
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _insecure() -> ssl.SSLContext:
    """kube-scheduler serves its self-signed certificate on loopback: not verified."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def http_get(url: str, *, timeout: float = 5.0) -> tuple[int, str]:
    """Status and body of a GET; HTTP errors are answers, not exceptions (OSError otherwise)."""
    context = _insecure() if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            body: bytes = response.read()
            return int(response.status), body.decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def http_ok(url: str) -> bool:
    """True when `url` answers 200 within two seconds."""
    try:
        return http_get(url, timeout=2)[0] == 200
    except OSError:
        return False


def wait_ready(
    url: str, *, alive: Callable[[], None], timeout: float, interval: float = 0.3
) -> bool:
    """Poll `url` until it answers 200 (True) or `timeout` passes (False); `alive()` raises
    as soon as the process has died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive()
        if http_ok(url):
            return True
        time.sleep(interval)
    return False


async def wait_ready_async(
    url: str, *, alive: Callable[[], None], timeout: float, interval: float = 0.2
) -> bool:
    """`wait_ready` for code on an event loop (the GETs run in a thread)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive()
        if await asyncio.to_thread(http_ok, url):
            return True
        await asyncio.sleep(interval)
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


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
