"""The agent's side of an episode: its prompt, the token transcript the learner trains
on, and the policies that generate actions.

The agent sees (ChatML): system = the environment text and how to act; user "Begin.";
then its actions as assistant messages and the observations as user messages. The
transcript is built token by token exactly as the rollout engine saw it, with a mask
that is 1 on the agent's own tokens only (observations and prompts are masked out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentworld.agent.tasks import ANSWER_PREFIX
from agentworld.model import local_model_dir
from agentworld.model.engine import EngineConfig, close_engine, start_llm

INSTRUCTIONS = {
    "terminal": "Reply with exactly one shell command.",
    "search": 'Reply with exactly one tool call as JSON: {"name": ..., "arguments": {...}}.',
    "mcp": 'Reply with exactly one tool call as JSON: {"name": ..., "arguments": {...}}.',
    "web": "Reply with exactly one browser action, such as click('12') or fill('31', "
    "'text'): the number is the id in brackets before the element on the page.",
}


def agent_system(domain: str, environment: str) -> str:
    return (
        f"{environment}\n\nYou are the agent. {INSTRUCTIONS[domain]} When you know the "
        f"answer, reply {ANSWER_PREFIX} followed by it (a markdown table when one is asked for)."
    )


def chat_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of ``messages`` through the chat template, ready for the assistant."""
    out = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True
    )
    return list(out["input_ids"])


def _sanitize(text: str) -> str:
    # An observation must not smuggle in chat-control tokens.
    return text.replace("<|", "<\u200b|")


@dataclass
class Transcript:
    """Token ids of one episode and the agent-token mask. ids, mask: (T,)."""

    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)

    def add(self, ids: Sequence[int], *, agent: bool) -> None:
        self.ids += list(ids)
        self.mask += [1 if agent else 0] * len(ids)

    def __len__(self) -> int:
        return len(self.ids)


class Renderer:
    """Token pieces of the agent's conversation for one tokenizer."""

    def __init__(self, tokenizer: Any, *, max_observation_tokens: int) -> None:
        self.tok = tokenizer
        self.max_obs = max_observation_tokens
        self.eos = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def start(self, domain: str, environment: str) -> Transcript:
        messages = [
            {"role": "system", "content": _sanitize(agent_system(domain, environment))},
            {"role": "user", "content": "Begin."},
        ]
        tr = Transcript()
        tr.add(chat_ids(self.tok, messages), agent=False)
        return tr

    def add_action(self, tr: Transcript, token_ids: Sequence[int], *, finished: bool) -> None:
        """The engine's tokens (ending in <|im_end|> when it stopped by itself); a cut
        action gets the end token too, outside the loss (the agent did not write it)."""
        tr.add(token_ids, agent=True)
        if not finished or not token_ids or token_ids[-1] != self.eos:
            tr.add([self.eos], agent=False)

    def add_observation(self, tr: Transcript, observation: str) -> None:
        ids = self.encode(_sanitize(observation or "(no output)"))
        if len(ids) > self.max_obs:
            ids = ids[: self.max_obs] + self.encode("\n[observation truncated]")
        tr.add(self.encode("\n<|im_start|>user\n"), agent=False)
        tr.add(ids, agent=False)
        tr.add(self.encode("<|im_end|>\n<|im_start|>assistant\n"), agent=False)

    def action_ids(self, action: str) -> list[int]:
        """A demonstration's action as the agent would have generated it."""
        return self.encode(action) + [self.eos]

    def text_of(self, token_ids: Sequence[int]) -> str:
        return self.tok.decode([t for t in token_ids if t != self.eos], skip_special_tokens=False)


@dataclass(frozen=True, kw_only=True)
class Generated:
    token_ids: tuple[int, ...]
    finished: bool


class WorkersPolicy:
    """Actions from the RL rollout engines (``agentworld.rl.placement.RolloutGroup``)."""

    def __init__(self, rollout: Any, *, temperature: float | None = None) -> None:
        self.rollout, self.temperature = rollout, temperature

    def generate(self, prompts: list[list[int]]) -> list[Generated]:
        if self.temperature == 0:
            # Greedy: equal prompts (two held-out tasks that read alike) get equal actions,
            # so each distinct prompt is generated once; vLLM refuses n > 1 when greedy.
            distinct = list(dict.fromkeys(tuple(p) for p in prompts))
            groups = self.rollout.generate([list(p) for p in distinct], n=1, temperature=0.0)
            by_prompt = dict(zip(distinct, groups, strict=True))
            groups = [by_prompt[tuple(p)] for p in prompts]
        else:
            groups = self.rollout.generate(prompts, n=1, temperature=self.temperature)
        return [Generated(token_ids=g[0].token_ids, finished=g[0].finished) for g in groups]


class EnginePolicy:
    """Actions from an in-process vLLM engine on an agent checkpoint (evaluation)."""

    def __init__(
        self, model_dir: str, *, temperature: float, max_new_tokens: int, engine: EngineConfig
    ) -> None:
        self.llm = start_llm(local_model_dir(model_dir), engine, seed=0)
        self.temperature, self.max_new_tokens, self.engine = temperature, max_new_tokens, engine

    def generate(self, prompts: list[list[int]]) -> list[Generated]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(
            temperature=self.temperature, max_tokens=self.max_new_tokens, skip_special_tokens=False
        )
        outs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False
        )
        return [
            Generated(
                token_ids=tuple(o.outputs[0].token_ids),
                finished=o.outputs[0].finish_reason == "stop",
            )
            for o in outs
        ]

    def close(self) -> None:
        close_engine(self.llm, self.engine)
