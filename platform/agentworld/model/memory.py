"""The world model's memory of what the real environments answered.

A model cannot know what a search engine returns for a query it never saw, nor the
exact text of a tool result it met once: that is lookup, not generalization, and the
``retrieval`` baseline does it better than a small model's weights. So the model is
given the lookup. Its memory holds, for each turn of the training split, what the
retrieval baseline matches on (environment text and action) and the observation that
followed. Each prompt's action carries the observation of its best match (BM25), from
another trajectory:

    <action>

    <memory>
    <the observation recorded after the most similar environment and action>
    </memory>

The model learns when to copy it and when to depart from it (another directory, another
query, a changed file).

Where it lives: prepare writes ``memory.parquet`` into the run's ``tokenizer/`` and
writes each SFT sample's prompt with its memory. From there it travels with the
tokenizer: ``agentworld.model.load_tokenizer`` reads it and ``save_pretrained`` writes it
beside the tokenizer, so every checkpoint trained on that data carries it, and evaluate,
RL and serve add the memory to each prompt they render for such a model
(``with_memory``; a prompt that already carries one is left as it is). A model without
the file is prompted as before.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

Message = dict[str, str]
FILE = "memory.parquet"
OPEN, CLOSE = "\n\n<memory>\n", "\n</memory>"
MAX_CHARS = 2000
"""A remembered observation is cut to this many characters (the prompt must leave room
for the observation the model writes)."""


def match_text(system: str, action: str) -> str:
    """What a turn is matched on: its (compacted) environment text and its action."""
    return f"{system}\n{action}"


def query_text(messages: Sequence[Message]) -> str:
    """``match_text`` of a prompt: its system text and its action, without any memory
    already added."""
    if not messages:
        return ""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    return match_text(system, split_memory(messages[-1]["content"])[0])


def split_memory(content: str) -> tuple[str, str | None]:
    """(action, remembered observation or None) of a user message."""
    at = content.rfind(OPEN)
    if at < 0 or not content.endswith(CLOSE):
        return content, None
    return content[:at], content[at + len(OPEN) : -len(CLOSE)]


def without_memory(messages: Sequence[Message]) -> list[Message]:
    """The messages as the session has them: any memory attached to an action removed
    (what rewards and judges read as the context; the memory is the model's input,
    not part of the session)."""
    return [
        {**m, "content": split_memory(m["content"])[0]} if m["role"] == "user" else dict(m)
        for m in messages
    ]


def attach(action: str, observation: str) -> str:
    return f"{action}{OPEN}{observation[:MAX_CHARS]}{CLOSE}"


def _tokens(texts: list[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(texts, stopwords=None, show_progress=False, return_ids=False)


@dataclass(frozen=True)
class Entry:
    query: str
    observation: str
    trajectory: str
    """Id of the trajectory the turn comes from (a prompt never gets its own)."""

    FIELDS = ("query", "observation", "trajectory")


class ObservationMemory:
    """A BM25 index over entries' queries; looks up the observation of the best match."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        import bm25s

        self.entries = list(entries)
        # Matches looked at per query: one more than any trajectory's turns, so that the
        # best match from another trajectory is always among them.
        per_trajectory = Counter(e.trajectory for e in self.entries)
        self._k = min(len(self.entries), max(per_trajectory.values(), default=0) + 1)
        self._retriever = bm25s.BM25() if self.entries else None
        if self._retriever is not None:
            corpus = _tokens([e.query for e in self.entries])
            self._retriever.index(corpus, show_progress=False)

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(
        self, contexts: Sequence[Sequence[Message]], exclude: Sequence[str | None] | None = None
    ) -> list[str | None]:
        """Per context, the observation of its best match (from another trajectory than
        ``exclude[i]``), or None when no word of the query is in the memory."""
        return self.lookup_texts([query_text(m) for m in contexts], exclude)

    def lookup_texts(
        self, texts: Sequence[str], exclude: Sequence[str | None] | None = None
    ) -> list[str | None]:
        """``lookup`` of queries already written as ``match_text``."""
        if self._retriever is None or not texts:
            return [None for _ in texts]
        k = self._k if exclude else 1
        ids, scores = self._retriever.retrieve(_tokens(list(texts)), k=k, show_progress=False)
        exclude = exclude or [None] * len(texts)
        out: list[str | None] = []
        for row_ids, row_scores, own in zip(ids, scores, exclude, strict=True):
            found = None
            for i, s in zip(row_ids, row_scores, strict=True):
                entry = self.entries[int(i)]
                if s > 0 and entry.trajectory != own:
                    found = entry.observation
                    break
            out.append(found)
        return out

    def with_memory(
        self, contexts: Sequence[list[Message]], exclude: Sequence[str | None] | None = None
    ) -> list[list[Message]]:
        """The contexts with their action's memory attached (those that carry one
        already, or have no match, unchanged)."""
        todo = [i for i, m in enumerate(contexts) if split_memory(m[-1]["content"])[1] is None]
        found = self.lookup(
            [contexts[i] for i in todo], [exclude[i] for i in todo] if exclude else None
        )
        out = list(contexts)
        for i, observation in zip(todo, found, strict=True):
            if observation is not None:
                last = out[i][-1]
                out[i] = [*out[i][:-1], {**last, "content": attach(last["content"], observation)}]
        return out

    # -- the file ------------------------------------------------------------------------

    def to_parquet(self) -> bytes:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table({n: [getattr(e, n) for e in self.entries] for n in Entry.FIELDS})
        buf = io.BytesIO()
        pq.write_table(table, buf)
        return buf.getvalue()

    @classmethod
    def from_parquet(cls, data: bytes) -> ObservationMemory:
        import pyarrow.parquet as pq

        # Without threads, as agentworld.io.read_parquet (a threaded read can abort the
        # process at exit).
        table = pq.read_table(io.BytesIO(data), use_threads=False)
        cols = [table.column(n).to_pylist() for n in Entry.FIELDS]
        return cls([Entry(*row) for row in zip(*cols, strict=True)])


def memory_of(tokenizer) -> ObservationMemory | None:
    """The memory a tokenizer from ``agentworld.model.load_tokenizer`` carries, or None."""
    data = getattr(tokenizer, "agentworld_memory", None)
    return None if data is None else ObservationMemory.from_parquet(data)


def read_memory(model_dir: str, **storage_options) -> ObservationMemory | None:
    """The memory saved in a model or tokenizer directory (any URL), or None."""
    from agentworld.io import exists, join, read_bytes

    url = join(model_dir, FILE)
    if not exists(url, **storage_options):
        return None
    return ObservationMemory.from_parquet(read_bytes(url, **storage_options))
