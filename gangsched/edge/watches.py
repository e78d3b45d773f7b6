"""The informers `gangsched run` keeps, and the API discovery that decides which exist.

Pods, nodes, namespaces, PriorityClasses and PDBs are always watched; the storage kinds too;
the four resource.k8s.io kinds where the API server serves resource.k8s.io/v1 (DRA); one
PodGroup informer per dialect the API server serves, at the first version that serves
PodGroups. CRDs may be installed after we start, so discovery runs again every
`discovery_seconds`; until it first succeeds scheduling waits (gangs would otherwise look
like groups without PodGroups), and /readyz says why. A kind that is optional here (DRA,
PodGroup dialects, CompositePodGroups, ClusterNetworkTopologies) whose list the RBAC in use
forbids does not hold scheduling for ever: it counts as empty (pods that need it wait) and
/readyz names it until a retried list succeeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog

from gangsched.core.model import Dialect
from gangsched.edge import slim_client
from gangsched.edge.cache import ClusterCache
from gangsched.edge.composite_cache import CompositeCache
from gangsched.edge.dra_cache import DRA_INFORMERS, RESOURCE_API, DraCache
from gangsched.edge.early_lists import (
    BUDGETS_PATH,
    NAMESPACES_PATH,
    PRIORITY_CLASSES_PATH,
    EarlyLists,
    serving_version,
)
from gangsched.edge.informer import Informer
from gangsched.edge.kube import JSON, Kube, KubeError
from gangsched.edge.metrics import Metrics
from gangsched.edge.network_topology_cache import API_VERSION as NETWORK_TOPOLOGY_API
from gangsched.edge.network_topology_cache import INFORMER as NETWORK_TOPOLOGY_INFORMER
from gangsched.edge.network_topology_cache import PATH as NETWORK_TOPOLOGY_PATH
from gangsched.edge.nodepool_cache import API_VERSION as NODEPOOL_API
from gangsched.edge.nodepool_cache import INFORMER as NODEPOOL_INFORMER
from gangsched.edge.nodepool_cache import PATH as NODEPOOL_PATH
from gangsched.edge.volume_cache import STORAGE_INFORMERS, VolumeCache

log = structlog.get_logger("gangsched.operator")

#: PodGroup API groups we read, in the order we prefer their versions.
POD_GROUP_GROUPS = {
    "scheduling.sigs.k8s.io": Dialect.SIGS,
    "scheduling.x-k8s.io": Dialect.X_K8S,
    "scheduling.k8s.io": Dialect.UPSTREAM,
    "scheduling.volcano.sh": Dialect.VOLCANO,
}

#: The most informers `start` runs at once, each holding one HTTP/1.1 connection for its watch:
#: pods, nodes, namespaces, priority classes, budgets, the storage and DRA kinds, one per
#: PodGroup dialect, CompositePodGroups, network topology and NodePools. The connection pool
#: must be larger than this, or the watches take every connection and a lease renewal waits
#: behind them until leadership is lost.
MAX_WATCHES = 5 + len(STORAGE_INFORMERS) + len(DRA_INFORMERS) + len(POD_GROUP_GROUPS) + 3
#: CompositePodGroups exist only in scheduling.k8s.io/v1alpha3 (Kubernetes 1.37+, gate
#: CompositePodGroup); watched when the API server serves them there.
COMPOSITE_API_VERSION = "scheduling.k8s.io/v1alpha3"
COMPOSITE_INFORMER = "compositepodgroups.scheduling.k8s.io"


#: The longest the informers hold their watches, from the start, waiting for the first bind
#: (`Watches.open_watches`).
WATCH_HOLD_S = 5.0


async def wait_for_any(events: Iterable[asyncio.Event], *, timeout: float) -> None:
    """Until one of `events` is set or `timeout` seconds have passed."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


