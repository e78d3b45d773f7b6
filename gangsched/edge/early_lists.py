"""The pod and node lists of `gangsched run`, started before the rest of the process exists.

A restarted scheduler can decide nothing before it has listed every pod and node, and at
5,000 nodes / 50,000 pods those two lists are most of its start-up (issue 17). Importing the
core, pydantic and kopf and validating the config take 1-1.5 s of CPU before the first
request could go out; on a loaded machine 5 s (bench/README.md). So `gangsched run` imports
only the client first, starts these two lists, and does the rest in a worker thread while
the pages arrive: the informers then take over lists already under way
(`Informer.first_list`), with the pages that came meanwhile waiting, undecoded.

The API discovery that decides which PodGroup informers exist (`/apis`, then each version of
the groups those informers come from, one round trip after another) goes out here too, and so
do the lists of the PodGroups it finds: at 1,000 PodGroups their list was the last thing the
first bind waited for, started only after the discovery's round trips (issue 30).
gangsched.edge.watches reads the answers (`answer`) instead of asking again. The small lists
every start makes (namespaces, PriorityClasses, budgets, the storage kinds; DRA's,
CompositePodGroups and ClusterNetworkTopologies where served) go out early too (SMALL_PATHS
says why).

Nothing is decided from these pages before the informers have them all: they only move the
lists earlier. A list that fails here fails the informer's first list, which lists again as
after any failure; if the client cannot even be set up here (no kubeconfig, say), nothing is
started early and `gangsched run` reports the problem where it always did.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gangsched.edge.kube import JSON, Kube
from gangsched.edge.list_pages import ListPages

#: The lists that decide how soon the first gang can be placed: the rest are small.
EARLY_PATHS = ("/api/v1/pods", "/api/v1/nodes")
NAMESPACES_PATH = "/api/v1/namespaces"
PRIORITY_CLASSES_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"
BUDGETS_PATH = "/apis/policy/v1/poddisruptionbudgets"
#: Every other list each start makes, of APIs every server serves (gangsched.edge.watches'
#: informers; a unit test keeps the storage ones equal to gangsched.edge.volume_cache's). Small,
#: but listed after the imports each was one more request, most on a new connection and its TLS
#: handshake, that the caches' sync waited for: 0.3 s between the informers' start and the sync
#: of a precreated (b) run, 1,600 pods (issue 30). Sent after the pod and node lists, on the
#: early client's few connections.
SMALL_PATHS = (
    NAMESPACES_PATH,
    PRIORITY_CLASSES_PATH,
    BUDGETS_PATH,
    "/api/v1/persistentvolumeclaims",
    "/api/v1/persistentvolumes",
    "/apis/storage.k8s.io/v1/storageclasses",
    "/apis/storage.k8s.io/v1/csinodes",
    "/apis/storage.k8s.io/v1/csidrivers",
    "/apis/storage.k8s.io/v1/csistoragecapacities",
)
#: Pages each early list may hold before its informer exists: about 1.5 MB of JSON per
#: 500-pod page, and more than arrive while the imports run.
EARLY_PAGES_AHEAD = 16
#: The PodGroup API groups, in the order gangsched.edge.watches prefers them (its
#: POD_GROUP_GROUPS gives each its dialect; a unit test keeps the two equal).
POD_GROUP_API_GROUPS = (
    "scheduling.sigs.k8s.io",
    "scheduling.x-k8s.io",
    "scheduling.k8s.io",
    "scheduling.volcano.sh",
)
#: Discovery documents gangsched.edge.watches reads at start: DRA's group version, and every
#: version of these groups (PodGroups; CompositePodGroups live in scheduling.k8s.io;
#: Koordinator's ClusterNetworkTopologies).
DRA_API = "/apis/resource.k8s.io/v1"
#: Listed once DRA_API answers (gangsched.edge.dra_cache's DRA_INFORMERS; a test keeps them
#: equal).
DRA_PATHS = tuple(
    f"{DRA_API}/{kind}"
    for kind in ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")
)
DISCOVERY_GROUPS = (*POD_GROUP_API_GROUPS, "scheduling.koordinator.sh")
#: Lists of kinds only some clusters serve, started once the early discovery shows them served
#: (gangsched.edge.watches' CompositePodGroup and ClusterNetworkTopology informers; a test keeps
#: the paths equal): (group version, resource).
SERVED_LISTS = (
    ("scheduling.k8s.io/v1alpha3", "compositepodgroups"),
    ("scheduling.koordinator.sh/v1alpha1", "clusternetworktopologies"),
)
#: Connections of the early client: the pod and node lists, the small lists, the discovery
#: requests and the PodGroup lists (they hold one each only while in flight), none waiting
#: for another's connection.
EARLY_CONNECTIONS = 16


def serving_version(group: JSON, documents: Mapping[str, JSON], resource: str) -> str:
    """The first version of an `/apis` group entry, in the server's order, whose discovery
    document (in `documents`, by group version) serves `resource`; "" if none does. The
    preferred version may not serve it: scheduling.k8s.io/v1 is PriorityClasses."""
    for candidate in group.get("versions") or []:
        group_version = str(candidate.get("groupVersion", ""))
        document = documents.get(group_version)
        if document is not None and any(
            r.get("name") == resource for r in document.get("resources") or []
        ):
            return group_version
    return ""


@dataclass
class EarlyLists:
    kube: Kube | None = None
    #: Lists under way by path, until an informer takes each over.
    lists: dict[str, ListPages] = field(default_factory=dict)
    #: Discovery answers (or requests under way) by path, until gangsched.edge.watches has
    #: read them (`drop_answers`).
    gets: dict[str, asyncio.Task[JSON]] = field(default_factory=dict)
    #: Done once the discovery above has been sent and the PodGroup lists it found started.
    discovery: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, kubeconfig: str | None) -> EarlyLists:
        """Connect and start the lists; on any problem, nothing early (see the module)."""
        if kubeconfig is not None and not Path(kubeconfig).is_file():
            return cls()  # said by the operator's own connection (the client would print it)
        try:
            kube = await Kube.connect(kubeconfig, connections=EARLY_CONNECTIONS)
        except Exception:  # reported by the operator's own connection, as without this
            return cls()
        lists = {
            path: ListPages(kube, path, ahead=EARLY_PAGES_AHEAD).start()
            for path in (*EARLY_PATHS, *SMALL_PATHS)
        }
        early = cls(kube, lists)
        early.discovery = asyncio.create_task(early._discover(kube), name="early discovery")
        return early

    def take(self, path: str) -> ListPages | None:
        """The list of `path` under way, once (its informer's first list)."""
        return self.lists.pop(path, None)

    def answer(self, path: str) -> asyncio.Task[JSON] | None:
        """The early GET of `path` (done or under way); None if there was none, or after
        `drop_answers`."""
        return self.gets.get(path)

    def drop_answers(self) -> None:
        """After the first discovery: later ones ask the API server themselves."""
        for task in self.gets.values():
            task.cancel()
        self.gets.clear()

    async def discovered(self) -> None:
        """Once the early discovery has been sent and its PodGroup lists started (at once if
        there is none): a PodGroup informer started before would list on its own."""
        if self.discovery is not None:
            await asyncio.wait([self.discovery])

    async def _discover(self, kube: Kube) -> None:
        """Discovery as gangsched.edge.watches asks for it, all at once, then the list of each
        PodGroup dialect served. A failure here only means the watches ask themselves."""
        self.gets[DRA_API] = asyncio.create_task(kube.get(DRA_API))
        try:
            groups = await kube.get("/apis")
        except Exception:
            return
        self.gets["/apis"] = asyncio.create_task(_answer(groups))
        entries = [g for g in groups.get("groups") or [] if g.get("name") in DISCOVERY_GROUPS]
        for entry in entries:
            for version in entry.get("versions") or []:
                path = f"/apis/{version.get('groupVersion', '')}"
                self.gets.setdefault(path, asyncio.create_task(kube.get(path)))
        documents: dict[str, JSON] = {}
        for path, task in list(self.gets.items()):
            with contextlib.suppress(Exception):
                documents[path.removeprefix("/apis/")] = await asyncio.shield(task)
        for entry in entries:
            if entry.get("name") in POD_GROUP_API_GROUPS:
                version = serving_version(entry, documents, "podgroups")
                if version:
                    path = f"/apis/{version}/podgroups"
                    self.lists[path] = ListPages(kube, path, ahead=EARLY_PAGES_AHEAD).start()
        if DRA_API.removeprefix("/apis/") in documents:  # served: gangsched.edge.watches lists
            for path in DRA_PATHS:
                self.lists[path] = ListPages(kube, path, ahead=EARLY_PAGES_AHEAD).start()
        for group_version, resource in SERVED_LISTS:
            document = documents.get(group_version) or {}
            if any(r.get("name") == resource for r in document.get("resources") or []):
                path = f"/apis/{group_version}/{resource}"
                self.lists[path] = ListPages(kube, path, ahead=EARLY_PAGES_AHEAD).start()

    async def close(self) -> None:
        """Once the informers have synced (or the process stops): the lists not taken are
        cancelled and the connection closed."""
        if self.discovery is not None:
            self.discovery.cancel()
            await asyncio.gather(self.discovery, return_exceptions=True)
            self.discovery = None
        for pages in self.lists.values():
            pages.cancel()
        self.lists.clear()
        self.drop_answers()
        if self.kube is not None:
            kube, self.kube = self.kube, None
            with contextlib.suppress(Exception):
                await kube.close()


async def _answer(answer: JSON) -> JSON:
    return answer
