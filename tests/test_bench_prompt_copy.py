"""bench/prompt_copy_probe.py's copy step: the prompt's token after the longest match of
what the model wrote, the latest on a tie; nothing before ``min_match`` tokens of its own,
and nothing copied from the output itself."""

from __future__ import annotations

import sys

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from prompt_copy_probe import PromptSource  # noqa: E402


def test_the_longest_match_in_the_prompt_gives_the_next_token():
    prompt = [1, 2, 3, 9, 7, 2, 3, 4, 5]
    out: list[int] = []
    src = PromptSource(prompt, out, bias=5.0, min_match=2)
    assert src.next_token() is None  # nothing written yet: the first tokens are the model's
    out += [2]
    assert src.next_token() is None  # one token is under min_match
    out += [3]
    assert src.next_token() == 4  # "2 3" stands twice: a tie goes to the latest
    out[:] = [1, 2, 3]
    assert src.next_token() == 9  # "1 2 3" is the longer match: the earlier place wins
    out += [8]
    assert src.next_token() is None  # "3 8" is not in the prompt
    out[:] = [4, 5]
    assert src.next_token() is None  # the prompt ends there: no token follows
    # The output grows in place (vLLM's running list): the source sees each new token.
    out[:] = []
    out.extend([9, 7])
    assert src.next_token() == 2


def test_the_output_is_never_a_source():
    out = [6, 6, 6, 6]  # repeats itself, but its own tokens are not in the prompt
    assert PromptSource([1, 2, 3], out, bias=5.0, min_match=1).next_token() is None
    assert PromptSource([6, 6, 1], out, bias=5.0, min_match=2).next_token() == 1
