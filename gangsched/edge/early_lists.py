"""The pod and node lists of `gangsched run`, started before the rest of the process exists.

A restarted scheduler can decide nothing before it has listed every pod and node, and at
5,000 nodes / 50,000 pods those two lists are most of its start-up (issue 17). Importing the
core, pydantic and kopf and validating the config take 1-1.5 s of CPU before the first
request could go out; on a loaded machine 5 s (bench/README.md). So `gangsched run` imports
only the client first, starts these two lists, and does the rest in a worker thread while
the pages arrive: the informers then take over lists already under way
(`Informer.first_list`), with the pages that came meanwhile waiting, undecoded.

Nothing is decided from these pages before the informers have them all: they only move the
lists earlier. A list that fails here fails the informer's first list, which lists again as
after any failure; if the client cannot even be set up here (no kubeconfig, say), nothing is
started early and `gangsched run` reports the problem where it always did.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from gangsched.edge.kube import Kube
from gangsched.edge.list_pages import ListPages

#: The lists that decide how soon the first gang can be placed: the rest are small.
EARLY_PATHS = ("/api/v1/pods", "/api/v1/nodes")
#: Pages each early list may hold before its informer exists: about 1.5 MB of JSON per
#: 500-pod page, and more than arrive while the imports run.
EARLY_PAGES_AHEAD = 16


@dataclass
class EarlyLists:
    kube: Kube | None = None
    #: Lists under way by path, until an informer takes each over.
    lists: dict[str, ListPages] = field(default_factory=dict)

    @classmethod
    async def start(cls, kubeconfig: str | None) -> EarlyLists:
        """Connect and start the lists; on any problem, nothing early (see the module)."""
        if kubeconfig is not None and not Path(kubeconfig).is_file():
            return cls()  # said by the operator's own connection (the client would print it)
        try:
            kube = await Kube.connect(kubeconfig, connections=len(EARLY_PATHS))
        except Exception:  # reported by the operator's own connection, as without this
            return cls()
        lists = {
            path: ListPages(kube, path, ahead=EARLY_PAGES_AHEAD).start() for path in EARLY_PATHS
        }
        return cls(kube, lists)

    def take(self, path: str) -> ListPages | None:
        """The list of `path` under way, once (its informer's first list)."""
        return self.lists.pop(path, None)

    async def close(self) -> None:
        """Once the informers have synced (or the process stops): the lists not taken are
        cancelled and the connection closed."""
        for pages in self.lists.values():
            pages.cancel()
        self.lists.clear()
        if self.kube is not None:
            kube, self.kube = self.kube, None
            with contextlib.suppress(Exception):
                await kube.close()
