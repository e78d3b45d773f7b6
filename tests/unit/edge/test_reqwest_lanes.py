"""The HTTP/2 lanes of edge/reqwest_transport.py: as Go's transport (client-go's) opens another
connection once one carries all the streams the API server allows, a request goes on the first
lane with a stream free, and only a burst past one connection's streams opens the next."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from aiohttp import web

from gangsched.edge import reqwest_transport
from gangsched.edge.kube import WARM_CONNECTIONS, Kube
from gangsched.edge.reqwest_transport import (
    STREAMS_PER_CONNECTION,
    TRANSPORT_ENV,
    Lanes,
    build_lanes,
)
from tests.builders import loopback_api_server


class _Configuration:
    """What building a client reads of kubernetes-asyncio's Configuration."""

    ssl_ca_cert = None
    cert_file = None
    key_file = None
    verify_ssl = True


def lanes(count: int) -> Lanes:
    return build_lanes(_Configuration(), default_headers={}, in_flight=count, http2=True)


@pytest.mark.parametrize(
    ("in_flight", "http2", "expected"),
    [
        (1, True, 1),
        (STREAMS_PER_CONNECTION, True, 1),
        (STREAMS_PER_CONNECTION + 1, True, 2),
        (256 + 32, True, 3),
        (256 + 32, False, 1),  # HTTP/1.1: one pool, a connection per request in flight
    ],
)
def test_enough_lanes_for_the_requests_in_flight(
    in_flight: int, http2: bool, expected: int
) -> None:
    built = build_lanes(_Configuration(), default_headers={}, in_flight=in_flight, http2=http2)
    assert len(built.clients) == expected


@pytest.mark.parametrize(
    ("busy", "expected"),
    [
        ([0, 0, 0], 0),
        ([STREAMS_PER_CONNECTION - 1, 0, 0], 0),
        ([STREAMS_PER_CONNECTION, 0, 0], 1),
        ([STREAMS_PER_CONNECTION, STREAMS_PER_CONNECTION, 7], 2),
        ([STREAMS_PER_CONNECTION + 5, STREAMS_PER_CONNECTION + 1, STREAMS_PER_CONNECTION + 3], 1),
    ],
)
def test_a_request_fills_the_first_lane_with_a_stream_free(busy: list[int], expected: int) -> None:
    built = lanes(3 * STREAMS_PER_CONNECTION)
    built.in_flight = list(busy)
    assert built.pick() == expected


@pytest.mark.asyncio(loop_scope="function")
async def test_requests_spread_over_lanes_and_give_their_streams_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five requests at once, two streams a lane: two on each of the first lanes, the fifth on
    the least busy; every stream is given back once answered, failed or not."""
    monkeypatch.setattr(reqwest_transport, "STREAMS_PER_CONNECTION", 2)
    arrived = 0
    all_in = asyncio.Event()
    release = asyncio.Event()  # set once the test has counted the streams held

    async def hold(request: web.Request) -> web.Response:
        nonlocal arrived
        arrived += 1
        if arrived == 5:
            all_in.set()
        await release.wait()
        status = 500 if request.match_info["name"] == "p4" else 200
        return web.json_response({}, status=status)

    async with loopback_api_server(tmp_path, web.get("/x/{name}", hold)) as kubeconfig:
        server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        built = build_lanes(_Configuration(), default_headers={}, in_flight=4, http2=True)
        assert len(built.clients) == 2
        sends = [
            asyncio.create_task(
                built.send(
                    "GET",
                    f"{server}/x/p{i}",
                    token=None,
                    body=None,
                    content_type="application/json",
                    timeout=10,
                )
            )
            for i in range(5)
        ]
        await asyncio.wait_for(all_in.wait(), timeout=10)
        assert sorted(built.in_flight) == [2, 3]
        release.set()
        statuses = sorted(status for status, _ in await asyncio.gather(*sends))
        assert statuses == [200, 200, 200, 200, 500]
        assert built.in_flight == [0, 0]
        await built.close()


@pytest.mark.asyncio(loop_scope="function")
async def test_a_warm_up_over_http1_opens_the_first_binds_connections_not_every_slot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each connection is a TLS handshake competing with the lists for the CPU: the rest open
    as binds need them."""
    monkeypatch.setenv(TRANSPORT_ENV, "h1")

    async def version(_: web.Request) -> web.Response:
        return web.json_response({"major": "1", "minor": "37"})

    async with loopback_api_server(tmp_path, web.get("/version", version)) as kubeconfig:
        for in_flight, expected in ((64, WARM_CONNECTIONS), (4, 4)):
            kube = await Kube.connect(str(kubeconfig))
            try:
                await kube.warm(in_flight=in_flight)
                assert kube.requests["GET"] == expected
            finally:
                await kube.close()
    assert WARM_CONNECTIONS < 64
