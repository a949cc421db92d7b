"""The desktop driver: runs inside the sandbox as ``python3 driver.py CONFIG_JSON`` (the
system Python, for its AT-SPI bindings) and speaks JSON lines on stdin/stdout with the
os environment on the host.

It starts the episode's desktop, all of it private to the sandbox: a virtual X server
(Xvfb, its socket in the sandbox's own /tmp and network namespace), a D-Bus session bus
(which starts the accessibility bus on demand), the Openbox window manager and the
task's applications. It then answers each request with the screen as the agent sees it:
the focused window's title, the accessibility tree of the windows on screen and a PNG
screenshot. Actions are real X input (xdotool); a failed action's answer carries the
real error (xdotool's or AT-SPI's message).

Requests: {"op": "observe"}; {"op": "act", "name": ..., "args": {...}}; {"op":
"close"}. Answers: {"title", "tree", "nodes", "png" (base64), "error"}. Standard
library, python3-gi and this folder only: nothing of agentworld is visible inside.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

# Run as a script, so this folder is on sys.path.
import accessibility
from screenshot import xwd_to_png
from tree_text import render_tree

RUNTIME = "/tmp/xdg-runtime"
FB_DIR = "/tmp/xvfb"
OPENBOX_DIR = "/tmp/openbox"
KEY_PAUSE_S = 0.3
TYPE_DELAY_MS = 20
KEYS = {
    "enter": "Return",
    "return": "Return",
    "esc": "Escape",
    "escape": "Escape",
    "tab": "Tab",
    "backspace": "BackSpace",
    "delete": "Delete",
    "del": "Delete",
    "space": "space",
    "up": "Up",
    "down": "Down",
    "left": "Left",
    "right": "Right",
    "home": "Home",
    "end": "End",
    "pageup": "Page_Up",
    "pagedown": "Page_Down",
    "insert": "Insert",
    "ctrl": "ctrl",
    "control": "ctrl",
    "alt": "alt",
    "shift": "shift",
    "super": "super",
    "win": "super",
    "menu": "Menu",
    "capslock": "Caps_Lock",
    "+": "plus",
    "-": "minus",
    "=": "equal",
    "/": "slash",
    "*": "asterisk",
    ".": "period",
    ",": "comma",
    **{f"f{i}": f"F{i}" for i in range(1, 13)},
}
"""pyautogui's key names -> X keysyms; any other name goes to xdotool as it is (and an
unknown one comes back as xdotool's own error)."""
# Openbox's default configuration, with normal windows maximized (a desktop the way a
# user keeps it) and focus following clicks, not the pointer.
WINDOW_RULE = (
    '<application class="*" type="normal"><maximized>yes</maximized>'
    "<focus>yes</focus></application>\n"
)


class ActionFailed(Exception):
    """The action could not be done; the message is what the agent reads."""


