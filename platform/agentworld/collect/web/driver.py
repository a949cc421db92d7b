"""The browser driver: runs inside the sandbox as ``python driver.py CONFIG_JSON`` and
speaks JSON lines on stdin/stdout with the web environment on the host.

It serves the episode's applications on 127.0.0.1 (Datasette over the episode's SQLite
files, the helpdesk app over its JSON state), drives a headless Chromium through
Playwright (over a pipe: no debugging port), and answers each request with the page as
the agent sees it: URL, title and the accessibility tree (see axtree.py).

Requests: {"op": "reset", "datasette": [...files], "settings": {...}, "helpdesk": path,
"url": start}; {"op": "act", "name": ..., "args": {...}}; {"op": "close"}. Answers:
{"url", "title", "tree", "nodes", "error"} (error: the browser's own message, or null).
{"op": "state"} answers {"tickets": [...]} (the helpdesk's, or null): the checkers'.
Standard library, Playwright, Datasette and uvicorn only: nothing of agentworld is
visible inside the sandbox except this folder.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
from typing import Any

# Run as a script, so this folder is on sys.path: axtree is importable without agentworld.
from axtree import BID_ATTR, BID_SCRIPT, dom_bids, render_axtree

DATASETTE_PORT, HELPDESK_PORT = 8001, 8002
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR_LINES = 4


class Apps:
    """The episode's web applications; restarted from their files on every reset so no
    state crosses episodes."""

    def __init__(self) -> None:
        self.datasette: Any = None
        self.helpdesk: Any = None

    def start(self, request: dict[str, Any]) -> None:
        self.stop()
        if request.get("datasette"):
            self.datasette = _start_datasette(request["datasette"], request.get("settings", {}))
        if request.get("helpdesk"):
            import helpdesk

            self.helpdesk = helpdesk.serve(request["helpdesk"], HELPDESK_PORT)

    def stop(self) -> None:
        if self.datasette is not None:
            server, thread = self.datasette
            server.should_exit = True
            thread.join(timeout=10)
            self.datasette = None
        if self.helpdesk is not None:
            self.helpdesk.shutdown()
            self.helpdesk.server_close()
            self.helpdesk = None


def _start_datasette(files: list[str], settings: dict[str, Any]) -> tuple[Any, threading.Thread]:
    import uvicorn
    from datasette.app import Datasette

    ds = Datasette([], immutables=files, settings=settings)
    config = uvicorn.Config(
        ds.app(), host="127.0.0.1", port=DATASETTE_PORT, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("Datasette did not start")
        time.sleep(0.02)
    return server, thread


class Browser:
    def __init__(self, config: dict[str, Any]) -> None:
        from playwright.sync_api import sync_playwright

        self.pw = sync_playwright().start()
        self.pw.selectors.set_test_id_attribute(BID_ATTR)
        self.browser = self.pw.chromium.launch(
            executable_path=config["executable"], args=config["args"], headless=True
        )
        self.element_timeout_ms = config["element_timeout_ms"]
        self.navigation_timeout_ms = config["navigation_timeout_ms"]
        self.viewport = config["viewport"]
        self.context: Any = None
        self.page: Any = None
        self._cdp: dict[int, Any] = {}

    def new_context(self) -> None:
        if self.context is not None:
            self.context.close()
        self.context = self.browser.new_context(viewport=self.viewport, locale="en-US")
        self.context.set_default_timeout(self.element_timeout_ms)
        self.context.set_default_navigation_timeout(self.navigation_timeout_ms)
        self.page = self.context.new_page()
        self._cdp = {}

    def _active(self) -> Any:
        # A link that opened a tab moves the agent there, as a person's browser would.
        pages = [p for p in self.context.pages if not p.is_closed()]
        self.page = pages[-1] if pages else self.context.new_page()
        return self.page

    def act(self, name: str, args: dict[str, Any]) -> None:
        page = self._active()
        el = page.get_by_test_id(str(args["bid"])) if "bid" in args else None
        if name in ("click", "dblclick", "hover", "focus", "check", "uncheck", "clear"):
            getattr(el, name)()
        elif name == "fill":
            el.fill(args["value"])
        elif name == "select_option":
            el.select_option(args["value"])
        elif name == "press":
            el.press(args["key"])
        elif name == "keyboard_press":
            page.keyboard.press(args["key"])
        elif name == "keyboard_type":
            page.keyboard.type(args["text"])
        elif name == "scroll":
            page.mouse.wheel(args["delta_x"], args["delta_y"])
            _wait_still(page)
        elif name == "goto":
            page.goto(args["url"])
        elif name == "go_back":
            page.go_back()
        elif name == "go_forward":
            page.go_forward()
        elif name not in ("noop", "send_msg_to_user", "report_infeasible"):
            raise ValueError(f"unknown action {name!r}")

    def settle(self) -> None:
        """Wait for a navigation the action started to load (bounded)."""
        try:
            self._active().wait_for_load_state("load", timeout=self.navigation_timeout_ms)
        except Exception:  # noqa: BLE001 - a slow page is observed as it is
            pass

    def observe(self) -> dict[str, Any]:
        for attempt in range(3):
            try:
                return self._snapshot()
            except Exception as e:  # noqa: BLE001 - retried below when a navigation raced
                if attempt == 2 or "context was destroyed" not in str(e):
                    raise
                self.settle()  # the page navigated while being read: read the new one
        raise AssertionError("unreachable")

    def _snapshot(self) -> dict[str, Any]:
        page = self._active()
        screen = page.evaluate(BID_SCRIPT)
        cdp = self._cdp.get(id(page))
        if cdp is None:
            cdp = self._cdp[id(page)] = self.context.new_cdp_session(page)
        document = cdp.send("DOM.getDocument", {"depth": -1, "pierce": True})["root"]
        nodes = cdp.send("Accessibility.getFullAXTree")["nodes"]
        return {
            "url": page.url,
            "title": page.title(),
            "tree": render_axtree(nodes, dom_bids(document), set(screen["hidden"])),
            "nodes": len(nodes),
            "scroll": [screen["scrollY"], screen["viewport"], screen["height"]],
        }

    def close(self) -> None:
        try:
            self.browser.close()
        finally:
            self.pw.stop()


def _wait_still(page: Any, limit_s: float = 2.0) -> None:
    """A wheel scrolls after the call returns (smoothly, over frames): wait until the
    position has stopped changing, so the observation shows where the page came to rest."""
    read = "() => [window.scrollX, window.scrollY]"
    last, still, deadline = page.evaluate(read), 0, time.monotonic() + limit_s
    while still < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
        now = page.evaluate(read)
        still = still + 1 if now == last else 0
        last = now


def error_text(e: BaseException) -> str:
    """The browser's message, without colour codes, cut to its first lines."""
    lines = _ANSI.sub("", str(e)).strip().splitlines()
    text = "\n".join(lines[:_ERROR_LINES])
    return text if len(lines) <= _ERROR_LINES else text + "\n  ..."


