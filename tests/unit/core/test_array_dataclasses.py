"""No dataclass holding a NumPy array compares or hashes by its fields (issue 29 item 4).

The generated `__eq__` compares fields as a tuple, and an array field makes that elementwise
("truth value of an array is ambiguous"); `frozen=True` adds a `__hash__` over the fields,
and an array is unhashable. Either fails only at run time, when such a value first lands in a
set, a dict key, `==` or `in`. Every dataclass with a field annotated as an array (or as a
tuple/dict/list of them) must say `eq=False` (identity, or its own `__eq__`/`__hash__` over a
stable key, as topology.Domain does)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np

from gangsched.core.snapshot import Snapshot
from gangsched.core.topology.domains import Partition, partition
from tests.builders import node

ROOT = Path(__file__).resolve().parents[3] / "gangsched"
ARRAY = re.compile(r"\b(\w*Vector|\w*Matrix|ndarray|NDArray)\b")


def _array_dataclasses() -> list[tuple[str, bool]]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for cls in ast.walk(ast.parse(path.read_text())):
            if not isinstance(cls, ast.ClassDef):
                continue
            decorators = [d for d in cls.decorator_list if "dataclass" in ast.unparse(d)]
            if not decorators:
                continue
            holds_array = any(
                isinstance(s, ast.AnnAssign) and ARRAY.search(ast.unparse(s.annotation))
                for s in cls.body
            )
            if not holds_array:
                continue
            eq_off = any(
                isinstance(d, ast.Call)
                and any(
                    k.arg == "eq" and isinstance(k.value, ast.Constant) and k.value.value is False
                    for k in d.keywords
                )
                for d in decorators
            )
            found.append((f"{path.relative_to(ROOT.parent)}:{cls.lineno} {cls.name}", eq_off))
    return found


def test_dataclasses_holding_arrays_do_not_compare_by_fields() -> None:
    found = _array_dataclasses()
    assert len(found) >= 10, found  # the scan itself still finds them
    assert [name for name, eq_off in found if not eq_off] == []


def test_snapshot_and_partition_compare_by_identity() -> None:
    nodes = [node(f"n{i}", 2, labels={"rack": "a"}) for i in range(2)]
    one, two = Snapshot.build(nodes), Snapshot.build(nodes)
    assert one != two and len({one, two}) == 2
    split = partition(one, "rack")
    assert isinstance(split, Partition) and split is partition(one, "rack") and split in {split}
    assert split != Partition(domains=split.domains, of_node=np.copy(split.of_node))
