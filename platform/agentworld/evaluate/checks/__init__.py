"""Judge-free state and structure checks per domain: does a predicted observation get
right what the real one shows about the environment's state (an error, a prompt, a
test count, a result that exists)? Each check is a plain function
``check(predicted, real) -> bool | None`` (None: it does not apply to this pair), in
one module per domain; ``CHECKS`` lists them by domain and ``run_checks`` runs a
domain's on one pair. Their pass rates are columns of the fidelity table, for the model
and for the baselines alike (``agentworld.evaluate.score``).
"""

from __future__ import annotations

from collections.abc import Callable

from agentworld.evaluate.checks import desktop, mcp, search, swe, terminal, ui, web

Check = Callable[[str, str], bool | None]

CHECKS: dict[str, dict[str, Check]] = {
    "terminal": {
        "prompt_end": terminal.prompt_end,
        "error_agrees": terminal.error_agrees,
        "line_count": terminal.line_count,
    },
    "mcp": {
        "json_parses": mcp.json_parses,
        "json_shape": mcp.json_shape,
        "error_agrees": mcp.error_agrees,
    },
    "swe": {"test_summary": swe.summary_agrees, "patch_status": swe.patch_agrees},
    "search": {
        "ids_exist": search.ids_exist,
        "result_count": search.result_count,
        "empty_agrees": search.empty_agrees,
    },
    "web": {"axtree_wellformed": web.axtree_wellformed, "url_title": web.url_title},
    "android": {"ui_elements_parse": ui.ui_elements_parse},
    "os": {
        "ui_elements_parse": desktop.ingested_elements_parse,
        "desktop_tree_wellformed": desktop.desktop_tree_wellformed,
        "window_title": desktop.window_title,
    },
}
"""domain -> {check name: check}; a domain not listed (a custom one) has none."""


def run_checks(domain: str, predicted: str, real: str) -> dict[str, bool | None]:
    """Every check of ``domain`` on one (predicted, real) pair of observations."""
    return {name: check(predicted, real) for name, check in CHECKS.get(domain, {}).items()}
