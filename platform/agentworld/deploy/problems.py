"""What a check found: a field of a resource and what is wrong with it."""

from __future__ import annotations

import dataclasses
import re

FieldPath = tuple[str | int, ...]
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One finding. ``field`` is a dotted path (``spec.workerGroupSpecs[0].replicas``);
    ``where`` names the overlay and resource (or file) it was found in."""

    field: str
    message: str
    where: str = ""

    def located(self, where: str) -> Problem:
        return dataclasses.replace(self, where=where)

    def __str__(self) -> str:
        head = f"{self.where}: " if self.where else ""
        return f"{head}{self.field}: {self.message}" if self.field else f"{head}{self.message}"


def format_path(path: FieldPath) -> str:
    """``("spec", "groups", 0, "nvidia.com/gpu")`` -> ``spec.groups[0][nvidia.com/gpu]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part}]"
    return out
