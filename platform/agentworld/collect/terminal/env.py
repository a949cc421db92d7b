"""terminal: a real bash on a pseudo-terminal in a throw-away sandboxed home.

Actions are command lines; an observation is what the terminal shows after Enter: the
output, then the next prompt.
"""

from __future__ import annotations

import re

from agentworld.collect.env import Action, Task
from agentworld.collect.shell_env import ShellEnvironment, command_turn
from agentworld.collect.variety import Variety
from agentworld.schema import Turn


class TerminalEnvironment(ShellEnvironment):
    domain = "terminal"
    source = "collect/terminal"

    def reset(self, task: Task) -> str:
        v = Variety.of(task.state)
        shell = self.start_shell(task.state.get("files", {}), v)
        where = f"{v.home} (HOME)" if v.workdir == v.home else f"{v.workdir} (HOME is {v.home})"
        return (
            f"A Linux terminal running GNU bash as user {v.user} on {v.host} in {where}. "
            "Each action is a command line typed at the prompt; the observation is what "
            "the terminal shows next: the output, then the prompt. No network access.\n"
            f"Task: {task.text}\n\nThe screen shows:\n{shell.banner}"
        )

    def step(self, action: Action) -> Turn:
        result = self.run(action.text)
        return command_turn(action, result, result.screen)

    def parse_agent_action(self, text: str) -> Action:
        return Action(text=first_command(text))


_FENCE = re.compile(r"```(?:bash|sh|shell|console)?\s*\n(.*?)```", re.S)


def first_command(text: str) -> str:
    """The first command line of a model reply: inside a code fence when there is one."""
    m = _FENCE.search(text)
    body = m.group(1) if m else text
    for line in body.splitlines():
        line = line.strip().removeprefix("$ ").strip()
        if line:
            return line
    return text.strip()[:200] or "true"