@dataclass
class Watches:
    kube: Kube
    metrics: Metrics
    cache: ClusterCache
    volume_cache: VolumeCache
    dra_cache: DraCache
    composite_cache: CompositeCache
    #: Called with (dialect, apiVersion) when a PodGroup informer starts (and with
    #: Dialect.COMPOSITE when the CompositePodGroup informer does).
    on_pod_groups: Callable[[Dialect, str], None]
    discovery_seconds: float = 30.0
    #: Pod and node lists already under way (`gangsched run` starts them first).
    early: EarlyLists = field(default_factory=EarlyLists)
    informers: dict[str, Informer] = field(default_factory=dict)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set once API discovery has answered (PodGroup informers started for what exists).
    discovered: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set once the informers may watch (`open_watches`).
    watching: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        self._add("pods", "/api/v1/pods", self.cache.pods())
        self._add("nodes", "/api/v1/nodes", self.cache.nodes())
        self._add("namespaces", NAMESPACES_PATH, self.cache.namespaces())
        self._add(
            "priorityclasses",
            PRIORITY_CLASSES_PATH,
            self.cache.priority_classes(),
        )
        self._add(
            "poddisruptionbudgets",
            BUDGETS_PATH,
            self.cache.budgets(),
        )
        for name, path, handler in STORAGE_INFORMERS:
            self._add(name, path, handler(self.volume_cache))
        # The discovery below was asked for before the core was even imported, and the
        # PodGroup lists it found started (gangsched.edge.early_lists): its answers are read
        # from there, and a PodGroup informer takes its list over.
        await self.early.discovered()
        await self._start_dra()
        if await self._discover_pod_groups():
            self.discovered.set()
        self.early.drop_answers()
        self.tasks.append(asyncio.create_task(self._rediscover(), name="discovery"))

    async def open_watches(
        self, *, after: Iterable[asyncio.Event], at_most: float = WATCH_HOLD_S
    ) -> None:
        """Let the informers watch once any of `after` is set (the first bind is answered, or
        the first scheduling step bound nothing) or `at_most` seconds have passed since the
        start.

        Watches go out on kubernetes-asyncio's aiohttp session, one HTTP/1.1 connection each:
        loading aiohttp and the client and opening some twenty connections, each with its TLS
        handshake, took 0.2 s of CPU, all of it before the first bind when the watches started
        with the lists (issue 30); started with the first binds, the import in a worker thread
        still held the interpreter while the first answer waited. Held until the first bind
        is answered, they miss nothing: each starts from its list's resourceVersion. A
        follower, which does not bind, watches once its first attempt to lead has failed
        (`LeaderElector.on_follow` sets the operator's `idle_first`); a start whose lists take
        long (a large cluster, a list refused) watches after `at_most`: then the metrics
        server is up too, and /readyz says what the sync waits for (gangsched.edge.app)."""
        await wait_for_any(after, timeout=at_most)
        # In a worker thread: the binds go on meanwhile (gangsched.edge.slim_client).
        await asyncio.to_thread(slim_client.load_client)
        self.watching.set()

    def not_ready(self) -> str:
        """Why /readyz fails: "" once every informer has synced, else what is missing."""
        if self.synced.is_set():
            return ""
        if not self.discovered.is_set():
            return "API discovery (PodGroup dialects) has not succeeded yet"
        waiting = [
            f"{name}: {informer.last_error or 'listing'}"
            for name, informer in self.informers.items()
            if not informer.synced.is_set()
        ]
        return "caches syncing: " + ("; ".join(waiting) or "starting")

    async def wait_synced(self) -> None:
        await self.discovered.wait()
        await asyncio.gather(*(i.synced.wait() for i in list(self.informers.values())))
        self.synced.set()

    def without(self) -> str:
        """The optional resources scheduling goes on without (their list is forbidden)."""
        return "; ".join(
            f"{name}: {informer.forbidden}"
            for name, informer in self.informers.items()
            if informer.forbidden
        )

    def _add(
        self,
        name: str,
        path: str,
        handler: object,
        *,
        api_version: str = "",
        kind: str = "",
        optional: bool = False,
        after: asyncio.Event | None = None,
    ) -> None:
        informer = Informer(
            self.kube,
            path,
            handler,  # type: ignore[arg-type]
            name=name,
            api_version=api_version,
            kind=kind,
            optional=optional,
            first_list=self.early.take(path),
            after=after,
            watch_after=self.watching,
            on_relist=lambda resource: self.metrics.informer_relists.labels(resource).inc(),
            on_error=lambda resource, code: self.metrics.api_errors.labels(
                f"list/watch {resource}", code
            ).inc(),
        )
        self.informers[name] = informer
        self.metrics.informer_relists.labels(name)  # the series exists (0) before any relist
        self.tasks.append(asyncio.create_task(informer.run(), name=f"informer-{name}"))

    async def _start_dra(self) -> None:
        """Dynamic Resource Allocation where the API server serves resource.k8s.io/v1
        (Kubernetes 1.34+): its four kinds are watched and pods' claims allocated. Elsewhere
        pods with resource claims stay unschedulable, never bound without their devices."""
        try:
            await self._get(RESOURCE_API)
        except Exception as exc:  # not served (404) or unreachable: no DRA this run
            log.warning("resource.k8s.io/v1 not served; no DRA", error=str(exc) or repr(exc))
            return
        self.dra_cache.enable()
        for name, path, handler in DRA_INFORMERS:
            self._add(name, path, handler(self.dra_cache), optional=True)

    async def _discover_pod_groups(self) -> bool:
        """Start a PodGroup informer for every dialect the API server serves (CRDs may be
        installed after we start; `_rediscover` picks them up). False if discovery failed."""
        try:
            groups = await self._get("/apis")
        except Exception as exc:  # HTTP error or API server unreachable: retried later
            log.warning("API discovery failed", error=str(exc) or repr(exc))
            return False
        for entry in groups.get("groups", []):
            name = entry.get("name")
            if name not in POD_GROUP_GROUPS or f"podgroups.{name}" in self.informers:
                continue
            # Every version's document at once (each one round trip, or none when asked
            # early), then the first version, in the server's order, serving PodGroups.
            version = serving_version(entry, await self._documents(entry), "podgroups")
            if not version:
                continue
            log.info("watching PodGroups", apiVersion=version)
            self._add(
                f"podgroups.{name}",
                f"/apis/{version}/podgroups",
                self.cache.pod_groups(POD_GROUP_GROUPS[name]),
                api_version=version,
                kind="PodGroup",
                optional=True,
                # A PodGroup's priorityClassName is resolved as it is read: its list, started
                # early, may arrive before the PriorityClasses'.
                after=self.informers["priorityclasses"].synced,
            )
            self.on_pod_groups(POD_GROUP_GROUPS[name], version)
        await self._discover_composites(groups)
        await self._discover_network_topology(groups)
        await self._discover_node_pools(groups)
        return True

    async def _discover_node_pools(self, groups: dict[str, object]) -> None:
        """Watch Karpenter's NodePools (read-only) where karpenter.sh/v1 serves them: a gang
        no node the pools may still add can make fit is then not left `Unschedulable`."""
        if NODEPOOL_INFORMER in self.informers:
            return
        group = NODEPOOL_API.partition("/")[0]
        served = [
            str(entry.get("groupVersion", ""))
            for found in groups.get("groups", [])  # type: ignore[attr-defined]
            if found.get("name") == group
            for entry in found.get("versions") or []
        ]
        if NODEPOOL_API not in served:
            return
        if not await self._serves_pod_groups(NODEPOOL_API, "nodepools"):
            return
        log.info("watching NodePools", apiVersion=NODEPOOL_API)
        self._add(
            NODEPOOL_INFORMER,
            NODEPOOL_PATH,
            self.cache.node_pools.handler(),
            api_version=NODEPOOL_API,
            kind="NodePool",
            optional=True,
        )

    async def _discover_network_topology(self, groups: dict[str, object]) -> None:
        """Watch Koordinator's ClusterNetworkTopology where its CRD is served: it names the
        node labels of the layers PodGroups' network-topology-spec annotations gather on."""
        if NETWORK_TOPOLOGY_INFORMER in self.informers:
            return
        group = NETWORK_TOPOLOGY_API.partition("/")[0]
        served = [
            str(entry.get("groupVersion", ""))
            for found in groups.get("groups", [])  # type: ignore[attr-defined]
            if found.get("name") == group
            for entry in found.get("versions") or []
        ]
        if NETWORK_TOPOLOGY_API not in served:
            return
        if not await self._serves_pod_groups(NETWORK_TOPOLOGY_API, "clusternetworktopologies"):
            return
        log.info("watching ClusterNetworkTopologies", apiVersion=NETWORK_TOPOLOGY_API)
        self._add(
            NETWORK_TOPOLOGY_INFORMER,
            NETWORK_TOPOLOGY_PATH,
            self.cache.network.handler(),
            api_version=NETWORK_TOPOLOGY_API,
            kind="ClusterNetworkTopology",
            optional=True,
        )

    async def _discover_composites(self, groups: dict[str, object]) -> None:
        """Watch CompositePodGroups where scheduling.k8s.io/v1alpha3 serves them."""
        if COMPOSITE_INFORMER in self.informers:
            return
        served = [
            str(version.get("groupVersion", ""))
            for entry in groups.get("groups", [])  # type: ignore[attr-defined]
            if entry.get("name") == "scheduling.k8s.io"
            for version in entry.get("versions") or []
        ]
        if COMPOSITE_API_VERSION not in served:
            return
        if not await self._serves_pod_groups(COMPOSITE_API_VERSION, "compositepodgroups"):
            return
        log.info("watching CompositePodGroups", apiVersion=COMPOSITE_API_VERSION)
        self._add(
            COMPOSITE_INFORMER,
            f"/apis/{COMPOSITE_API_VERSION}/compositepodgroups",
            self.composite_cache.handler(),
            api_version=COMPOSITE_API_VERSION,
            kind="CompositePodGroup",
            optional=True,
        )
        self.on_pod_groups(Dialect.COMPOSITE, COMPOSITE_API_VERSION)

    async def _serves_pod_groups(self, group_version: str, resource: str = "podgroups") -> bool:
        try:
            resources = await self._get(f"/apis/{group_version}")
        except Exception:
            return False
        return any(r.get("name") == resource for r in resources.get("resources", []))

    async def _documents(self, group: JSON) -> dict[str, JSON]:
        """The discovery documents of an `/apis` group entry's versions, by group version
        (those that could not be read left out)."""
        versions = [str(v.get("groupVersion", "")) for v in group.get("versions") or []]
        versions = [v for v in versions if v]
        answers = await asyncio.gather(
            *(self._get(f"/apis/{v}") for v in versions), return_exceptions=True
        )
        return {v: a for v, a in zip(versions, answers, strict=True) if isinstance(a, dict)}

    async def _get(self, path: str) -> JSON:
        """A discovery read: the answer `gangsched run` asked for early, at start, else our
        own (and ours again if the early one got no answer: a connection failure)."""
        early = self.early.answer(path)
        if early is not None:
            try:
                return await asyncio.shield(early)
            except KubeError:
                raise  # the API server's answer
            except asyncio.CancelledError:
                if not early.cancelled():
                    raise  # we are being stopped
            except Exception:  # no answer (connection failed): asked again below
                pass
        return await self.kube.get(path)

    async def _rediscover(self) -> None:
        # Until discovery first succeeds (e.g. started while the API server restarts) retry
        # soon: scheduling waits for it, or gangs would look like groups without PodGroups.
        delay = 1.0
        while not self.discovered.is_set():
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.discovery_seconds)
            if await self._discover_pod_groups():
                self.discovered.set()
        while True:
            await asyncio.sleep(self.discovery_seconds)
            await self._discover_pod_groups()
