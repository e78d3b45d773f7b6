"""One cycle for a whole CompositePodGroup tree: every level placed, or nothing of it.

Upstream (kube-scheduler 1.37, KEP-6012) walks the children of each CompositePodGroup in a
fixed order, places each child greedily, and gives up as soon as minGroupCount is out of
reach. That misses placements that exist: an early child can take the room a later one needed,
and which k of the n children to take matters. Here the same greedy pass comes first (same
result as upstream wherever upstream succeeds), then two searches over the same snapshot
(search.py):

1. which children to take: a depth-first search over the leaf PodGroups (take it, placed by
   the ordinary gang cycle, or leave it out), in tree order and then largest first, pruned as
   soon as the root can no longer be satisfied;
2. where each pod goes: a depth-first search over (pod, node) across the whole tree, every
   leaf all or nothing, exact on small trees within the cycle's search budget.

A level is satisfied when its PodGroup has minCount members (bound ones count), or its
CompositePodGroup has minGroupCount satisfied children (one for a basic policy). Placements
in a subtree whose parent is not satisfied are never kept: a parent that fails fails every
child below it. Once the root is satisfied, the children that were not needed are still placed
where they fit, each all or nothing (as upstream keeps evaluating them).
"""

from __future__ import annotations

from collections.abc import Callable

from gangsched.core.composite.attempt import Attempt
from gangsched.core.composite.domains import (
    bound_domains,
    candidate_domains,
    confined_placer,
    leaf_domain_framework,
    packing_placer,
)
from gangsched.core.composite.search import backtrack, fragmentation, leaf_orders, subset_search
from gangsched.core.composite.state import TreeState
from gangsched.core.composite.tree import TreeNode
from gangsched.core.composite.validation import validate_tree
from gangsched.core.composite.verdicts import (
    failure_result,
    level_verdicts,
    placed_message,
    short_message,
    spread_message,
    why_not,
)
from gangsched.core.cycle import CycleResult, Gang
from gangsched.core.gang_placer import extend_placement
from gangsched.core.snapshot import BoolVector, Snapshot
from gangsched.core.status import Code
from gangsched.core.topology.domains import Domain
from gangsched.core.topology.placement import TopologyPlacer


