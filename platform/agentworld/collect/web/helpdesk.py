"""Helpdesk: a small form-driven web application (standard library only) that the web
domain serves beside Datasette. Tickets to search and filter, ticket pages with a
comment form and a status form, a new-ticket form that the server validates (wrong
first attempts get real error messages), and a help page with in-page links.

The state is one JSON file (tickets, categories) read at start; posts change it in
memory, so every episode starts from its own data. It runs inside the sandbox, on a
thread of the browser driver: ``serve(data_path, port) -> server``.
"""

from __future__ import annotations

import html
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

STATUSES = ("open", "pending", "closed")
PRIORITIES = ("low", "normal", "high", "urgent")
PAGE_SIZE = 6
_E = html.escape


class Helpdesk:
    """The application state and its pages (plain functions of the state)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.name: str = data.get("name", "Helpdesk")
        self.categories: list[str] = list(data["categories"])
        self.tickets: dict[int, dict[str, Any]] = {int(t["id"]): t for t in data["tickets"]}
        self.lock = threading.Lock()

    def page(self, title: str, body: str, *, flash: str = "") -> str:
        banner = f'<p role="status">{_E(flash)}</p>' if flash else ""
        return (
            f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_E(title)} - "
            f"{_E(self.name)}</title></head><body><nav><a href='/'>{_E(self.name)}</a> "
            "<a href='/tickets'>Tickets</a> <a href='/tickets/new'>New ticket</a> "
            f"<a href='/help'>Help</a></nav><main><h1>{_E(title)}</h1>{banner}{body}</main>"
            "</body></html>"
        )

    def home(self) -> str:
        live = [t for t in self.tickets.values() if t["status"] != "closed"]
        recent = sorted(live, key=lambda t: t["opened"], reverse=True)[:4]
        items = "".join(f"<li>{_link(t)} ({t['priority']})</li>" for t in recent)
        return self.page(
            "Dashboard",
            f"<p>{len(live)} tickets need attention.</p><h2>Recently opened</h2><ul>{items}</ul>",
        )

    def search(self, query: dict[str, str]) -> str:
        q, status, prio = (query.get(k, "").strip() for k in ("q", "status", "priority"))
        hits = [
            t
            for t in sorted(self.tickets.values(), key=lambda t: t["id"])
            if (not q or q.lower() in (t["title"] + " " + t["requester"]).lower())
            and (not status or t["status"] == status)
            and (not prio or t["priority"] == prio)
        ]
        page = max(1, int(query.get("page", "1")) if query.get("page", "1").isdigit() else 1)
        shown = hits[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        rows = "".join(
            f"<tr><td>#{t['id']}</td><td>{_link(t, title=True)}</td><td>{t['status']}</td>"
            f"<td>{t['priority']}</td></tr>"
            for t in shown
        )
        form = (
            "<form action='/tickets' method=get role=search>"
            f"<label>Search <input name=q value='{_E(q)}'></label> "
            f"<label>Status {_select('status', ('', *STATUSES), status)}</label> "
            f"<label>Priority {_select('priority', ('', *PRIORITIES), prio)}</label> "
            "<button>Search</button></form>"
        )
        table = (
            f"<table><tr><th>#</th><th>Title</th><th>Status</th><th>Priority</th></tr>{rows}</table>"
            if shown
            else "<p>No tickets match.</p>"
        )
        more = ""
        if page * PAGE_SIZE < len(hits):
            more = f"<a href='/tickets?{urlencode({**query, 'page': page + 1})}'>Next page</a>"
        return self.page("Tickets", f"{form}<p>{len(hits)} tickets found.</p>{table}{more}")

    def ticket(self, tid: int, *, flash: str = "", error: str = "") -> tuple[int, str]:
        t = self.tickets.get(tid)
        if t is None:
            return 404, self.page("Not found", f"<p>Ticket #{tid} does not exist.</p>")
        comments = (
            "".join(f"<li><b>{_E(c['by'])}</b>: {_E(c['text'])}</li>" for c in t["comments"])
            or "<li>No comments yet.</li>"
        )
        alert = f'<p role="alert">{_E(error)}</p>' if error else ""
        body = (
            f"<dl><dt>Status</dt><dd>{t['status']}</dd><dt>Priority</dt><dd>{t['priority']}</dd>"
            f"<dt>Category</dt><dd>{_E(t['category'])}</dd><dt>Requester</dt>"
            f"<dd>{_E(t['requester'])}</dd><dt>Opened</dt><dd>{t['opened']}</dd></dl>"
            f"<p>{_E(t['description'])}</p><h2>Comments</h2><ul>{comments}</ul>{alert}"
            f"<form method=post action='/tickets/{tid}/comment'><label>Comment "
            "<textarea name=text></textarea></label> <button>Post comment</button></form>"
            f"<form method=post action='/tickets/{tid}/status'><label>Change status "
            f"{_select('status', STATUSES, t['status'])}</label> <button>Update</button></form>"
        )
        return (400 if error else 200), self.page(f"#{tid} {t['title']}", body, flash=flash)

    def new_form(self, values: dict[str, str], errors: list[str]) -> str:
        v = lambda k: _E(values.get(k, ""))  # noqa: E731
        alert = (
            '<div role="alert"><p>Please fix:</p><ul>'
            + "".join(f"<li>{_E(e)}</li>" for e in errors)
            + "</ul></div>"
            if errors
            else ""
        )
        radios = "".join(
            f"<label><input type=radio name=priority value={p}"
            f"{' checked' if values.get('priority', 'normal') == p else ''}> {p}</label> "
            for p in PRIORITIES
        )
        body = (
            f"{alert}<form method=post action='/tickets'>"
            f"<p><label>Title <input name=title value='{v('title')}'></label></p>"
            f"<p><label>Your email <input name=requester value='{v('requester')}'></label></p>"
            f"<p><label>Category {_select('category', ('', *self.categories), values.get('category', ''))}"
            f"</label></p><fieldset><legend>Priority</legend>{radios}</fieldset>"
            f"<p><label>Description <textarea name=description>{v('description')}</textarea>"
            "</label></p><button>Create ticket</button></form>"
        )
        return self.page("New ticket", body)

    def create(self, form: dict[str, str]) -> tuple[list[str], int]:
        errors = []
        if len(form.get("title", "").strip()) < 5:
            errors.append("Title must be at least 5 characters.")
        if not re.fullmatch(r"[^@\s]+@[^@\s]+\.\w+", form.get("requester", "").strip()):
            errors.append("Your email is not a valid address.")
        if form.get("category") not in self.categories:
            errors.append("Choose a category.")
        if len(form.get("description", "").strip()) < 10:
            errors.append("Description must be at least 10 characters.")
        if errors:
            return errors, 0
        with self.lock:
            tid = max(self.tickets, default=0) + 1
            self.tickets[tid] = {
                "id": tid,
                "title": form["title"].strip(),
                "status": "open",
                "priority": form.get("priority")
                if form.get("priority") in PRIORITIES
                else "normal",
                "category": form["category"],
                "requester": form["requester"].strip(),
                "opened": "today",
                "description": form["description"].strip(),
                "comments": [],
            }
        return [], tid

    def help(self) -> str:
        sections = {
            "priorities": "Urgent tickets are answered within an hour, high within a day, "
            "normal within three days; low ones when time allows.",
            "statuses": "Open: waiting for the team. Pending: waiting for the requester. "
            "Closed: solved; post a comment to reopen.",
            "comments": "Every comment is sent to the requester by email.",
        }
        toc = "".join(f"<li><a href='#{k}'>{k.title()}</a></li>" for k in sections)
        parts = "".join(f"<h2 id={k}>{k.title()}</h2><p>{v}</p>" for k, v in sections.items())
        return self.page(
            "Help", f"<ul>{toc}</ul>{parts}<p><a href='/tickets'>Back to tickets</a></p>"
        )


def _link(t: dict[str, Any], *, title: bool = False) -> str:
    text = _E(t["title"]) if title else f"#{t['id']} {_E(t['title'])}"
    return f"<a href='/tickets/{t['id']}'>{text}</a>"


def _select(name: str, options: tuple[str, ...] | list[str], chosen: str) -> str:
    opts = "".join(
        f"<option value='{_E(o)}'{' selected' if o == chosen else ''}>{_E(o) or 'any'}</option>"
        for o in options
    )
    return f"<select name={name}>{opts}</select>"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # the driver's stderr stays for errors

    def _send(self, status: int, body: str = "", location: str | None = None) -> None:
        data = body.encode()
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        app, url = self.server.app, urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        flash = {
            "created": "Ticket created.",
            "comment": "Comment added.",
            "status": "Status updated.",
        }
        if url.path == "/":
            return self._send(200, app.home())
        if url.path == "/tickets":
            return self._send(200, app.search(query))
        if url.path == "/tickets/new":
            return self._send(200, app.new_form({}, []))
        if url.path == "/help":
            return self._send(200, app.help())
        m = re.fullmatch(r"/tickets/(\d+)", url.path)
        if m:
            return self._send(*app.ticket(int(m[1]), flash=flash.get(query.get("msg", ""), "")))
        self._send(404, app.page("Not found", f"<p>No page at {_E(url.path)}.</p>"))

    def do_POST(self) -> None:  # noqa: N802 - the base class's name
        app, path = self.server.app, urlsplit(self.path).path
        size = min(int(self.headers.get("Content-Length") or 0), 64 * 1024)
        form = {k: v[-1] for k, v in parse_qs(self.rfile.read(size).decode()).items()}
        if path == "/tickets":
            errors, tid = app.create(form)
            if errors:
                return self._send(400, app.new_form(form, errors))
            return self._send(303, location=f"/tickets/{tid}?msg=created")
        m = re.fullmatch(r"/tickets/(\d+)/(comment|status)", path)
        if not m or int(m[1]) not in app.tickets:
            return self._send(404, app.page("Not found", "<p>No such ticket.</p>"))
        tid, t = int(m[1]), app.tickets[int(m[1])]
        if m[2] == "comment":
            if not form.get("text", "").strip():
                return self._send(*app.ticket(tid, error="Comment cannot be empty."))
            t["comments"].append({"by": "you", "text": form["text"].strip()})
        elif form.get("status") in STATUSES:
            t["status"] = form["status"]
        self._send(303, location=f"/tickets/{tid}?msg={m[2]}")


class _Server(ThreadingHTTPServer):
    app: Helpdesk
    daemon_threads = True
    allow_reuse_address = True


def serve(data_path: str, port: int) -> _Server:
    """Start the application on 127.0.0.1:port in a background thread."""
    with open(data_path) as f:
        data = json.load(f)
    server = _Server(("127.0.0.1", port), _Handler)
    server.app = Helpdesk(data)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
