"""A RayCronJob's ``schedule`` and ``timeZone``, read as KubeRay reads them.

KubeRay parses the schedule with robfig/cron's standard parser (``cron.ParseStandard``,
v3): five fields (minute, hour, day of month, month, day of week) or a descriptor
(``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight``,
``@hourly``, ``@every <Go duration>``). A field is a comma-separated list of ``*`` or
``?``, ``N``, ``N-M``, each with an optional ``/STEP`` (``N/STEP`` runs from N to the
field's maximum); months and weekdays may be named (``jan``, ``mon``, any case); the
day of week runs 0-6 (Sunday 0, no 7). When both day fields are restricted, a day
matches either of them; when one is ``*`` or ``?``, it must match both. KubeRay refuses
a schedule holding ``TZ`` (the time zone goes in ``timeZone``, an IANA name).

One rule is ours: a schedule that can never fire (``0 0 30 2 *``) is refused; KubeRay
would accept it and never run the job.
"""

from __future__ import annotations

import calendar
import dataclasses
import re
import zoneinfo
from typing import Any

from agentworld.deploy.problems import FieldPath, Problem, format_path

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_WEEKDAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}


@dataclasses.dataclass(frozen=True)
class _Bounds:
    name: str
    lo: int
    hi: int
    names: dict[str, int] | None = None


FIELDS = (
    _Bounds("minute", 0, 59),
    _Bounds("hour", 0, 23),
    _Bounds("day of month", 1, 31),
    _Bounds("month", 1, 12, _MONTHS),
    _Bounds("day of week", 0, 6, _WEEKDAYS),
)
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_GO_DURATION = re.compile(r"[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)")
_INT = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi accepts


class CronError(ValueError):
    """The schedule is not one KubeRay parses; the message says where and why."""


@dataclasses.dataclass(frozen=True)
class Field:
    """The values a field matches, and whether it was written as ``*`` or ``?``."""

    values: frozenset[int]
    star: bool


def parse_schedule(spec: str) -> tuple[Field, ...] | None:
    """The five fields of ``spec`` (None for ``@every``, which fires at an interval);
    raises CronError as ``cron.ParseStandard`` would refuse it."""
    if not spec:
        raise CronError("is empty")
    if spec.startswith("@"):
        if spec.startswith("@every "):
            if not _GO_DURATION.fullmatch(spec.removeprefix("@every ")):
                raise CronError(f"{spec!r}: not a Go duration (e.g. @every 1h30m)")
            return None
        if spec not in DESCRIPTORS:
            raise CronError(f"unrecognized descriptor {spec!r} (known: {', '.join(DESCRIPTORS)})")
        spec = DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != len(FIELDS):
        raise CronError(
            f"expected exactly 5 fields (minute hour day-of-month month day-of-week), "
            f"found {len(fields)}: {spec!r}"
        )
    return tuple(_parse_field(text, bounds) for text, bounds in zip(fields, FIELDS, strict=True))


def _parse_field(text: str, bounds: _Bounds) -> Field:
    values: set[int] = set()
    star = False
    for expr in filter(None, text.split(",")):  # robfig skips empty list items
        found, is_star = _parse_range(expr, bounds)
        values |= found
        star = star or is_star
    return Field(frozenset(values), star)


def _parse_range(expr: str, bounds: _Bounds) -> tuple[set[int], bool]:
    where = f"{bounds.name} {expr!r}"
    range_, *steps = expr.split("/")
    low_high = range_.split("-")
    star = low_high[0] in ("*", "?")
    if star:
        start, end = bounds.lo, bounds.hi  # whatever follows a '-' here is ignored, as in robfig
    elif len(low_high) > 2:
        raise CronError(f"{where}: too many hyphens")
    else:
        start = _number(low_high[0], bounds, where)
        end = _number(low_high[1], bounds, where) if len(low_high) == 2 else start
    step = 1
    if len(steps) > 1:
        raise CronError(f"{where}: too many slashes")
    if steps:
        step = _number(steps[0], None, where)
        if len(low_high) == 1:
            end = bounds.hi  # "N/STEP" means "N-max/STEP"
        star = star and step <= 1
    if start < bounds.lo:
        raise CronError(f"{where}: {start} is below the minimum {bounds.lo}")
    if end > bounds.hi:
        raise CronError(f"{where}: {end} is above the maximum {bounds.hi}")
    if start > end:
        raise CronError(f"{where}: the range starts after its end")
    if step == 0:
        raise CronError(f"{where}: the step must be a positive number")
    return set(range(start, end + 1, step)), star


def _number(text: str, bounds: _Bounds | None, where: str) -> int:
    if bounds is not None and bounds.names and text.lower() in bounds.names:
        return bounds.names[text.lower()]
    if not _INT.fullmatch(text):
        raise CronError(f"{where}: {text!r} is not a number")
    if int(text) < 0:
        raise CronError(f"{where}: negative number {text}")
    return int(text)


def can_fire(fields: tuple[Field, ...]) -> bool:
    """Whether some minute of some date matches: a day-of-month that exists in one of the
    months (29 February counts), or any weekday when the two day fields are ORed."""
    minute, hour, dom, month, dow = fields
    if not (minute.values and hour.values and month.values):
        return False
    dates = any(d <= calendar.monthrange(2024, m)[1] for m in month.values for d in dom.values)
    if dom.star or dow.star:
        return dates and bool(dow.values)
    return dates or bool(dow.values)


def check_schedule(spec: dict[str, Any], path: FieldPath) -> list[Problem]:
    """Problems of a RayCronJob spec's ``schedule`` and ``timeZone``."""
    problems = []
    schedule = spec.get("schedule", "")
    field = format_path((*path, "schedule"))
    if "TZ" in schedule:
        problems.append(Problem(field, "may not hold TZ= or CRON_TZ=; set timeZone instead"))
    else:
        try:
            fields = parse_schedule(schedule)
        except CronError as e:
            problems.append(Problem(field, f"not a cron schedule KubeRay accepts: {e}"))
        else:
            if fields is not None and not can_fire(fields):
                problems.append(Problem(field, f"{schedule!r} never fires"))
    if "timeZone" in spec:
        problems += _time_zone_problems(spec["timeZone"], format_path((*path, "timeZone")))
    return problems


def _time_zone_problems(name: str, field: str) -> list[Problem]:
    if name == "Local":  # Go's name for the operator's own zone
        return []
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return [Problem(field, f"{name!r} is not an IANA time zone (e.g. Etc/UTC, Europe/Paris)")]
    return []