class TreePlacement(TreeState):
    """Places one tree over a snapshot (see the module doc); successful placements stay
    assumed, failed ones are rolled back."""

    def __init__(
        self,
        placer: TopologyPlacer,
        gang: Gang,
        snap: Snapshot,
        *,
        outer: BoolVector | None = None,
    ) -> None:
        super().__init__(placer, gang, snap, outer=outer)
        #: Levels below the root with a topology constraint: the tree-wide searches do not
        #: know domains, so such trees are placed level by level (greedy, exact per domain).
        self.nested_constraints = any(_constrained(node) for node in self.nodes[1:])
        #: A leaf PodGroup with its own topology constraint: only the gang cycle (the
        #: topology placer) keeps it in one domain, so no tree-wide pod-by-pod search runs.
        self.leaf_topology = any(
            node.group is not None and node.group.topology is not None for node in self.nodes
        )
        #: This placement is itself the packing pass of _least_fragmented (no second one).
        self.packing = False
        #: This placement is a constrained level's subtree inside the pass of a larger tree
        #: (_subtree_in_a_domain): it keeps the first placement it finds. The choice of the
        #: least fragmented placement is made once, over whole trees, by the placement of the
        #: root: one made here would change the room the level's later siblings have left, so
        #: whether the tree fits would depend on it.
        self.subtree = False

    # ------------------------------------------------------------------------ the cycle
    def run(self) -> CycleResult:
        error = validate_tree(self.gang, self.tree)
        if error is not None:
            return CycleResult(Code.ERROR, message=error)
        if not self.ready(self.tree):
            return CycleResult(
                Code.WAIT,
                message=f"the tree of {self.tree.label()} is not ready: "
                + self.not_ready_reason(self.tree),
            )
        if not self.gang.pending:
            return CycleResult(Code.SUCCESS, strategy="already-bound")
        if _constrained(self.tree):
            return self._in_a_domain()
        return self.place()

    def _in_a_domain(self) -> CycleResult:
        """The root's topology constraint: the whole tree inside one domain (module
        domains.py), each domain tried with the tree's full cycle."""
        root = self.tree
        assert root.composite is not None and root.composite.topology_key is not None
        key = root.composite.topology_key
        refs = [leaf.ref for leaf in root.leaves()]
        spread = bound_domains(root, self.snap, self.parts)
        if len(spread) > 1:
            return CycleResult(Code.ERROR, message=spread_message(root, key, spread))
        last: CycleResult | None = None
        tried = 0
        pending = sum(len(part.pending) for part in self.gang.parts)
        mark = self.snap.checkpoint()
        best: tuple[int, int] | None = None  # (pods placed, candidate index)
        candidates = candidate_domains(
            root, self.snap, self.parts, self.outer, self.placer.framework
        )

        def attempt(index: int) -> CycleResult:
            domain = candidates[index]
            mask = domain.mask if self.outer is None else domain.mask & self.outer
            inner = TreePlacement(
                confined_placer(self.placer, refs, mask, domain.name),
                self.gang,
                self.snap,
                outer=mask,
            )
            inner.packing = self.packing
            result = inner.place()
            if result.code is Code.SUCCESS:
                result.strategy = f"{result.strategy} in {domain.name}"
            return result

        # Tightest domain first, but the one that holds more of the tree's pods wins
        # (upstream's PodGroupPodsCount placement score): a domain with room for the minimum
        # only would strand the other children, who can never leave the root's domain.
        for index in range(len(candidates)):
            tried += 1
            result = attempt(index)
            if result.code is Code.SUCCESS:
                placed = len(result.placements)
                if placed >= pending:
                    return result
                if best is None or placed > best[0]:
                    best = (placed, index)
            else:
                last = result
            self.snap.rollback(mark)
        if best is not None:
            return attempt(best[1])
        why = last.message if last is not None else "none has room for its smallest minimum"
        message = f"{root.label()}: no {key} domain holds the tree ({tried} tried); {why}"
        failed = last or CycleResult(Code.UNSCHEDULABLE)
        failed.message = message
        failed.levels = {
            node.ref: (
                False,
                message if node is root else failed.levels.get(node.ref, (False, message))[1],
            )
            for node in self.nodes
        }
        return failed

    def place(self, *, allow_empty: bool = False) -> CycleResult:
        """The cycle proper: greedy, then the searches (module doc)."""
        snap = self.snap
        mark = snap.checkpoint()
        first = Attempt()
        if self._greedy(self.tree, first) and (first.placements or allow_empty):
            return self._least_fragmented(first, "greedy", mark)
        snap.rollback(mark)
        if first.satisfied.get(self.tree.ref) and not first.placements:
            # Satisfied by bound members alone and nothing more fits: upstream's
            # "at least one pod must be scheduled" turns this into Unschedulable.
            return failure_result(self, first, nothing_placed=True)
        if self.nested_constraints:
            # The tree-wide searches know no domains: what remains is the same level-by-level
            # pass with nodes in use scored first (_packed), which leaves other room to the
            # levels after a constrained one. It is the least fragmented candidate already.
            packed = None if self.packing else self._packed()
            if packed is not None:
                return self._success(packed, "greedy-packing", extended=True)
            snap.rollback(mark)
            return failure_result(self, first)
        searches: tuple[tuple[str, Callable[[], Attempt | None]], ...] = (
            ("which-children", lambda: subset_search(self, leaf_orders(self)[0])),
            ("which-children-largest-first", lambda: subset_search(self, leaf_orders(self)[1])),
            ("tree-backtracking", lambda: backtrack(self)),
        )
        if self.leaf_topology:
            # The pod-by-pod search does not keep a constrained leaf inside one domain: only
            # the searches that place each leaf through the gang cycle (the topology placer)
            # may run, or a leaf that asked for one rack could be spread over two.
            searches = searches[:2]
        for name, search in searches:
            attempt = search()
            if attempt is not None:
                return self._least_fragmented(attempt, name, mark, rerun=search)
            snap.rollback(mark)
        return failure_result(self, first)

    def _least_fragmented(
        self,
        found: Attempt,
        strategy: str,
        mark: int,
        *,
        rerun: Callable[[], Attempt | None] | None = None,
    ) -> CycleResult:
        """The issue asks for the placement that leaves the cluster least fragmented
        (search.fragmentation). Each candidate is judged whole, after the children not needed
        are placed too (_extend): more pods placed first, then fewer idle nodes opened, then
        fewer nodes touched. The first placement found (upstream's greedy one where it
        succeeds) is kept unless a tighter one beats it; when it opens no idle node it is
        already as good and nothing more is searched. The tighter one comes from the
        tightest-first pod-by-pod search, or, where a level below the root or a leaf has a
        topology constraint (that search knows no domains), from the same level-by-level pass
        with nodes in use scored first (_packed): each constrained level then keeps its
        domain. The comparison is made here only, between whole trees: a constrained level
        below keeps the first placement it finds (`subtree`), as its choice would decide what
        its later siblings have left, and so whether the tree fits at all. The loser is rolled
        back; the first one is found again by re-running its deterministic search on the same
        snapshot."""
        snap = self.snap
        self._extend(self.tree, found)
        score = _rank(snap, found)
        if score[1] == 0 or self.packing or self.subtree or self.placer.config.search_budget <= 0:
            return self._success(found, strategy, extended=True)
        snap.rollback(mark)
        if self.nested_constraints or self.leaf_topology:
            packed = self._packed()
            if packed is not None and _rank(snap, packed) < score:
                return self._success(packed, f"{strategy}+least-fragmented", extended=True)
        else:
            tight = backtrack(self, tightest=True)
            if tight is not None:
                self._extend(self.tree, tight)
                if _rank(snap, tight) < score:
                    return self._success(tight, f"{strategy}+least-fragmented", extended=True)
        snap.rollback(mark)
        again = Attempt()
        if rerun is None:
            self._greedy(self.tree, again)
        else:
            again = rerun() or again
        return self._success(again, strategy)

    def _packed(self) -> Attempt | None:
        """The greedy pass again, with every level and leaf placed by the packing placer
        (domains.packing_placer), its unneeded children placed too; None if it fails."""
        packing = TreePlacement(packing_placer(self.placer), self.gang, self.snap, outer=self.outer)
        packing.packing = True
        at = Attempt()
        if not packing._greedy(packing.tree, at) or not at.placements:
            return None
        packing._extend(packing.tree, at)
        return at

    # ------------------------------------------------------------------------ greedy
    def _greedy(self, node: TreeNode, at: Attempt) -> bool:
        """Upstream's order: children oldest first, each placed whole or rolled back."""
        if node.is_leaf:
            return self._place_leaf(node, at)
        if node is not self.tree and _constrained(node):
            return self._subtree_in_a_domain(node, at)
        snap = self.snap
        mark, start = snap.checkpoint(), len(at.placements)
        placed = 0
        remaining = len(node.children)
        failed: TreeNode | None = None
        for child in node.children:
            if placed + remaining < node.needed:
                break  # upstream gives up as soon as minGroupCount is out of reach
            remaining -= 1
            child_mark, child_start = snap.checkpoint(), len(at.placements)
            if self._greedy(child, at):
                placed += 1
                continue
            snap.rollback(child_mark)
            del at.placements[child_start:]
            failed = failed or child
        if placed >= node.needed:
            at.satisfied[node.ref] = True
            at.messages[node.ref] = placed_message(node, placed)
            return True
        snap.rollback(mark)
        del at.placements[start:]
        at.satisfied[node.ref] = False
        at.messages[node.ref] = short_message(node, placed, remaining, failed, at.messages)
        return False

    def _subtree_in_a_domain(self, node: TreeNode, at: Attempt) -> bool:
        """A constrained level below the root: its subtree in one domain of its key, inside
        this placement's own domain (nested)."""
        assert node.composite is not None and node.composite.topology_key is not None
        parts = [self.parts[leaf.ref] for leaf in node.leaves() if leaf.ref in self.parts]
        subtree = Gang(key=node.ref, parts=parts, tree=node)
        refs = [part.group.ref for part in parts]
        last = ""
        spread = bound_domains(node, self.snap, self.parts)
        if len(spread) > 1:
            at.satisfied[node.ref] = False
            at.messages[node.ref] = spread_message(node, node.composite.topology_key, spread)
            return False
        candidates = candidate_domains(
            node, self.snap, self.parts, self.outer, self.placer.framework
        )
        pending = sum(len(part.pending) for part in parts)
        mark = self.snap.checkpoint()

        def attempt(domain: Domain) -> CycleResult:
            mask = domain.mask if self.outer is None else domain.mask & self.outer
            inner = TreePlacement(
                confined_placer(self.placer, refs, mask, domain.name),
                subtree,
                self.snap,
                outer=mask,
            )
            inner.packing = self.packing
            inner.subtree = True
            return inner.place(allow_empty=True)

        def take(domain: Domain, result: CycleResult) -> bool:
            at.placements.extend(result.placements)
            at.pod_messages.update(result.pod_messages)
            for ref, (ok, message) in result.levels.items():
                at.satisfied[ref] = ok
                at.messages[ref] = message
            at.messages[node.ref] = f"{at.messages.get(node.ref, '')} in {domain.name}"
            return True

        # Tightest domain first, but the one that holds more of the subtree's pods wins, as
        # at the root (upstream's PodGroupPodsCount placement score at every level): the
        # children a tight domain strands can never leave the level's domain.
        best: tuple[int, Domain] | None = None
        for domain in candidates:
            result = attempt(domain)
            if result.code is Code.SUCCESS:
                if len(result.placements) >= pending:
                    return take(domain, result)
                if best is None or len(result.placements) > best[0]:
                    best = (len(result.placements), domain)
            else:
                last = result.message
                if at.failed_pod is None and result.failed_pod is not None:
                    at.failed_pod, at.diagnosis = result.failed_pod, result.diagnosis
            self.snap.rollback(mark)
        if best is not None:
            again = attempt(best[1])  # deterministic: the same placement as before
            if again.code is Code.SUCCESS:
                return take(best[1], again)
            self.snap.rollback(mark)
        at.satisfied[node.ref] = False
        key = node.composite.topology_key
        at.messages[node.ref] = f"no {key} domain holds it" + (f": {last}" if last else "")
        return False

    def _place_leaf(self, node: TreeNode, at: Attempt) -> bool:
        part = self.part(node)
        if part is None or not self.leaf_ready(node):
            at.satisfied[node.ref] = False
            at.messages[node.ref] = self.not_ready_reason(node)
            return False
        if self.bound_ok(node):
            # minCount is met by bound members: members beyond it go where they fit.
            self._extend_leaf(node, at)
            at.satisfied[node.ref] = True
            at.messages[node.ref] = "minCount met by bound members"
            return True
        result = self.placer.place(Gang(key=node.ref, parts=[part]), self.snap)
        at.pod_messages.update(result.pod_messages)
        if result.code is Code.SUCCESS:
            at.placements.extend(result.placements)
            at.satisfied[node.ref] = True
            at.messages[node.ref] = f"{len(result.placements)} pod(s) placed"
            return True
        at.satisfied[node.ref] = False
        at.messages[node.ref] = result.message
        if at.failed_pod is None and result.failed_pod is not None:
            at.failed_pod, at.diagnosis = result.failed_pod, result.diagnosis
        return False

    def _extend_leaf(self, node: TreeNode, at: Attempt) -> None:
        part = self.part(node)
        if part is None or not part.pending:
            return
        placed = {id(pod) for pod, _ in at.placements}
        if all(id(pod) in placed for pod in part.pending):
            return
        partial = CycleResult(
            Code.SUCCESS, placements=[(p, n) for p, n in at.placements if p in part.pending]
        )
        before = len(partial.placements)
        framework = leaf_domain_framework(self.placer.framework, part, partial, self.snap)
        extend_placement(Gang(key=node.ref, parts=[part]), self.snap, framework, partial)
        at.placements.extend(partial.placements[before:])
        at.pod_messages.update(partial.pod_messages)

    # ------------------------------------------------------------------------ results
    def _success(self, at: Attempt, strategy: str, *, extended: bool = False) -> CycleResult:
        if not extended:
            self._extend(self.tree, at)
        placed = {id(pod) for pod, _ in at.placements}
        for part in self.gang.parts:
            for pod in part.pending:
                if id(pod) in placed:
                    at.pod_messages.pop(pod.key, None)
                elif pod.key not in at.pod_messages:
                    at.pod_messages[pod.key] = why_not(self, pod, at)
        return CycleResult(
            Code.SUCCESS,
            placements=at.placements,
            pod_messages=at.pod_messages,
            failed_pod=at.failed_pod,
            diagnosis=at.diagnosis,
            strategy=strategy,
            levels=level_verdicts(self, at, None),
        )

    def _extend(self, node: TreeNode, at: Attempt) -> None:
        """After the root is satisfied: members beyond minCount of placed leaves, and the
        children not needed for minGroupCount, each placed whole where it fits."""
        if node.is_leaf:
            if at.satisfied.get(node.ref):
                self._extend_leaf(node, at)
            return
        for child in node.children:
            if at.satisfied.get(child.ref):
                if not _constrained(child):
                    # A constrained level's own placement already extended it, inside its
                    # domain; from here, its unneeded children could land outside it.
                    self._extend(child, at)
                continue
            mark, start = self.snap.checkpoint(), len(at.placements)
            trial = Attempt(placements=at.placements)
            if self._greedy(child, trial):
                at.satisfied.update(trial.satisfied)
                at.messages.update(trial.messages)
                at.pod_messages.update(trial.pod_messages)
                self._extend(child, at)
                continue
            self.snap.rollback(mark)
            del at.placements[start:]
            for ref, message in trial.messages.items():
                if not trial.satisfied.get(ref):
                    at.satisfied[ref] = False
                    at.messages[ref] = message
            at.pod_messages.update(
                {k: v for k, v in trial.pod_messages.items() if k not in at.pod_messages}
            )
        if not node.is_leaf:
            placed = sum(1 for child in node.children if at.satisfied.get(child.ref))
            at.messages[node.ref] = placed_message(node, placed)


def _rank(snap: Snapshot, at: Attempt) -> tuple[int, int, int]:
    """_least_fragmented's order, lowest best: pods left out, idle nodes opened, nodes used."""
    opened, touched = fragmentation(snap, at)
    return -len(at.placements), opened, touched


def _constrained(node: TreeNode) -> bool:
    return node.composite is not None and node.composite.topology_key is not None