def handle(request: dict[str, Any], apps: Apps, browser: Browser) -> dict[str, Any]:
    error = None
    if request["op"] == "state":
        # The helpdesk's tickets as it holds them now (what a checker reads).
        if apps.helpdesk is None:
            return {"tickets": None}
        app = apps.helpdesk.app
        with app.lock:
            return {"tickets": json.loads(json.dumps(list(app.tickets.values())))}
    if request["op"] == "reset":
        apps.start(request)
        browser.new_context()
        try:
            browser.page.goto(request["url"])
        except Exception as e:  # noqa: BLE001 - the page's own error is the observation
            error = error_text(e)
    else:
        try:
            browser.act(request["name"], request.get("args", {}))
        except Exception as e:  # noqa: BLE001 - a failed action is observed, not fatal
            error = error_text(e)
        browser.settle()
    return {**browser.observe(), "error": error}


def main(argv: list[str]) -> None:
    config = json.loads(argv[0])
    # The protocol owns the real stdout; anything a library prints goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    apps = Apps()
    browser = Browser(config)
    send = lambda obj: proto.write(json.dumps(obj, ensure_ascii=False) + "\n")  # noqa: E731
    import datasette

    send({"ready": True, "browser": browser.browser.version, "datasette": datasette.__version__})
    try:
        for line in sys.stdin:
            request = json.loads(line)
            if request["op"] == "close":
                break
            try:
                send(handle(request, apps, browser))
            except Exception as e:  # noqa: BLE001 - reported to the host, which decides
                send({"fatal": f"{type(e).__name__}: {error_text(e)}"})
    finally:
        apps.stop()
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1:])
