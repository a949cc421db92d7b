"""SWE state checks: what the repository's tools report about its state.

- ``test_summary`` (``summary_agrees``): the test runner's summary agrees with the real one: unittest's
  ``Ran N tests`` and ``OK`` / ``FAILED (failures=k, errors=e)``, or pytest's closing
  ``N passed, k failed`` line;
- ``patch_status`` (``patch_agrees``): a patch reported applied where it applied, rejected where it was
  rejected (``git apply`` and ``patch`` outputs).
"""

from __future__ import annotations

import re

_RAN = re.compile(r"^Ran (\d+) tests? in ", re.M)
_VERDICT = re.compile(r"^(OK|FAILED)(?: \(([^)]*)\))?\s*$", re.M)
_PYTEST = re.compile(r"^=+ (.*\d+ (?:passed|failed|errors?|skipped).*?) in [\d.]+s", re.M)
_COUNT = re.compile(r"(\w+)=(\d+)|(\d+) (\w+)")
_APPLIED = re.compile(r"^Applied patch .* cleanly\.|^patching file ", re.M)
_REJECTED = re.compile(
    r"^error: (?:patch failed|.*patch does not apply|corrupt patch|No valid patches"
    r"|.*: does not exist in index|.*already exists)|Hunk #\d+ FAILED|^Rejected hunk",
    re.M,
)


def runner_summary(text: str) -> dict[str, int | str] | None:
    """The runner's summary as counts: ``{"ran": 3, "verdict": "FAILED", "failures": 1}``
    (unittest) or ``{"passed": 2, "failed": 1}`` (pytest); None without a summary."""
    ran = _RAN.search(text)
    if ran:
        out: dict[str, int | str] = {"ran": int(ran.group(1)), "verdict": "?"}
        verdict = _VERDICT.search(text, ran.end())
        if verdict:
            out["verdict"] = verdict.group(1)
            for key, value, *_ in _COUNT.findall(verdict.group(2) or ""):
                out[key] = int(value)
        return out
    pytest = _PYTEST.search(text)
    if pytest:
        return {
            word.rstrip("s") if word.startswith("error") else word: int(n)
            for _, _, n, word in _COUNT.findall(pytest.group(1))
        }
    return None


def patch_state(text: str) -> str | None:
    """``applied``, ``rejected``, or None when the text reports no patch."""
    if _REJECTED.search(text):
        return "rejected"
    if _APPLIED.search(text):
        return "applied"
    return None


def summary_agrees(predicted: str, real: str) -> bool | None:
    """The same counts and verdict as the real summary; None without a real summary."""
    want = runner_summary(real)
    if want is None:
        return None
    return runner_summary(predicted) == want


def patch_agrees(predicted: str, real: str) -> bool | None:
    """Applied or rejected as in reality; None when the real output reports no patch."""
    want = patch_state(real)
    if want is None:
        return None
    return patch_state(predicted) == want
