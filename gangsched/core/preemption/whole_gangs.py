"""mincost candidate `workloads`: evict whole gangs, not a few pods of many.

A victim set built pod by pod (kep's reprieve, `staged`, `greedy`) takes the cheapest pods
wherever they are, so preempting for a 20-pod gang in a rack of Single-mode gangs easily
takes one or two pods from each of ten gangs: every one of them drops below its minMember and
its other members keep running without making progress (`Quorum`). Counted as the cost order
counts it (pods disrupted includes those stranded members), that is the dearest choice.

This candidate thinks in workloads. The potential victims are grouped into atoms, each taken
or left as one:

* a pod that strands nobody when it goes: a lone pod, a pod of a gang already below its
  quorum (its remnants), or one of a gang's spare members above minMember;
* the rest of a Single-mode gang's members in reach (taking them breaks the gang: it costs
  the gang's minMember, whatever is left outside the domain included);
* an All-mode group (already one unit).

Atoms are taken cheapest first (no PDB violation before any, lower priority first, then the
pods the atom disrupts, then youngest), the shortest prefix with which the cycle places as
many members as with every victim gone is found by binary search, and the victims are then
offered back last-taken first around that placement. The result is verified by the real
cycle like every candidate, and mincost keeps it only where the cost order says it is cheaper.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gangsched.core.model import GroupRef
from gangsched.core.preemption.engine import Candidate, Problem
from gangsched.core.preemption.prefix import (
    kept_after_removing,
    smallest_sufficient_prefix,
    surely_placed,
)
from gangsched.core.preemption.victims import VictimUnit


@dataclass(slots=True, eq=False)
class Atom:
    units: list[VictimUnit]
    #: Pods the atom disrupts: evicted plus the members it leaves without a quorum.
    disrupted: int

    def order(self, violating: frozenset[int]) -> tuple[object, ...]:
        return (
            any(unit.index in violating for unit in self.units),
            max(unit.priority for unit in self.units),
            self.disrupted,
            -max(unit.created for unit in self.units),
            self.units[0].key,
        )


def atoms(units: list[VictimUnit]) -> list[Atom]:
    """The potential victims grouped into what is taken or left together (module doc)."""
    out: list[Atom] = []
    gangs: dict[GroupRef, list[VictimUnit]] = {}
    for unit in units:
        if unit.quorum is None:
            out.append(Atom([unit], unit.size))
        else:
            gangs.setdefault(unit.quorum.ref, []).append(unit)
    for members in gangs.values():
        quorum = members[0].quorum
        assert quorum is not None
        # Youngest spare members go first (upstream: work that ran longest is lost last).
        members.sort(key=lambda u: (-u.created, u.key))
        spare = (
            max(quorum.bound - quorum.min_member, 0)
            if quorum.bound >= quorum.min_member
            else len(members)
        )
        out.extend(Atom([unit], unit.size) for unit in members[:spare])
        rest = members[spare:]
        if rest:
            evicted = sum(unit.size for unit in members)
            out.append(Atom(rest, sum(u.size for u in rest) + quorum.stranded(evicted)))
    return out


def whole_gangs(problem: Problem) -> Candidate | None:
    """The candidate of the module doc; None when no prefix of atoms places the gang."""
    if not any(unit.quorum is not None for unit in problem.units):
        return None  # no gang to keep whole: the pod-level candidates already cover it
    violating = problem.violating
    ordered = sorted(atoms(problem.units), key=lambda atom: atom.order(violating))
    prefixes: list[list[VictimUnit]] = []
    taken: list[VictimUnit] = []
    for atom in ordered:
        taken = [*taken, *atom.units]
        prefixes.append(taken)
    position = {unit.index: i for i, unit in enumerate(taken)}
    chosen = smallest_sufficient_prefix(
        prefixes,
        lambda k: kept_after_removing(problem, prefixes[k], lambda unit: (-position[unit.index],)),
        surely=lambda k: surely_placed(problem, prefixes[k]),
    )
    if chosen is None:
        return None
    return problem.verify(chosen, "mincost/workloads", problem.potential_pods)


def _by_position(position: dict[int, int]) -> Callable[[VictimUnit], tuple[object, ...]]:
    return lambda unit: (position[unit.index],)


def one_gang(problem: Problem, *, probes: int = 8) -> Candidate | None:
    """The other shape of a cheap set: one whole workload that makes room, rather than
    several small ones taken smallest first (needing 10 places, one 10-pod gang disrupts 10
    pods and one workload where a 3-, a 4- and a 5-pod gang disrupt 12 pods and three; and
    one 2-pod job is one workload where two lone pods are two, issue 14).

    Each workload in reach (a gang's members, or every pod of a PodGroup whose pods strand
    nobody) is tried alone first, then with the members that strand nobody (lone pods,
    remnants, spare members) added; the victims not needed around the placement found are
    then given back. The first that places the gang is the candidate; mincost compares it
    with the others by the cost order, so a cheaper set of lone pods still wins."""
    violating = problem.violating
    every = atoms(problem.units)
    cheap = [a for a in every if len(a.units) == 1 and a.disrupted == a.units[0].size]
    # By identity: `a not in cheap` compared atoms field by field against the whole list,
    # quadratic in the victims (70 s at 50,000 pods).
    cheap_ids = {id(a) for a in cheap}
    gangs = [a for a in every if id(a) not in cheap_ids] + _groups_of_cheap_pods(cheap)
    gangs.sort(key=lambda atom: atom.order(violating))
    if not gangs:
        return None
    singles = [atom.units[0] for atom in cheap]
    for gang in gangs[:probes]:
        inside = {unit.index for unit in gang.units}
        others = [unit for unit in singles if unit.index not in inside]
        for chosen in (list(gang.units), [*others, *gang.units]):
            # Reprieve order: singles first (each one given back disrupts one pod less),
            # then the workload's own members (a part of a gang given back still leaves
            # it broken).
            position = {unit.index: i for i, unit in enumerate(chosen)}
            kept = kept_after_removing(problem, chosen, _by_position(position))
            if kept is not None:
                return problem.verify(kept, "mincost/one-gang", problem.potential_pods)
    return None


def _groups_of_cheap_pods(cheap: list[Atom]) -> list[Atom]:
    """PodGroups all of whose pods in reach strand nobody when they go (minMember 1, or
    spare members), as one atom each when they hold two pods or more: taking such a group
    whole disrupts one workload for several pods."""
    by_group: dict[GroupRef, list[VictimUnit]] = {}
    for atom in cheap:
        unit = atom.units[0]
        if unit.group is None and len(unit.groups) == 1:
            by_group.setdefault(unit.groups[0], []).append(unit)
    return [
        Atom(units, sum(unit.size for unit in units))
        for units in by_group.values()
        if len(units) > 1
    ]
