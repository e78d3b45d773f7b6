"""The lists `gangsched run` starts before loading the rest: nothing started where the client
cannot be set up, a list handed over once, everything closed after."""

from __future__ import annotations

from pathlib import Path

import pytest

from gangsched.edge.early_lists import EARLY_PATHS, EarlyLists
from tests.builders import kubeconfig_file


async def test_no_kubeconfig_file_starts_nothing(tmp_path: Path) -> None:
    early = await EarlyLists.start(str(tmp_path / "missing"))
    assert early.kube is None and early.take("/api/v1/pods") is None
    await early.close()


async def test_lists_are_handed_over_once_and_closed(tmp_path: Path) -> None:
    # Nothing listens on port 9: every request fails, as while the API server is down; the
    # informer taking the list sees the failure and lists again.
    kubeconfig = kubeconfig_file(tmp_path / "kubeconfig", server="http://127.0.0.1:9")
    early = await EarlyLists.start(str(kubeconfig))
    assert early.kube is not None and set(early.lists) == set(EARLY_PATHS)
    pods = early.take("/api/v1/pods")
    assert pods is not None and early.take("/api/v1/pods") is None
    with pytest.raises(OSError):  # aiohttp's ClientConnectorError is an OSError
        await pods.next()
    await early.close()
    assert early.kube is None and early.lists == {}
    await early.close()  # again: nothing left to do
