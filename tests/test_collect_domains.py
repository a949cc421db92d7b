"""The collect registry: one row per domain folder, each row's environment and playbooks
load, and the config's domain type names the same domains."""

from __future__ import annotations

import pathlib
import typing

import pytest

import agentworld.collect
from agentworld.collect.config import RECORDED_DOMAINS, CollectDomain
from agentworld.collect.domains import DOMAINS, lookup
from agentworld.collect.env import Environment


def test_every_domain_folder_has_one_row_and_the_config_names_them():
    root = pathlib.Path(agentworld.collect.__file__).parent
    folders = {p.parent.name for p in root.glob("*/env.py")}
    assert folders == set(DOMAINS)
    assert typing.get_args(CollectDomain) == tuple(DOMAINS) == RECORDED_DOMAINS


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_a_row_loads_its_environment_and_playbooks(name):
    row = lookup(name)
    env = row.environment_class()
    assert issubclass(env, Environment) and env.domain == name
    assert row.playbook_table() and all(callable(f) for f in row.playbook_table().values())
    assert row.instruction.startswith("Reply with exactly one")


def test_an_unknown_domain_has_no_row():
    with pytest.raises(ValueError, match="no recorder for domain 'android'"):
        lookup("android")
