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

import dataclasses
import glob
import importlib.util
import json
import os
import re
import selectors
import shutil
import subprocess
import sys
import time
from typing import Any

from agentworld.collect.env import Action, Environment, Task, Workspace
from agentworld.collect.sandbox import (
    SANDBOX_HOME,
    SandboxSpec,
    base_env,
    python_read_paths,
    sandbox_command,
)
from agentworld.collect.web.actions import ACTIONS, DESCRIPTION, ActionError, parse_action
from agentworld.collect.web.sites import write_site
from agentworld.schema import ToolCall, Turn

WEB_DIR = os.path.dirname(os.path.abspath(__file__))
DATASETTE_URL, HELPDESK_URL = "http://127.0.0.1:8001", "http://127.0.0.1:8002"
TCP_PORTS = (8001, 8002)
BROWSER_ARGS = [
    "--no-sandbox",  # its own sandbox needs namespaces ours already took; ours contains it
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # /dev/shm is not writable in the sandbox: use /tmp
]
VIEWPORT = {"width": 1280, "height": 600}
START_TIMEOUT_S = 120.0
ELEMENT_TIMEOUT_S = 1.5
"""How long an element action waits for its element (BrowserGym waits 0.5 s): a wrong
bid fails fast with Playwright's own message."""
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


class BrowserUnavailable(RuntimeError):
    """The web domain cannot run on this machine (no Chromium, or a missing package)."""


def find_browser() -> str:
    """Debian's ``chromium`` on PATH, else a Chromium that ``playwright install`` put in
    its browsers folder; BrowserUnavailable says how to get one."""
    for package in ("playwright", "datasette"):
        if importlib.util.find_spec(package) is None:
            raise BrowserUnavailable(
                f"the web domain needs the Python package {package!r}: pip install {package}"
            )
    path = shutil.which("chromium")
    if path:
        return path
    folder = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or os.path.expanduser(
        "~/.cache/ms-playwright"
    )
    managed = sorted(glob.glob(os.path.join(folder, "chromium-*", "chrome-linux*", "chrome")))
    if managed:
        return managed[-1]
    raise BrowserUnavailable(
        "the web domain needs a Chromium browser and found none (no `chromium` on PATH, "
        f"none under {folder}): apt-get install -y chromium (Debian), or "
        "python -m playwright install --with-deps chromium; the other domains do not need it"
    )


class BrowserTimeout(RuntimeError):
    pass


class BrowserSession:
    """The sandboxed driver process: applications and browser, answering JSON lines."""

    def __init__(self, home: str, *, timeout_s: float, max_file_bytes: int) -> None:
        executable = find_browser()
        self.timeout_s = timeout_s
        config = {
            "executable": executable,
            "args": BROWSER_ARGS,
            "element_timeout_ms": int(min(ELEMENT_TIMEOUT_S, timeout_s) * 1000),
            "navigation_timeout_ms": int(timeout_s * 1000),
            "viewport": VIEWPORT,
        }
        read = [*python_read_paths(), WEB_DIR]
        real = os.path.realpath(executable)
        if not real.startswith(("/usr/", "/bin/")):
            read.append(os.path.dirname(real))  # a Playwright-managed browser's folder
        spec = SandboxSpec(
            work_dir=home,
            max_file_bytes=max_file_bytes,
            read_paths=tuple(read),
            tcp_ports=TCP_PORTS,
            tmp_size="512m",
            **_browser_limits(),
        )
        argv = sandbox_command(
            spec, [sys.executable, os.path.join(WEB_DIR, "driver.py"), json.dumps(config)]
        )
        self._stderr = open(os.path.join(home, ".driver-stderr.log"), "w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv, env=base_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self._buf = b""
        self.episodes = 0
        try:
            self.info = self._read(START_TIMEOUT_S)
        except BaseException:
            self.kill()
            raise
        if not self.info.get("ready"):
            self.kill()
            raise RuntimeError(f"the browser driver did not start: {self.info}")

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise RuntimeError(f"the browser driver exited: {self._stderr_tail()}") from None
        answer = self._read(timeout_s)
        if "fatal" in answer:
            raise RuntimeError(f"the browser driver failed: {answer['fatal']}")
        return answer

    def _read(self, timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.kill()
                    raise BrowserTimeout(f"the browser did not answer within {timeout_s:g}s")
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"the browser driver exited: {self._stderr_tail()}")
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def _stderr_tail(self) -> str:
        self._stderr.flush()
        self._stderr.seek(0)
        return " | ".join(self._stderr.read().strip().splitlines()[-5:])[-1500:]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        try:
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write(b'{"op": "close"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            self.kill()
            self._stderr.close()


def _browser_limits() -> dict[str, int]:
    """A browser runs dozens of processes and threads and maps much memory: raise the
    sandbox's tree limits where this version of SandboxSpec has them."""
    wanted = {"max_open_files": 4096, "max_processes": 2048, "max_memory_bytes": 6 << 30}
    names = {f.name for f in dataclasses.fields(SandboxSpec)}
    return {k: v for k, v in wanted.items() if k in names}


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
    from agentworld.collect.web.actions import render_action

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

    def outcome(self):
        from agentworld.schema import Outcome

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
