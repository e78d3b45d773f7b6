"""ClusterState.unbound holds exactly our pods without a node, neither terminating nor
finished, whatever sequence of changes brought them there: the pending questions
(`pending_refs`, the queue gauges) walk it instead of every pod."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.cluster import ClusterState
from gangsched.core.model import Pod
from tests.builders import cluster, node, pod

NAMES = [f"p{i}" for i in range(4)]
change = st.one_of(
    st.tuples(
        st.just("upsert"),
        st.sampled_from(NAMES),
        st.sampled_from([None, "n0", "n1"]),
        st.sampled_from(["gangsched", "default-scheduler"]),
        st.sampled_from([None, "Running", "Succeeded", "Failed"]),
        st.booleans(),  # terminating
        st.booleans(),  # a scheduling gate
        st.sampled_from([None, "g0", "g1"]),
    ),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("bind"), st.sampled_from(NAMES), st.sampled_from(["n0", "n1"])),
    st.tuples(st.just("forget"), st.sampled_from(NAMES)),
    st.tuples(st.just("terminating"), st.sampled_from(NAMES), st.booleans()),
)


def expected(state: ClusterState) -> dict[str, Pod]:
    return {
        key: p
        for key, p in state.pods.items()
        if p.node_name is None
        and p.scheduler_name == state.scheduler_name
        and not p.terminating
        and not p.is_finished
    }


@settings(max_examples=300, deadline=None)
@given(st.lists(change, max_size=40))
def test_the_unbound_index_follows_every_change(changes: list[tuple[object, ...]]) -> None:
    state = cluster(
        [node("n0"), node("n1")],
        [pod("p0"), pod("p1", node_name="n0"), pod("p2", scheduler_name="default-scheduler")],
    )
    assert state.unbound == expected(state) and set(state.unbound) == {"default/p0"}
    for name, *args in changes:
        key = f"default/{args[0]}"
        current = state.pods.get(key)
        if name == "upsert":
            _, node_name, scheduler, phase, terminating, gated, group = args
            made = pod(
                str(args[0]),
                node_name=node_name if isinstance(node_name, str) else None,
                scheduler_name=str(scheduler),
                phase=phase if isinstance(phase, str) else None,
                terminating=bool(terminating),
                group=group if isinstance(group, str) else None,
            )
            if gated:
                made = replace(made, scheduling_gates=("example.com/wait",))
            state.upsert_pod(made)
        elif name == "delete":
            state.delete_pod(key)
        elif current is None:
            continue
        elif name == "bind" and current.node_name is None:
            state.bind(current, str(args[1]))
        elif name == "forget" and current.node_name is not None:
            state.forget(current)
        elif name == "terminating":
            state.set_terminating(current, bool(args[1]))
        assert state.unbound == expected(state)
        pending = {p.key for p in state.pods.values() if state.is_pending(p)}
        assert {p.key for p in state.unbound.values() if state.is_pending(p)} == pending
