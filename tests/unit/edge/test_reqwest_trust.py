"""Whom the fast transport trusts: the kubeconfig's CA alone, as client-go and the aiohttp
session do, never a CA of the system's store beside it (pyreqwest adds roots to the
system's; edge/reqwest_transport.py puts the kubeconfig's in the store's place)."""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trustme
from aiohttp import web

from gangsched.edge.kube import Kube
from gangsched.edge.reqwest_transport import TRANSPORT_ENV


@asynccontextmanager
async def https_server(certificate_authority: trustme.CA) -> AsyncIterator[str]:
    """A loopback HTTPS server answering /version, its certificate issued by the given CA."""

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "37"})

    app = web.Application()
    app.router.add_get("/version", version)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    certificate_authority.issue_cert("127.0.0.1").configure_cert(context)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
        await site.start()
        yield f"https://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def kubeconfig(path: Path, *, server: str, ca_file: Path) -> Path:
    cluster = {"server": server, "certificate-authority": str(ca_file)}
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


@pytest.mark.parametrize("transport", ["pyreqwest", "aiohttp"])
async def test_a_ca_of_the_system_store_does_not_vouch_for_the_api_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    cluster_ca, public_ca = trustme.CA(), trustme.CA()
    system_store = tmp_path / "system.pem"
    public_ca.cert_pem.write_to_path(str(system_store))
    monkeypatch.setenv("SSL_CERT_FILE", str(system_store))  # the system trusts public_ca
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    if transport == "aiohttp":
        monkeypatch.setenv(TRANSPORT_ENV, "aiohttp")
    else:
        monkeypatch.delenv(TRANSPORT_ENV, raising=False)
    cluster_ca_file = tmp_path / "cluster-ca.pem"
    cluster_ca.cert_pem.write_to_path(str(cluster_ca_file))

    async with https_server(public_ca) as impostor:
        kube = await Kube.connect(
            str(kubeconfig(tmp_path / "impostor", server=impostor, ca_file=cluster_ca_file))
        )
        try:
            assert (kube.fast is not None) == (transport == "pyreqwest")
            with pytest.raises(OSError):
                await kube.get("/version")
        finally:
            await kube.close()
    # The process's own settings are as they were.
    assert os.environ["SSL_CERT_FILE"] == str(system_store)
    assert os.environ["SSL_CERT_DIR"] == str(tmp_path)

    async with https_server(cluster_ca) as genuine:
        kube = await Kube.connect(
            str(kubeconfig(tmp_path / "genuine", server=genuine, ca_file=cluster_ca_file))
        )
        try:
            assert await kube.get("/version") == {"major": "1", "minor": "37"}
        finally:
            await kube.close()
