"""os: a Linux desktop recorded for real. Each episode gets its own sandbox holding a
virtual X display (Xvfb), a D-Bus session and accessibility bus, the Openbox window
manager and the task's GTK application (Mousepad, galculator, Gnumeric, PCManFM).

Actions are pyautogui-like calls (``click(12)``, ``type("hello")``, ``hotkey("ctrl",
"s")``) done with real X input; an observation is the focused window's title and the
accessibility tree of the windows on screen (``[id] role "name"``, states, value), the
real error first when the action failed. Each turn names the PNG screenshot taken with
it (``screenshots/<episode>/<turn>.png``, beside the record shards).
"""

from __future__ import annotations

import base64
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from agentworld.collect.env import Action, Environment, Task
from agentworld.collect.os.actions import (
    DESCRIPTION,
    SIGNATURES,
    ActionError,
    parse_action,
    render_action,
)
from agentworld.collect.os.checks import run_checks
from agentworld.collect.os.session import (
    DesktopSession,
    DesktopTimeout,
    DesktopUnavailable,
    check_desktop,
    desktop_spec,
)
from agentworld.collect.os.tree_text import format_observation
from agentworld.collect.shell_env import write_files
from agentworld.collect.variety import Variety
from agentworld.schema import Outcome, ToolCall, Turn


@dataclass(frozen=True, kw_only=True)
class App:
    program: str
    label: str
    """How the environment text names it."""


APPS = {
    "mousepad": App(program="mousepad", label="the Mousepad text editor"),
    "galculator": App(program="galculator", label="the galculator calculator"),
    "gnumeric": App(program="gnumeric", label="the Gnumeric spreadsheet"),
    "pcmanfm": App(program="pcmanfm", label="the PCManFM file manager"),
}
SCREENS = ((1280, 800), (1366, 768), (1440, 900), (1280, 720))
SETTLE_S = 2.0
"""Longest wait for the screen to stop changing after an action."""


def desktop_installed() -> bool:
    """Whether this machine has the desktop and every application the playbooks use."""
    try:
        check_desktop([app.program for app in APPS.values()])
    except DesktopUnavailable:
        return False
    return True


def os_action(name: str, **arguments: Any) -> Action:
    return Action(
        text=render_action(name, **arguments), tool_call=ToolCall(name=name, arguments=arguments)
    )


_CALL = re.compile(r"\b(" + "|".join(SIGNATURES) + r")\s*\(.*\)", re.S)


class OsEnvironment(Environment):
    domain = "os"
    source = "collect/os"

    def reset(self, task: Task) -> str:
        self.task, self.last_observation, self.shots = task, "", 0
        app = APPS[task.state["app"]]
        check_desktop([app.program])
        v = Variety.of(task.state)
        self.home = self.workspace.episode_dir()
        write_files(self.home, task.state.get("files", {}))
        for folder in task.state.get("folders", ()):
            os.makedirs(os.path.join(self.home, folder), exist_ok=True)
        env = {k: val for k, val in v.env().items() if not k.startswith("GIT_")}
        env.pop("COLUMNS")
        spec = desktop_spec(
            self.home,
            user=v.user,
            shown_as=v.home,
            max_file_bytes=self.config.max_file_bytes,
            env=env,
        )
        screen = list(task.state.get("screen", SCREENS[0]))
        args = [a.replace("~", v.home) for a in task.state.get("args", ())]
        config = {"screen": screen, "apps": [[app.program, *args]], "settle_s": SETTLE_S}
        self.session = DesktopSession(spec, config, timeout_s=self._limit())
        title = self.session.first["title"]
        return environment_text(task, v, app, screen, title)

    def _limit(self) -> float:
        # An action is bounded inside (xdotool, AT-SPI calls); this bounds the rest.
        return 2 * self.config.command_timeout_s + 2 * SETTLE_S + 10

    def step(self, action: Action) -> Turn:
        t0 = time.monotonic()
        meta: dict[str, Any] = {}
        try:
            name, args = parse_action(action.text)
            request = {"op": "act", "name": name, "args": args}
            error = None
        except ActionError as e:
            name, request, error = None, {"op": "observe"}, f"invalid action: {e}"
            meta.update(is_error=True, client_error=True)
        try:
            screen = self.session.request(request, self._limit())
        except DesktopTimeout as e:
            self.ended = True
            return Turn(
                action=action.text,
                observation=f"Error: {e}; the desktop was closed.",
                tool_call=action.tool_call,
                duration_s=round(time.monotonic() - t0, 4),
                metadata={"is_error": True, "timed_out": True},
            )
        error = error or screen["error"]
        if error:
            meta["is_error"] = True
        if name == "done":
            self.ended = True
        obs, cut = format_observation(
            screen["title"], screen["tree"], error, self.config.os_observation_cap
        )
        if cut:
            meta["truncated_chars"] = cut
        meta["ax_nodes"] = screen["nodes"]
        self.last_observation = obs
        return Turn(
            action=action.text,
            observation=obs,
            tool_call=action.tool_call,
            duration_s=round(time.monotonic() - t0, 4),
            screenshot=self._save_screenshot(screen["png"]),
            metadata=meta,
        )

    def _save_screenshot(self, png_b64: str) -> str:
        self.shots += 1
        relative = f"screenshots/{self.episode_id or 'episode'}/{self.shots:03d}.png"
        with open(self.workspace.artifact_path(relative), "wb") as f:
            f.write(base64.b64decode(png_b64))
        return relative

    def outcome(self) -> Outcome | None:
        checks = self.task.state.get("checks")
        if not checks:
            return None
        return run_checks(checks, self.home, self.last_observation)

    def parse_agent_action(self, text: str) -> Action:
        m = _CALL.search(text.replace("```", "\n"))
        if m is None:
            return Action(text=text.strip()[:500])
        for line in m.group(0).splitlines():
            try:
                name, args = parse_action(line.strip())
            except ActionError:
                continue
            return os_action(name, **args)
        return Action(text=m.group(0).strip()[:500])

    def close(self) -> None:
        session = getattr(self, "session", None)
        if session is not None:
            session.close()


def environment_text(task: Task, v: Variety, app: App, screen: list[int], title: str) -> str:
    return (
        f"A Linux desktop (Openbox, {screen[0]}x{screen[1]}) of user {v.user}, home "
        f"{v.home}; {app.label} is open ({title!r}). Observation: the focused window's "
        "title, then the accessibility tree of the windows on screen, a line per element: "
        f'[id] role "name", states, value. Actions:\n{DESCRIPTION}\nTask: {task.text}'
    )


__all__ = ["APPS", "DesktopUnavailable", "OsEnvironment", "desktop_installed", "os_action"]
