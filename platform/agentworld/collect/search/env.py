"""search: BM25 (bm25s) over a real corpus that ships with Python: the documentation
strings of standard-library modules, their classes and functions.

Actions are ``search(query, k)`` and ``open(doc_id)``; observations are the ranked
result lists and the documents, as a search tool shows them.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import os
import random
import subprocess
import sys
import time
import warnings
from dataclasses import asdict, dataclass

import bm25s

import agentworld
from agentworld.collect.env import Action, Environment, Task, parse_tool_call
from agentworld.collect.variety import Variety
from agentworld.schema import Turn

CORPUS_MODULES = (
    "argparse base64 bisect calendar collections contextlib copy csv dataclasses datetime "
    "decimal difflib enum fnmatch fractions functools glob gzip hashlib heapq html "
    "itertools json logging math operator os.path pathlib pprint random re secrets shlex "
    "shutil statistics string struct tarfile tempfile textwrap typing urllib.parse uuid zipfile"
).split()
_SNIPPET = 160


@dataclass(frozen=True, kw_only=True)
class Doc:
    id: str
    """Qualified name, e.g. json.loads."""
    kind: str
    text: str


def _members(module) -> list[tuple[str, object]]:
    out = []
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
            out.append((name, obj))
    return out


def _kind(obj: object) -> str:
    return "class" if inspect.isclass(obj) else "function"


@functools.cache
def load_corpus() -> tuple[Doc, ...]:
    """Modules, their public classes/functions and class methods with a docstring, in a
    fixed order. Built in a fresh interpreter: what a module exposes depends on which of
    its parts this process has already imported, and two workers that imported different
    things would otherwise index different corpora (and answer the same seed differently)."""

    code = "import json, agentworld.collect.search.env as s; print(json.dumps(s.build_corpus()))"
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(agentworld.__file__)))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return tuple(Doc(**d) for d in json.loads(out.stdout))


def build_corpus() -> list[dict[str, str]]:
    """The corpus as built by this process (see load_corpus), as plain dicts."""

    docs: list[Doc] = []
    for modname in CORPUS_MODULES:
        with warnings.catch_warnings():  # typing.io and friends warn when touched
            warnings.simplefilter("ignore", DeprecationWarning)
            docs.extend(_module_docs(modname))
    return [asdict(d) for d in docs]


def _module_docs(modname: str) -> list[Doc]:
    docs: list[Doc] = []
    module = importlib.import_module(modname)
    if inspect.getdoc(module):
        docs.append(Doc(id=modname, kind="module", text=inspect.getdoc(module)))
    for name, obj in _members(module):
        doc = inspect.getdoc(obj)
        if doc:
            docs.append(Doc(id=f"{modname}.{name}", kind=_kind(obj), text=doc))
        if inspect.isclass(obj):
            docs.extend(_methods(modname, name, obj))
    return docs


def _methods(modname: str, cls_name: str, cls: type) -> list[Doc]:
    out = []
    for name, member in sorted(vars(cls).items()):
        if name.startswith("_") or not callable(member):
            continue
        doc = inspect.getdoc(member)
        if doc:
            out.append(Doc(id=f"{modname}.{cls_name}.{name}", kind="method", text=doc))
    return out


class SearchIndex:
    """A bm25s index over the corpus (built once per process)."""

    def __init__(self, docs: tuple[Doc, ...]) -> None:
        self.docs = docs
        self.by_id = {d.id: d for d in docs}
        texts = [f"{d.id.replace('.', ' ')} {d.text}" for d in docs]
        self.retriever = bm25s.BM25()
        self.retriever.index(
            bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False
        )

    def search(
        self, query: str, k: int, allowed: frozenset[str] | None = None
    ) -> list[tuple[Doc, float]]:
        """The k best documents; with ``allowed``, among those documents only (an
        episode's subset of the corpus: one index serves every subset)."""

        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.vocab:
            return []
        k = max(1, min(int(k), len(self.docs)))
        depth = len(self.docs) if allowed is not None else k
        ids, scores = self.retriever.retrieve(tokens, k=depth, show_progress=False)
        hits = [
            (self.docs[int(i)], float(s)) for i, s in zip(ids[0], scores[0], strict=True) if s > 0
        ]
        if allowed is not None:
            hits = [(d, s) for d, s in hits if d.id in allowed]
        return hits[:k]


def module_of(doc_id: str) -> str:
    """The corpus module a document belongs to (``os.path.join`` -> ``os.path``)."""
    return max((m for m in CORPUS_MODULES if doc_id == m or doc_id.startswith(m + ".")), key=len)


def corpus_subset(docs: tuple[Doc, ...], share: float, key: str, keep: str = "") -> frozenset[str]:
    """Ids of the documents of a ``share`` of the modules, drawn with ``key``; the
    module of document ``keep`` is always in."""

    rng = random.Random(f"search-subset:{key}")
    n = max(1, round(share * len(CORPUS_MODULES)))
    modules = set(rng.sample(CORPUS_MODULES, n))
    if keep:
        modules.add(module_of(keep))
    return frozenset(d.id for d in docs if module_of(d.id) in modules)


@functools.cache
def get_index() -> SearchIndex:
    return SearchIndex(load_corpus())


def format_results(query: str, hits: list[tuple[Doc, float]], total: int) -> str:
    if not hits:
        return f'No results for "{query}".'
    lines = [f'Results for "{query}" ({len(hits)} shown, {total} documents searched):']
    for rank, (doc, score) in enumerate(hits, 1):
        first = " ".join(doc.text.split())
        snippet = first if len(first) <= _SNIPPET else first[: _SNIPPET - 3] + "..."
        lines.append(f"{rank}. {doc.id} ({doc.kind}) score={score:.2f}\n   {snippet}")
    return "\n".join(lines)


def format_document(doc: Doc) -> str:
    return f"{doc.id} ({doc.kind})\n\n{doc.text}"


class SearchEnvironment(Environment):
    domain = "search"
    source = "collect/search"

    def reset(self, task: Task) -> str:
        self.index = get_index()
        v = Variety.of(task.state)
        self.allowed = None
        n_docs = len(self.index.docs)
        if v.search_share < 1:
            key = f"{v.user}@{v.host}:{v.timezone}:{v.search_share}"
            self.allowed = corpus_subset(
                self.index.docs, v.search_share, key, task.state.get("target", "")
            )
            n_docs = len(self.allowed)
        self.n_docs = n_docs
        version = ".".join(map(str, sys.version_info[:3]))
        return (
            f"A search engine over the documentation of the Python {version} standard "
            f"library ({n_docs} documents: modules, classes, functions, "
            "methods), ranked with BM25. Tools:\n"
            '{"name": "search", "arguments": {"query": "string", "k": "integer (default 5)"}}\n'
            '{"name": "open", "arguments": {"doc_id": "string (an id from the results)"}}\n'
            f"Task: {task.text}"
        )

    def step(self, action: Action) -> Turn:
        t0 = time.monotonic()
        call = action.tool_call
        error = False
        if call is not None and call.name == "search":
            query = str(call.arguments.get("query", ""))
            hits = self.index.search(query, call.arguments.get("k", 5), self.allowed)
            obs = format_results(query, hits, self.n_docs)
        elif call is not None and call.name == "open":
            doc_id = str(call.arguments.get("doc_id", ""))
            visible = self.allowed is None or doc_id in self.allowed
            doc = self.index.by_id.get(doc_id) if visible else None
            error = doc is None
            obs = (
                format_document(doc)
                if doc
                else f"No document with id {call.arguments.get('doc_id')!r}."
            )
        else:
            error = True
            obs = "Error: unknown action; use search or open."
        obs = _cap(obs, self.config.output_cap_bytes)
        return Turn(
            action=action.text,
            observation=obs,
            tool_call=call,
            duration_s=round(time.monotonic() - t0, 4),
            metadata={"is_error": True} if error else {},
        )

    def parse_agent_action(self, text: str) -> Action:
        return parse_tool_call(text)


def _cap(text: str, cap: int) -> str:
    data = text.encode()
    if len(data) <= cap:
        return text
    return (
        data[:cap].decode("utf-8", errors="ignore")
        + f"\n[truncated: {len(data) - cap} bytes omitted]"
    )
