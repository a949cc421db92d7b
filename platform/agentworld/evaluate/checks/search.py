"""Search state checks, against the environment's corpus (the standard-library
documentation that ``agentworld.collect.search`` indexes):

- ``ids_exist``: every result id the predicted page shows (and an opened document's id)
  is a document of the corpus: no made-up results;
- ``result_count``: as many results as the real page shows;
- ``empty_agrees``: an empty result exactly where the real search found nothing.
"""

from __future__ import annotations

import functools
import re

_RESULT = re.compile(r"^\s*\d+\.\s+(\S+)\s+\((?:module|class|function|method)\)", re.M)
_OPENED = re.compile(r"\A(\S+) \((?:module|class|function|method)\)\n")
_EMPTY = re.compile(r"^No results for ", re.M)
_PAGE = re.compile(r"^Results for .*\(\d+ shown", re.M)


@functools.cache
def corpus_ids() -> frozenset[str]:
    """Ids of the corpus's documents (built once per process)."""
    # not at the top: the search environment imports bm25s and numba (seconds), which
    # scoring needs only once a search page is checked
    from agentworld.collect.search.env import load_corpus

    return frozenset(d.id for d in load_corpus())


def result_ids(text: str) -> list[str]:
    """Ids of the results a page lists, or of the document it opens."""
    opened = _OPENED.match(text.strip() + "\n")
    return _RESULT.findall(text) or ([opened.group(1)] if opened else [])


def result_page(text: str) -> int | None:
    """How many results a search page shows (0 for "No results"), or None when the text
    is not a search page (an opened document, an error)."""
    if _EMPTY.search(text):
        return 0
    if _PAGE.search(text) or _RESULT.search(text):
        return len(_RESULT.findall(text))
    return None


def ids_exist(predicted: str, real: str, *, corpus: frozenset[str] | None = None) -> bool | None:
    """Every id the prediction shows is in ``corpus`` (default: the search
    environment's); None when the prediction shows none, or when the real page's own ids
    are not the corpus's (another search engine's recording)."""
    corpus = corpus_ids() if corpus is None else corpus
    shown = result_ids(predicted)
    if not shown or not set(result_ids(real)) <= corpus:
        return None
    return set(shown) <= corpus


def result_count(predicted: str, real: str) -> bool | None:
    """As many results as the real page; None when the real text is not a result page."""
    want = result_page(real)
    if want is None:
        return None
    return result_page(predicted) == want


def empty_agrees(predicted: str, real: str) -> bool | None:
    """Empty exactly where the real search found nothing; None off result pages."""
    want = result_page(real)
    if want is None:
        return None
    got = result_page(predicted)
    return got == 0 if want == 0 else bool(got)
