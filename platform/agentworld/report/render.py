"""Sections -> a self-contained HTML page (inline style, PNGs beside it) and Markdown."""

from __future__ import annotations

import html

from agentworld.report.sections import Section, Table

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
caption { caption-side: bottom; color: #666; font-size: 12px; text-align: left; }
.missing { color: #a33; font-weight: bold; } img { max-width: 100%; border: 1px solid #eee; }
"""


def to_html(title: str, subtitle: str, sections: list[Section]) -> str:
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1><p>{html.escape(subtitle)}</p>",
    ]
    for s in sections:
        parts.append(f"<h2>{html.escape(s.title)}</h2>")
        if s.status == "missing":
            parts.append('<p class="missing">missing: this stage has not run or not finished</p>')
            continue
        parts += [f"<p>{html.escape(n)}</p>" for n in s.notes]
        parts += [_html_table(t) for t in s.tables]
        for name, caption in s.figures:
            parts.append(
                f'<figure><img src="{html.escape(name)}" alt="{html.escape(caption)}">'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>"
            )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.head)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c.strip('*'))}</td>" for c in r) + "</tr>"
        for r in t.rows
    )
    caption = f"<caption>{html.escape(t.caption)}</caption>" if t.caption else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def to_markdown(title: str, subtitle: str, sections: list[Section]) -> str:
    lines = [f"# {title}", "", subtitle, ""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        if s.status == "missing":
            lines += ["**missing**: this stage has not run or not finished", ""]
            continue
        lines += [*(f"{n}" for n in s.notes), ""] if s.notes else []
        for t in s.tables:
            lines += ["| " + " | ".join(t.head) + " |", "|" + " --- |" * len(t.head)]
            lines += ["| " + " | ".join(r) + " |" for r in t.rows]
            lines += (["", f"_{t.caption}_"] if t.caption else []) + [""]
        lines += [f"![{caption}]({name})" for name, caption in s.figures]
        lines += [""] if s.figures else []
    return "\n".join(lines)
