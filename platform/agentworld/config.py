"""The leaf of every stage's configuration: the error a bad value raises, the checks
the configs share, and dotted command-line overrides over a nested config. It imports
nothing from the package, so that every ``<stage>/config.py`` can import it at its top
and ``agentworld.recipes`` can compose them without a cycle."""

from __future__ import annotations

import ast
import dataclasses
import os
from typing import Any


class ConfigError(ValueError):
    """A configuration value or combination is invalid; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


def check_prompt_style(owner: str, style: str, prompts_dir: str | None) -> None:
    """A simulator prompt style (serve, agent, evaluate's closed loop): ``awb`` needs an
    existing prompts directory, ``native`` takes none (it would be ignored)."""
    if style not in ("native", "awb"):
        raise ConfigError(f"{owner}.prompt_style", f"must be 'native' or 'awb', got {style!r}")
    if style == "awb" and not prompts_dir:
        raise ConfigError(
            f"{owner}.prompts_dir", "the awb prompt style needs the reference's prompts folder"
        )
    if style == "native" and prompts_dir is not None:
        raise ConfigError(f"{owner}.prompts_dir", "only the awb prompt style reads prompts")
    if prompts_dir is not None and not os.path.isdir(prompts_dir):
        raise ConfigError(f"{owner}.prompts_dir", f"{prompts_dir!r} is not a directory")


def check_positive(owner: str, **values: float | None) -> None:
    """Raise ConfigError naming ``owner.NAME`` for a value <= 0 (None means unset)."""
    for name, value in values.items():
        if value is not None and value <= 0:
            raise ConfigError(f"{owner}.{name}", f"must be > 0, got {value}")


def check_non_negative(owner: str, **values: float) -> None:
    """Raise ConfigError naming ``owner.NAME`` for a value < 0."""
    for name, value in values.items():
        if value < 0:
            raise ConfigError(f"{owner}.{name}", f"must be >= 0, got {value}")


def check_fraction(field: str, value: float, *, low_open: bool = False) -> None:
    """``value`` in [0, 1), or in (0, 1] with ``low_open``."""
    ok = (0 < value <= 1) if low_open else (0 <= value < 1)
    if not ok:
        interval = "(0, 1]" if low_open else "[0, 1)"
        raise ConfigError(field, f"must be in {interval}, got {value}")


def parse_value(raw: str) -> Any:
    """A command-line value: a Python literal (``3e-4``, ``('a','b')``, ``True``), else
    the string itself."""
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


_TRUE, _FALSE = {"true", "yes", "on"}, {"false", "no", "off"}


def coerce(current: Any, raw: str) -> Any:
    """``raw`` read for a field whose value is now ``current``: a comma-separated list
    for a tuple (``terminal,search``), true/false for a bool, the text itself for a
    string field (a model name ``7`` stays a string), an int as a float for a float."""
    value = parse_value(raw)
    if isinstance(current, bool) and isinstance(value, str) and value.lower() in _TRUE | _FALSE:
        return value.lower() in _TRUE
    if isinstance(current, tuple) and isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(current, tuple) and isinstance(value, list):
        return tuple(value)
    if isinstance(current, str) and not isinstance(value, str):
        return raw
    if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _kind(value: Any) -> type | None:
    """The type an override of a field now holding ``value`` must have (None: any)."""
    for kind in (bool, int, float, str, tuple):  # bool first: it is an int too
        if isinstance(value, kind):
            return kind
    return None


def set_overrides(config: Any, items: list[str], *, owner: str = "") -> Any:
    """A copy of the dataclass ``config`` with dotted ``KEY=VALUE`` items applied
    (``train.learning_rate=3e-4``, ``rl.rollout.engine.replicas=2``); values are read by
    :func:`coerce` and must keep the field's type. All items land together: every
    dataclass on a changed path is rebuilt once, with all of its changes, and so
    validated again (``train.max_steps=4 train.warmup_steps=1`` is valid although 4 alone
    is below the default warm-up). An unknown key or a missing ``=`` raises ConfigError
    naming the full key (prefixed with ``owner`` when given); a later item for the same
    key wins."""
    tree: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        where = f"{owner}.{key}" if owner else key
        if not sep or not key:
            raise ConfigError(where or item, f"override {item!r} is not KEY=VALUE")
        node, *path = [tree, *key.split(".")]
        for name in path[:-1]:
            node = node.setdefault(name, {})
            if not isinstance(node, dict):
                raise ConfigError(where, f"{item!r} sets a field inside a value set earlier")
        if isinstance(node.get(path[-1]), dict):
            raise ConfigError(where, f"{item!r} replaces a section whose fields are set")
        node[path[-1]] = (raw, item)
    return _apply(config, tree, owner=owner)


def _apply(obj: Any, tree: dict[str, Any], *, owner: str) -> Any:
    changes = {}
    for name, sub in tree.items():
        where = f"{owner}.{name}" if owner else name
        if not dataclasses.is_dataclass(obj) or name not in {
            f.name for f in dataclasses.fields(obj)
        }:
            raise ConfigError(where, f"unknown field in override {_first_item(sub)!r}")
        current = getattr(obj, name)
        if isinstance(sub, dict):
            if not dataclasses.is_dataclass(current):
                raise ConfigError(where, f"is not a section; cannot set {_first_item(sub)!r}")
            changes[name] = _apply(current, sub, owner=where)
            continue
        raw, _ = sub
        if dataclasses.is_dataclass(current):
            raise ConfigError(where, f"is a section: set its fields ({where}.FIELD=VALUE)")
        value, kind = coerce(current, raw), _kind(current)
        if kind is not None and _kind(value) is not kind:
            raise ConfigError(where, f"expects {kind.__name__}, got {raw!r}")
        changes[name] = value
    try:
        return dataclasses.replace(obj, **changes)
    except ConfigError as e:
        raise _under(e, owner) from None


def _first_item(sub: Any) -> str:
    """The override text behind a node of the tree (its first leaf)."""
    while isinstance(sub, dict):
        sub = next(iter(sub.values()))
    return sub[1]


def _under(error: ConfigError, owner: str) -> ConfigError:
    """``error`` of the section at ``owner`` (``rl.rollout.engine``), its field named
    from the top: a nested section names its fields from itself (``engine.replicas``)."""
    parent, _, section = owner.rpartition(".")
    if parent and error.field.split(".")[0] == section:
        message = str(error).removeprefix(f"{error.field}: ")
        return ConfigError(f"{parent}.{error.field}", message)
    return error
