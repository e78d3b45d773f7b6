"""What `gangsched run` loads before its first bind (issue 30): kopf is not part of it, it
comes once the operator's caches have synced (gangsched.edge.app); nor is the CEL engine,
which comes with the first DRA selector."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from typing import Any

import pytest

from gangsched import cli
from gangsched.edge import app, logs


@pytest.mark.parametrize(
    "package",
    [
        "kopf",
        # The CEL engine (0.1 s of imports) loads with the first DRA selector compiled.
        "cel_expr_python",
    ],
)
def test_the_operator_starts_without_loading(package: str) -> None:
    # What `gangsched run` imports before it starts the operator (gangsched.cli).
    probe = (
        "import sys\n"
        "from gangsched.edge import slim_client\n"
        "slim_client.install()\n"
        "import gangsched.config, gangsched.edge.app, gangsched.edge.early_lists\n"
        f"print(sorted(m for m in sys.modules if m == {package!r} or m.startswith('{package}.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"


def test_run_starts_without_garbage_collection_and_restores_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Collections during the start-up's imports and lists free nothing (gangsched.cli._run);
    # the operator turns them on again once its caches have synced.
    collecting_in_run: list[bool] = []

    async def fake_run(**_: Any) -> int:
        collecting_in_run.append(gc.isenabled())
        return 0

    monkeypatch.setattr(app, "run", fake_run)
    monkeypatch.setattr(logs, "configure", lambda *_: None)
    assert gc.isenabled()
    assert cli.main(["run", "--kubeconfig", "/dev/null"]) == 0
    assert collecting_in_run == [False]
    assert gc.isenabled()
    # A caller that had them off (gangsched.edge.wire.gc_paused, say) keeps them off.
    gc.disable()
    try:
        assert cli.main(["run", "--kubeconfig", "/dev/null"]) == 0
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert collecting_in_run == [False, False]


def test_run_schedules_on_uvloops_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # Binds, watch lines and list pages pass through the loop's TLS transports: uvloop's are
    # in C (gangsched.cli._run says what it measured).
    import asyncio

    import uvloop

    loops: list[asyncio.AbstractEventLoop] = []

    async def fake_run(**_: Any) -> int:
        loops.append(asyncio.get_running_loop())
        return 0

    monkeypatch.setattr(app, "run", fake_run)
    monkeypatch.setattr(logs, "configure", lambda *_: None)
    assert cli.main(["run", "--kubeconfig", "/dev/null"]) == 0
    assert len(loops) == 1 and isinstance(loops[0], uvloop.Loop)


def test_numpy_starts_one_blas_thread_unless_the_environment_says_otherwise() -> None:
    # gangsched.cli sets it before anything imports numpy; numpy reads it once, at import.
    script = (
        "import os\n"
        "from gangsched import cli\n"
        "try:\n"
        "    cli.main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'])\n"
    )
    for given, expected in ((None, "1"), ("4", "4")):
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
        if given is not None:
            env["OPENBLAS_NUM_THREADS"] = given
        out = subprocess.run(
            [sys.executable, "-c", script], check=True, capture_output=True, text=True, env=env
        ).stdout
        assert out.splitlines()[-1] == expected
