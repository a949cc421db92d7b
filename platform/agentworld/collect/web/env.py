"""web: real web applications on 127.0.0.1 and a headless Chromium, both inside one
sandbox (their own network namespace: loopback only, and Landlock lets TCP reach the
applications' ports alone).

The browser driver (driver.py) runs in the sandbox and is spoken to over JSON lines; it
is started once per workspace, and each episode gets fresh applications (Datasette over
the episode's SQLite files, the helpdesk over its JSON state) and a fresh browser
context. Actions are browser calls (``click('12')``); an observation is the page's URL,
title and accessibility tree (the part on screen), or the browser's error first when
the action failed.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from typing import Any

from agentworld.collect.env import Action, Environment, Task, Workspace
from agentworld.collect.sandbox import SANDBOX_HOME
from agentworld.collect.web.actions import (
    ACTIONS,
    DESCRIPTION,
    ActionError,
    parse_action,
    render_action,
)
from agentworld.collect.web.session import (
    TCP_PORTS,
    VIEWPORT,
    BrowserSession,
    BrowserTimeout,
    BrowserUnavailable,
    find_browser,
)
from agentworld.collect.web.sites import write_site
from agentworld.schema import Outcome, ToolCall, Turn

DATASETTE_URL, HELPDESK_URL = "http://127.0.0.1:8001", "http://127.0.0.1:8002"
DATASETTE_SETTINGS = {
    "default_allow_sql": False,
    "allow_download": False,
    "default_facet_size": 5,
    # Generous limits: which facets Datasette suggests must not depend on the load.
    "facet_time_limit_ms": 2000,
    "facet_suggest_time_limit_ms": 2000,
    "sql_time_limit_ms": 5000,
}
_SENDS = ("send_msg_to_user", "report_infeasible")


def format_page(page: dict[str, Any], error: str | None, cap: int) -> tuple[str, int]:
    """The observation text and how many characters the cap cut off."""
    head = [f"Error: {error}", ""] if error else []
    head += [f"URL: {page['url']}", f"Title: {page['title']}"]
    top, view, height = page.get("scroll") or (0, 0, 0)
    if height > view > 0:
        head.append(f"Scroll: showing {top}-{min(top + view, height)} of {height} px")
    text = "\n".join([*head, page["tree"]]) if page["tree"] else "\n".join(head)
    if len(text) <= cap:
        return text, 0
    cut = text.rfind("\n", 0, cap)
    cut = cut if cut > 0 else cap
    rest = text[cut:].count("\n")
    return text[:cut] + f"\n[observation truncated: {rest} more lines]", len(text) - cut


def web_action(name: str, **arguments: Any) -> Action:
    return Action(
        text=render_action(name, **arguments), tool_call=ToolCall(name=name, arguments=arguments)
    )


_CALL = re.compile(r"\b(" + "|".join(ACTIONS) + r")\s*\(.*\)", re.S)


class WebEnvironment(Environment):
    domain = "web"
    source = "collect/web"

    def reset(self, task: Task) -> str:
        self.task = task
        self.answer: str | None = None
        self.session: BrowserSession = self.workspace.resource(
            "web-browser", lambda: _start_session(self.workspace)
        )
        self.session.episodes += 1
        site_dir = os.path.join(self.session_home, f"site-{self.session.episodes:04d}")
        files = write_site(task.state, site_dir)
        self.site_dir = site_dir
        inside = os.path.join(SANDBOX_HOME, os.path.basename(site_dir))
        request = {
            "op": "reset",
            "datasette": [os.path.join(inside, f) for f in files["datasette"]],
            "helpdesk": files["helpdesk"] and os.path.join(inside, files["helpdesk"]),
            "settings": {**DATASETTE_SETTINGS, **task.state.get("settings", {})},
        }
        self._call(request)
        return environment_text(task, self.session.info)

    @property
    def session_home(self) -> str:
        return os.path.join(self.workspace.root, "web-home")

    def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        # Navigation and element waits are bounded inside; this bounds everything else.
        limit = 2 * self.config.command_timeout_s + 15
        try:
            return self.session.request(message, limit)
        except Exception:
            self.workspace.drop("web-browser")  # the next episode starts a fresh browser
            raise

    def step(self, action: Action) -> Turn:
        t0 = time.monotonic()
        meta: dict[str, Any] = {}
        try:
            name, args = parse_action(action.text)
        except ActionError as e:
            name, args = None, {}
            meta.update(is_error=True, client_error=True)
            error = f"invalid action: {e}"
            page = self._call({"op": "act", "name": "noop", "args": {}})
        else:
            try:
                page = self._call({"op": "act", "name": name, "args": args})
            except BrowserTimeout as e:
                self.ended = True
                return Turn(
                    action=action.text,
                    observation=f"Error: {e}; the browser was closed.",
                    tool_call=action.tool_call,
                    duration_s=round(time.monotonic() - t0, 4),
                    metadata={"is_error": True, "timed_out": True},
                )
            error = page["error"]
            if error:
                meta["is_error"] = True
        if name in _SENDS:
            self.answer = str(args.get("text", args.get("reason", "")))
            self.ended = True
        obs, cut = format_page(page, error, self.config.web_observation_cap)
        if cut:
            meta["truncated_chars"] = cut
        meta["ax_nodes"] = page["nodes"]
        return Turn(
            action=action.text,
            observation=obs,
            tool_call=action.tool_call,
            duration_s=round(time.monotonic() - t0, 4),
            metadata=meta,
        )

    def query_database(self, name: str, query: str) -> list[tuple]:
        """Rows of ``query`` on the episode's database ``name``, the file Datasette
        serves (read-only: Datasette opened it immutable)."""
        path = os.path.join(self.site_dir, f"{name}.db")
        if not os.path.exists(path):
            raise FileNotFoundError(f"the episode serves no database {name!r}")
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return con.execute(query).fetchall()
        finally:
            con.close()

    def helpdesk_tickets(self) -> list[dict[str, Any]]:
        """The tickets the episode's helpdesk holds now (its posts included)."""
        return self._call({"op": "state"})["tickets"] or []

    def outcome(self):
        expected = self.task.state.get("answer")
        if expected is None or self.answer is None:
            return None
        ok = _norm(str(expected)) in _norm(self.answer)
        return Outcome(success=ok, reward=1.0 if ok else 0.0, note=f"expected {expected!r}")

    def parse_agent_action(self, text: str) -> Action:
        m = _CALL.search(text.replace("```", "\n"))
        if m is None:
            return Action(text=text.strip()[:500])
        for line in m.group(0).splitlines():
            try:
                name, args = parse_action(line.strip())
            except ActionError:
                continue
            return web_action(name, **args)
        return Action(text=m.group(0).strip()[:500])


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _start_session(workspace: Workspace) -> BrowserSession:
    home = os.path.join(workspace.root, "web-home")
    os.makedirs(home, exist_ok=True)
    return BrowserSession(
        home,
        timeout_s=workspace.config.command_timeout_s,
        max_file_bytes=workspace.config.max_file_bytes,
    )


APP_TEXT = {
    "datasette": "Datasette {version} (explore SQLite databases) at " + f"{DATASETTE_URL}/",
    "helpdesk": f"a helpdesk application (tickets, forms) at {HELPDESK_URL}/",
}


def environment_text(task: Task, info: dict[str, Any]) -> str:
    app = APP_TEXT[task.state["app"]].format(version=info.get("datasette", ""))
    major = str(info.get("browser", "")).split(".")[0]
    return (
        f"A web browser (headless Chromium {major}, {VIEWPORT['width']}x{VIEWPORT['height']}) "
        f"on an empty tab; the site: {app}. An observation is the page: URL, title and the "
        'accessibility tree of what is on screen, a line per element: [bid] role "name", '
        f"states, value. Actions:\n{DESCRIPTION}\nTask: {task.text}"
    )


__all__ = [
    "DATASETTE_URL",
    "HELPDESK_URL",
    "TCP_PORTS",
    "BrowserUnavailable",
    "WebEnvironment",
    "find_browser",
    "web_action",
]