class Desktop:
    def __init__(self, config: dict[str, Any]) -> None:
        self.width, self.height = config["screen"]
        self.settle_s = float(config.get("settle_s", 2.0))
        self.procs: list[subprocess.Popen] = []
        self.log = open("/tmp/desktop.log", "ab")  # noqa: SIM115
        os.makedirs(RUNTIME, mode=0o700, exist_ok=True)
        os.environ.update(
            DISPLAY=":0",
            XDG_RUNTIME_DIR=RUNTIME,
            GSETTINGS_BACKEND="keyfile",  # settings are files in the home, as a user's are
            GTK_MODULES="gail:atk-bridge",  # GTK 2 applications join the accessibility bus
            NO_AT_BRIDGE="0",
            GDK_BACKEND="x11",
            **config.get("env", {}),
        )
        self._start_x()
        self._start_bus()
        self._start_window_manager()
        accessibility.init()
        self.ids = accessibility.Ids()
        for argv in config["apps"]:
            self.procs.append(self._spawn(argv, cwd=os.environ.get("HOME", "/")))
        self._wait_for_window(float(config.get("start_timeout_s", 30)))

    def _spawn(self, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, **kwargs
        )

    def _start_x(self) -> None:
        os.makedirs(FB_DIR, exist_ok=True)
        os.makedirs("/tmp/.X11-unix", mode=0o1777, exist_ok=True)  # Xvfb makes it only as root
        r, w = os.pipe()
        screen = f"{self.width}x{self.height}x24"
        argv = ["Xvfb", ":0", "-screen", "0", screen, "-nolisten", "tcp", "-fbdir", FB_DIR]
        proc = subprocess.Popen(
            [*argv, "-displayfd", str(w)], pass_fds=(w,), stdout=self.log, stderr=self.log
        )
        os.close(w)
        self.procs.append(proc)
        with os.fdopen(r) as f:  # Xvfb writes its display number once it accepts clients
            if not f.readline().strip():
                raise RuntimeError(f"Xvfb did not start: {self._log_tail()}")

    def _start_bus(self) -> None:
        r, w = os.pipe()
        address = f"unix:path={RUNTIME}/bus"
        argv = ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address={address}"]
        self.procs.append(
            subprocess.Popen(
                [*argv, f"--print-address={w}"], pass_fds=(w,), stdout=self.log, stderr=self.log
            )
        )
        os.close(w)
        with os.fdopen(r) as f:
            if not f.readline().strip():
                raise RuntimeError(f"dbus-daemon did not start: {self._log_tail()}")
        os.environ["DBUS_SESSION_BUS_ADDRESS"] = address

    def _start_window_manager(self) -> None:
        os.makedirs(OPENBOX_DIR, exist_ok=True)
        with open("/etc/xdg/openbox/rc.xml") as f:
            rc = f.read().replace("</applications>", WINDOW_RULE + "</applications>")
        config, ready = f"{OPENBOX_DIR}/rc.xml", f"{OPENBOX_DIR}/ready"
        with open(config, "w") as f:
            f.write(rc)
        argv = ["openbox", "--config-file", config, "--startup", f"touch {ready}"]
        self.procs.append(self._spawn(argv))
        self._until(lambda: os.path.exists(ready), 15, "openbox did not start")

    def _wait_for_window(self, timeout_s: float) -> None:
        def shown() -> bool:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"{proc.args[0]} exited with {proc.returncode}: {self._log_tail()}"
                    )
            return bool(self.title()) and bool(accessibility.windows())

        self._until(shown, timeout_s, "no application window appeared")

    def _until(self, ready: Any, timeout_s: float, message: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            if time.monotonic() > deadline:
                raise RuntimeError(f"{message} within {timeout_s:g}s: {self._log_tail()}")
            time.sleep(0.05)

    def _log_tail(self) -> str:
        self.log.flush()
        with open("/tmp/desktop.log", "rb") as f:
            lines = f.read().decode(errors="replace").strip().splitlines()
        return " | ".join(lines[-5:])[-1200:]

    # ---- input ---------------------------------------------------------------------
    def xdotool(self, *args: object) -> None:
        """Run xdotool; its complaints (an unknown key, a failed grab) are the error."""
        done = subprocess.run(
            ["xdotool", *map(str, args)], capture_output=True, text=True, timeout=30
        )
        err = done.stderr.strip()
        if done.returncode != 0 or err:
            lines = list(dict.fromkeys(err.splitlines()))  # xdotool repeats itself
            raise ActionFailed("\n".join(lines[:4]) or f"xdotool exited with {done.returncode}")

    def type_text(self, text: str) -> None:
        """Type ``text`` at a typist's pace. A newline is the Return key and a tab the
        Tab key (xdotool types them as characters some applications ignore), a moment
        after the text before them: a file dialog's name field drops a Return that comes
        while it is still completing the name. A doubled character waits as long: a
        calculator takes the second "8" of "88" for the first one's key still held."""
        parts = re.split(r"([\n\t])", text)
        for part in parts:
            if part in ("\n", "\t"):
                time.sleep(KEY_PAUSE_S)
                self.xdotool("key", "Return" if part == "\n" else "Tab")
                continue
            for k, run in enumerate(re.split(r"(?<=(.))(?=\1)", part)[::2]):
                if k:
                    time.sleep(KEY_PAUSE_S)
                if run:
                    self.xdotool("type", "--delay", TYPE_DELAY_MS, "--", run)

    def point(self, args: dict[str, Any], id_key: str = "id", x: str = "x", y: str = "y"):
        if id_key not in args:
            px, py = int(args[x]), int(args[y])
            if not (0 <= px < self.width and 0 <= py < self.height):
                raise ActionFailed(
                    f"({px}, {py}) is outside the screen (0-{self.width - 1}, 0-{self.height - 1})"
                )
            return px, py
        eid = int(args[id_key])
        acc = self.ids.elements.get(eid)
        if acc is None:
            raise ActionFailed(f"no element [{eid}] has been on screen")
        if not accessibility.on_screen(acc):
            raise ActionFailed(f"element [{eid}] is no longer on screen")
        try:
            return accessibility.center(acc)
        except (accessibility.GLib.Error, ValueError) as e:
            raise ActionFailed(f"element [{eid}]: {getattr(e, 'message', e)}") from None

    def act(self, name: str, args: dict[str, Any]) -> None:
        # No "mousemove --sync": it waits for a motion event, and none comes when the
        # pointer is already there (the same button twice) or a drag holds it.
        if name in ("click", "double_click", "right_click"):
            x, y = self.point(args)
            button = "3" if name == "right_click" else "1"
            repeat = ["--repeat", "2", "--delay", "80"] if name == "double_click" else []
            self.xdotool("mousemove", x, y, "sleep", "0.05", "click", *repeat, button)
        elif name == "type":
            self.type_text(args["text"])
        elif name in ("hotkey", "press"):
            keys = args["keys"] if name == "hotkey" else [args["key"]]
            self.xdotool("key", "--clearmodifiers", "+".join(KEYS.get(k, k) for k in keys))
        elif name == "scroll":
            if "id" in args or "x" in args:
                self.xdotool("mousemove", *self.point(args))
            clicks = int(args["clicks"])
            button = "4" if clicks > 0 else "5"
            if clicks:
                self.xdotool("click", "--repeat", abs(clicks), "--delay", "40", button)
        elif name == "drag":
            x0, y0 = self.point(args)
            x1, y1 = self.point(args, "to_id", "to_x", "to_y")
            mid = ((x0 + x1) // 2, (y0 + y1) // 2)
            self.xdotool("mousemove", x0, y0, "sleep", "0.1", "mousedown", "1")
            self.xdotool("mousemove", *mid, "sleep", "0.2", "mousemove", x1, y1, "sleep", "0.2")
            self.xdotool("mouseup", "1")
        elif name == "wait":
            time.sleep(float(args.get("seconds", 1.0)))
        elif name != "done":
            raise ActionFailed(f"unknown action {name!r}")

    # ---- observation ---------------------------------------------------------------
    def title(self) -> str:
        done = subprocess.run(
            ["xdotool", "getactivewindow", "getwindowname"], capture_output=True, text=True
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    def settle(self) -> list[dict[str, Any]]:
        """Read the screen until two reads in a row agree (an application redraws after
        the input; a dialog takes a moment to open), at most settle_s; the last read."""
        time.sleep(0.15)
        deadline = time.monotonic() + self.settle_s
        last, windows = None, accessibility.windows()
        while True:
            now = (self.title(), render_tree(accessibility.numbered(windows)))
            if now == last or time.monotonic() > deadline:
                return windows
            last = now
            time.sleep(0.1)
            windows = accessibility.windows()

    def observe(self, windows: list[dict[str, Any]]) -> dict[str, Any]:
        tree = render_tree(accessibility.numbered(windows, self.ids))
        with open(f"{FB_DIR}/Xvfb_screen0", "rb") as f:
            png = xwd_to_png(f.read())
        return {
            "title": self.title(),
            "tree": tree,
            "nodes": accessibility.count(windows),
            "png": base64.b64encode(png).decode(),
        }

    def close(self) -> None:
        """Ask every process to end (an application saves its settings on the way
        out), then kill what is left; leaving, the driver ends the PID namespace and
        with it anything that escaped this list."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 2
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()


def handle(request: dict[str, Any], desktop: Desktop) -> dict[str, Any]:
    error = None
    if request["op"] == "act":
        try:
            desktop.act(request["name"], request.get("args", {}))
        except ActionFailed as e:
            error = str(e)
        except subprocess.TimeoutExpired as e:
            error = f"{e.cmd[0]} did not finish within {e.timeout:g}s"
    return {**desktop.observe(desktop.settle()), "error": error}


def main(argv: list[str]) -> None:
    config = json.loads(argv[0])
    # The protocol owns the real stdout; anything a library prints goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    send = lambda obj: proto.write(json.dumps(obj, ensure_ascii=False) + "\n")  # noqa: E731
    try:
        desktop = Desktop(config)
    except Exception as e:  # noqa: BLE001 - what failed to start is the host's message
        send({"fatal": f"{type(e).__name__}: {e}"})
        return  # leaving, PID 1 takes whatever did start with it
    try:
        send({"ready": True, **desktop.observe(desktop.settle()), "error": None})
        for line in sys.stdin:
            request = json.loads(line)
            if request["op"] == "close":
                break
            try:
                send(handle(request, desktop))
            except Exception as e:  # noqa: BLE001 - reported to the host, which decides
                send({"fatal": f"{type(e).__name__}: {e}"})
    finally:
        desktop.close()


if __name__ == "__main__":
    main(sys.argv[1:])
