"""Our judge instructions: a general rubric plus, per domain, which content of an
observation is fixed by the session (must match the real observation), which is
pre-existing environment content (judged on plausibility) and which is runtime
metadata (judged on format only).
"""

from __future__ import annotations

from dataclasses import dataclass

DIMENSIONS = ("format", "factuality", "consistency", "realism", "quality")


@dataclass(frozen=True, kw_only=True)
class DomainRubric:
    fixed: str
    """Content determined by the session so far or by the action: must match."""
    preexisting: str
    """Content that existed before the session and is not visible in it: plausibility."""
    metadata: str
    """Values that differ between runs of the same actions: format only."""


GENERIC = DomainRubric(
    fixed="anything the action itself or earlier turns determine: echoed arguments, "
    "values created or changed earlier in the session, success or failure that follows "
    "from visible state",
    preexisting="content that existed before the session began and that no earlier turn showed",
    metadata="timestamps, durations, process or request ids, random ids, hashes, sizes",
)

RUBRICS: dict[str, DomainRubric] = {
    "terminal": DomainRubric(
        fixed="output of commands on files and state created or shown earlier in the "
        "session (contents written, line counts, directory listings after mkdir/touch), "
        "echoed text, error messages for missing files or bad syntax, the prompt line",
        preexisting="files, packages and system contents not shown before (e.g. the "
        "first listing of a directory, /etc files, installed versions)",
        metadata="dates, times, PIDs, uptimes, inode numbers, file sizes and permissions "
        "not set by the session, temporary names",
    ),
    "mcp": DomainRubric(
        fixed="the tool's result structure (JSON keys, result/error shape), values "
        "echoed from the call's arguments, data the same server returned earlier, the "
        "error for an unknown tool or invalid argument",
        preexisting="records, documents and resources held by the server that no earlier "
        "call returned",
        metadata="current times, generated ids, cursors, request ids, latencies",
    ),
    "search": DomainRubric(
        fixed="the query echoed back, the result-list layout, documents already opened "
        "earlier in the session, the absence of results the context rules out",
        preexisting="which pages are found, their titles, snippets and contents",
        metadata="result counts, ranks' scores, retrieval times, URLs' tracking parameters",
    ),
    "swe": DomainRubric(
        fixed="file contents viewed or edited earlier, results of edits just made, test "
        "outcomes that follow from visible code, line numbers of visible code",
        preexisting="repository files and code not opened before, test names, tool versions",
        metadata="commit hashes, run times, temporary paths, memory addresses",
    ),
    "android": DomainRubric(
        fixed="UI changes caused by the action (screen reached, text typed into a field, "
        "toggles switched), elements shown earlier that should still be there",
        preexisting="layout and contents of screens not seen before, app data",
        metadata="status-bar time, battery level, notification counts, element ids and bounds",
    ),
    "web": DomainRubric(
        fixed="the page the action leads to: its URL and title, the rows a filter, sort, "
        "facet or search leaves, values typed into fields, the application's validation "
        "messages, the browser's error text for a failed action (no such element, "
        "refused address), elements shown earlier that should persist with the same "
        "[bid] ids, and what scrolling brings on screen",
        preexisting="contents of pages not seen before: table rows, records, tickets, "
        "links, facet counts",
        metadata="query timings, page heights, [bid] ids of a page not seen before, "
        "session tokens, timestamps",
    ),
    "os": DomainRubric(
        fixed="windows opened or closed by the action, typed text, focus changes, files "
        "created earlier in the session",
        preexisting="desktop contents, installed applications, documents not opened before",
        metadata="clock, window handles, coordinates, process ids",
    ),
}

GENERAL_INSTRUCTIONS = """\
You judge a language world model: a model that plays an environment. It saw the \
environment description, the interaction so far and the agent's latest action, and \
predicted the environment's next observation. You see the real observation, recorded \
from the real environment, and the predicted one.

Sort the content of the real observation into three kinds and judge each accordingly:
1. Fixed by the session (must match): {fixed}. Any difference here is a factual error.
2. Pre-existing environment content (plausibility): {preexisting}. The prediction need \
not reproduce it word for word; judge whether it is plausible and consistent with \
everything visible.
3. Runtime metadata (format only): {metadata}. Judge only that the values have the \
right form.

Score each dimension with an integer from 1 (bad) to 5 (excellent):
- format: the structure and syntax of this environment's real outputs
- factuality: content fixed by the session is correct
- consistency: no contradiction with the environment description, the earlier turns \
or the action
- realism: reads like a real output of this environment, including pre-existing \
content and metadata
- quality: overall, how well the prediction serves as this step's observation for an \
agent

Answer exactly in this form and nothing after it:
<strengths>what the prediction gets right</strengths>
<weaknesses>what it gets wrong</weaknesses>
<scores>{{"format": N, "factuality": N, "consistency": N, "realism": N, "quality": N}}</scores>"""


def rubric_for(domain: str) -> DomainRubric:
    """The domain's rubric; custom domains get the generic one."""
    return RUBRICS.get(domain.strip().lower().rsplit("/", 1)[-1], GENERIC)


def judge_instructions(domain: str) -> str:
    """The judge's system message for ``domain``."""
    r = rubric_for(domain)
    return GENERAL_INSTRUCTIONS.format(
        fixed=r.fixed, preexisting=r.preexisting, metadata=r.metadata
    )
