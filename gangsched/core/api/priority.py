"""PriorityClasses and the admission-time resolution of a class name into a priority.

Pods read from a live cluster already carry `spec.priority` (the Priority admission plugin set
it), but manifests fed to `gangsched simulate` and PodGroups of the CRD dialects do not, so the
converters resolve class names themselves with the same rules as admission.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gangsched.core.api.fields import INT32_MIN, Reader
from gangsched.core.api.types import RawPriorityClass
from gangsched.core.model import PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER, PriorityClass

PREEMPTION_POLICIES = (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER)
#: Users may not define classes above this; the system classes live above it.
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PREFIX = "system-"

#: Every API server creates these two; pods may name them without the input defining them.
SYSTEM_CLASSES = (
    PriorityClass(name="system-node-critical", value=2_000_001_000),
    PriorityClass(name="system-cluster-critical", value=2_000_000_000),
)


class UnknownPriorityClass(LookupError):
    """A class name no PriorityClass carries; admission rejects such objects."""

    def __init__(self, name: str) -> None:
        self.class_name = name
        super().__init__(f"no PriorityClass with name {name!r} was found")

    @property
    def message(self) -> str:
        return f'no PriorityClass with name "{self.class_name}" was found'


class PriorityResolver:
    """Looks class names up as the Priority admission plugin does."""

    def __init__(self, classes: Iterable[PriorityClass] = ()) -> None:
        self._classes: dict[str, PriorityClass] = {pc.name: pc for pc in SYSTEM_CLASSES}
        for priority_class in classes:
            self._classes[priority_class.name] = priority_class
        # Several defaults can exist after an API race; admission then takes the lowest value.
        defaults = [pc for pc in self._classes.values() if pc.global_default]
        self._default = min(defaults, key=lambda pc: pc.value, default=None)

    def get(self, name: str) -> PriorityClass | None:
        return self._classes.get(name)

    @property
    def global_default(self) -> PriorityClass | None:
        """The class objects without a class name get."""
        return self._default

    def resolve(self, class_name: str) -> PriorityClass | None:
        """The class an object ends up with: the named one, else the global default, else None.

        Raises UnknownPriorityClass for a name that no class carries.
        """
        if not class_name:
            return self.global_default
        found = self._classes.get(class_name)
        if found is None:
            raise UnknownPriorityClass(class_name)
        return found


def priority_class_from_raw(raw: RawPriorityClass | dict[str, Any]) -> PriorityClass:
    reader = Reader.for_object("PriorityClass", raw, namespaced=False)
    body = reader.raw
    value = reader.integer(body.get("value"), "value", minimum=INT32_MIN)
    if "value" not in body and reader.raw:
        reader.add("value", "is required")
    elif (
        value is not None
        and value > HIGHEST_USER_DEFINABLE_PRIORITY
        and not reader.name.startswith(SYSTEM_PREFIX)
    ):
        reader.add(
            "value",
            f"must be at most {HIGHEST_USER_DEFINABLE_PRIORITY} "
            f"(higher values are reserved for {SYSTEM_PREFIX}* classes), got {value}",
        )
    global_default = reader.boolean(body.get("globalDefault"), "globalDefault")
    policy = reader.choice(
        body.get("preemptionPolicy"),
        "preemptionPolicy",
        PREEMPTION_POLICIES,
        PREEMPT_LOWER_PRIORITY,
    )
    reader.done()
    return PriorityClass(
        name=reader.name,
        value=value or 0,
        global_default=global_default,
        preemption_policy=policy,
    )
