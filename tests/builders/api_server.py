"""A stand-in API server for the client's own tests: an aiohttp server on a free loopback port
answering the routes a test gives, and a kubeconfig pointing at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from aiohttp import web

from tests.builders.raw import kubeconfig_file


@asynccontextmanager
async def loopback_api_server(
    directory: Path, *routes: web.RouteDef, path: str = ""
) -> AsyncIterator[Path]:
    """Serves `routes` (`web.get(...)`, `web.route("*", ...)`) over plain HTTP on 127.0.0.1
    and yields the path of a kubeconfig in `directory` whose server is it, its URL ending in
    `path` (as a proxy's, `/k8s/clusters/<id>/`). The server stops when the block ends, so
    a test closes its client inside the block and asserts what the server saw after it."""
    app = web.Application()
    app.router.add_routes(routes)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)  # port 0: a free one, chosen by the kernel
        await site.start()
        port = runner.addresses[0][1]
        yield kubeconfig_file(directory / "kubeconfig", server=f"http://127.0.0.1:{port}{path}")
    finally:
        await runner.cleanup()
