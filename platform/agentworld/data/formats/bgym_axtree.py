"""BrowserGym's accessibility tree in the web collector's text.

BrowserGym steps hold the tree either as Chrome's node list (``axtree_object``, each
node with its ``browsergym_id``) or already flattened (``axtree_txt``: one node a line,
tab-indented, ``[bid] role 'name', prop='value', flag``). Both are turned into the node
list the collector renders (agentworld.collect.web.axtree.render_axtree: ``[bid] role
"name"`` with states, indented, wrappers and repeated text compacted), so that an
ingested page reads like a recorded one.

The flattened names and values are Python string literals (BrowserGym writes them with
``repr``); they are read with ``ast.literal_eval``, which parses literals only.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from agentworld.collect.web.axtree import render_axtree

_LINE = re.compile(r"^(\t*)(?:\[([^\]]*)\] )?(\S+)")
_KEY = re.compile(r", (\w+)(=)?")


def render_object(axtree: dict[str, Any]) -> tuple[str, str, str]:
    """(title, url, tree text) of an ``axtree_object`` (CDP nodes with browsergym_id)."""
    nodes = axtree.get("nodes") or []
    bids = {
        n.get("backendDOMNodeId"): str(n["browsergym_id"])
        for n in nodes
        if n.get("browsergym_id") is not None
    }
    root = nodes[0] if nodes else {}
    title = str((root.get("name") or {}).get("value") or "")
    return title, "", render_axtree(nodes, bids)


def render_text(axtree_txt: str) -> tuple[str, str, str]:
    """(title, url, tree text) of a flattened ``axtree_txt``."""
    nodes, bids = parse_text(axtree_txt)
    if not nodes:
        return "", "", ""
    root = nodes[0]
    props = {p["name"]: p["value"]["value"] for p in root["properties"]}
    return root["name"]["value"], str(props.get("url") or ""), render_axtree(nodes, bids)


def parse_text(text: str) -> tuple[list[dict[str, Any]], dict[int, str]]:
    """CDP-like nodes (nodeId, role, name, properties, value, childIds, backendDOMNodeId)
    and their bids, from the flattened tree. A line that does not parse is kept as a
    static text of its own, so that nothing the page said is lost."""
    nodes: list[dict[str, Any]] = [
        {
            "nodeId": "root",
            "role": {"value": "RootWebArea"},
            "name": {"value": ""},
            "childIds": [],
            "properties": [],
        }
    ]
    bids: dict[int, str] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, nodes[0])]
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip("\t"))
        node, bid = _node(i, line)
        if bid is not None:
            bids[i] = bid
        if i == 0 and depth == 0 and node["role"]["value"] == "RootWebArea":
            nodes[0].update(name=node["name"], properties=node["properties"])
            continue
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parent = stack[-1][1] if stack else nodes[0]
        parent["childIds"].append(node["nodeId"])
        nodes.append(node)
        stack.append((depth, node))
    return nodes, bids


def _node(i: int, line: str) -> tuple[dict[str, Any], str | None]:
    node: dict[str, Any] = {
        "nodeId": str(i),
        "backendDOMNodeId": i,
        "childIds": [],
        "properties": [],
    }
    match = _LINE.match(line)
    if match is None:
        node.update(role={"value": "StaticText"}, name={"value": line.strip()})
        return node, None
    bid, role = match.group(2), match.group(3).rstrip(",")
    rest = line[match.end() :]
    name, rest = (
        _literal_at(rest.lstrip(" "))
        if rest.startswith(" '") or rest.startswith(' "')
        else ("", rest)
    )
    node.update(role={"value": role}, name={"value": name})
    for key, value in _props(rest):
        if key == "value":
            node["value"] = {"value": value}
        else:
            node["properties"].append({"name": key, "value": {"value": value}})
    return node, bid


def _props(rest: str) -> list[tuple[str, Any]]:
    out, pos = [], 0
    while True:
        match = _KEY.match(rest, pos)
        if match is None:
            return out
        key, pos = match.group(1), match.end()
        if match.group(2) is None:
            out.append((key, True))
            continue
        if rest[pos : pos + 1] in ("'", '"'):
            value, tail = _literal_at(rest[pos:])
            pos = len(rest) - len(tail)
        else:
            end = rest.find(", ", pos)
            end = len(rest) if end < 0 else end
            value, pos = _bare(rest[pos:end]), end
        out.append((key, value))


def _literal_at(text: str) -> tuple[str, str]:
    """The Python string literal at the start of ``text`` and what follows it."""
    quote, k = text[0], 1
    while k < len(text) and text[k] != quote:
        k += 2 if text[k] == "\\" else 1
    literal = text[: k + 1]
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        value = literal[1:-1]
    return str(value), text[k + 1 :]


def _bare(token: str) -> Any:
    if token in ("True", "False"):
        return token == "True"
    try:
        return int(token)
    except ValueError:
        return token
