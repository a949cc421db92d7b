"""The playground page (``GET /playground``): try the simulator by hand in a browser.

One self-contained HTML document (its style and script inline, no other request than
the simulator's own API): choose a domain or a registered environment (its tools
shown), set control, type actions, read each observation (the reasoning folded away
when the model gives one), fork a session at any turn, and copy the session as JSON or
as the ``curl`` / Python lines that reproduce it. The team key is entered once and kept
in the tab's ``sessionStorage`` only (never a cookie, local storage or a URL); copied
code reads the key from ``$AGENTWORLD_SIM_API_KEY``. Everything is reachable with the
keyboard (Ctrl+Enter sends the action).
"""

from __future__ import annotations

import json

from agentworld.schema import get_domain, known_domains


def playground_page() -> str:
    """The page, listing the domains this replica knows (custom ones included)."""
    domains = {name: get_domain(name).description for name in known_domains()}
    # Raw text inside <script type="application/json">: only "</" could end it early.
    return _PAGE.replace("__DOMAINS__", json.dumps(domains).replace("</", "<\\/"))


_PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>AgentWorld playground</title>
<style>
  :root { --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --accent: #0b5cad; --bg: #f6f8fa; --err: #b42318; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.45 system-ui, sans-serif; color: var(--fg); }
  header { display: flex; flex-wrap: wrap; gap: 1rem; align-items: center; padding: .6rem 1rem; border-bottom: 1px solid var(--line); background: var(--bg); }
  header h1 { font-size: 1.1rem; margin: 0 1rem 0 0; }
  main { display: grid; grid-template-columns: minmax(18rem, 26rem) 1fr; gap: 1rem; padding: 1rem; }
  @media (max-width: 50rem) { main { grid-template-columns: 1fr; } }
  section { border: 1px solid var(--line); border-radius: 6px; padding: .8rem; }
  h2 { font-size: 1rem; margin: 0 0 .6rem; }
  label { display: block; font-weight: 600; margin: .6rem 0 .2rem; }
  .hint { color: var(--muted); font-size: .85rem; font-weight: normal; }
  input, select, textarea, button { font: inherit; }
  input, select, textarea { width: 100%; padding: .35rem .45rem; border: 1px solid var(--line); border-radius: 4px; }
  textarea { min-height: 3.2rem; resize: vertical; font-family: ui-monospace, monospace; font-size: .85rem; }
  button { padding: .35rem .8rem; border: 1px solid var(--accent); border-radius: 4px; background: #fff; color: var(--accent); cursor: pointer; }
  button.primary { background: var(--accent); color: #fff; }
  button:disabled { opacity: .5; cursor: default; }
  :focus-visible { outline: 3px solid #f2a900; outline-offset: 1px; }
  .row { display: flex; gap: .5rem; align-items: center; flex-wrap: wrap; }
  .row > input { width: auto; flex: 1; }
  fieldset { border: 1px solid var(--line); border-radius: 4px; margin: .6rem 0; }
  legend { font-weight: 600; }
  ol#turns { list-style: none; padding: 0; margin: 0; }
  ol#turns > li { border-top: 1px solid var(--line); padding: .5rem 0; }
  pre { white-space: pre-wrap; word-break: break-word; margin: .2rem 0; padding: .4rem; background: var(--bg); border-radius: 4px; font-size: .85rem; }
  pre.observation:empty::before { content: "(empty observation)"; color: var(--muted); font-style: italic; }
  .who { font-size: .8rem; color: var(--muted); text-transform: uppercase; letter-spacing: .03em; }
  #status { min-height: 1.4rem; color: var(--muted); }
  #status.error { color: var(--err); }
  ul#tools { margin: .2rem 0; padding-left: 1.2rem; font-size: .9rem; }
  .sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
</style>
</head>
<body>
<a class="sr-only" href="#action">Skip to the action box</a>
<header>
  <h1>AgentWorld playground</h1>
  <form id="key-form" class="row" autocomplete="off">
    <label for="key" class="sr-only">Team API key</label>
    <input id="key" type="password" placeholder="team API key (kept in this tab only)">
    <button type="submit">Use key</button>
    <button type="button" id="forget">Forget key</button>
  </form>
  <span id="key-state" class="hint"></span>
</header>
<main>
  <section aria-labelledby="env-title">
    <h2 id="env-title">Environment</h2>
    <label for="source">Start from</label>
    <select id="source"></select>
    <div id="env-info" class="hint"></div>
    <ul id="tools" aria-label="Tools of the environment"></ul>
    <div id="domain-fields">
      <label for="environment">Environment text <span class="hint">(the system text; empty: the domain's own)</span></label>
      <textarea id="environment" placeholder="bash 5.2 in /home/user"></textarea>
      <label for="tool-defs">Tools <span class="hint">(JSON list, optional)</span></label>
      <textarea id="tool-defs" placeholder='[{"name": "get_weather", "inputSchema": {"type": "object"}}]'></textarea>
    </div>
    <fieldset>
      <legend>Control</legend>
      <label for="facts">World facts <span class="hint">(one per line)</span></label>
      <textarea id="facts" placeholder="the host is called quelmar-7"></textarea>
      <label for="tool-errors">Tool errors <span class="hint">(JSON list of {tool, turns, message})</span></label>
      <textarea id="tool-errors" placeholder='[{"tool": "get_weather", "turns": [2], "message": "{\"error\": \"quota\"}"}]'></textarea>
      <label for="page-size">Page size <span class="hint">(paginate list results; empty: off)</span></label>
      <input id="page-size" type="number" min="1">
      <label for="hidden">Hidden fields <span class="hint">(comma separated)</span></label>
      <input id="hidden" placeholder="email, ssn">
      <label for="instructions">Instructions</label>
      <textarea id="instructions"></textarea>
    </fieldset>
    <label for="max-tokens">Max tokens per step</label>
    <input id="max-tokens" type="number" min="1" placeholder="server default">
    <p><button id="new" class="primary" type="button">New session</button></p>
  </section>
  <section aria-labelledby="session-title">
    <h2 id="session-title">Session <span id="session-id" class="hint">none yet</span></h2>
    <ol id="turns" aria-label="Turns"></ol>
    <label for="action">Action <span class="hint">(a command, a UI action, or a tool call as JSON {"name", "arguments"}; Ctrl+Enter sends)</span></label>
    <textarea id="action" placeholder="ls -la"></textarea>
    <div class="row">
      <button id="send" class="primary" type="button" disabled>Send</button>
      <button id="copy-json" type="button" disabled>Copy as JSON</button>
      <button id="copy-curl" type="button" disabled>Copy as curl</button>
      <button id="copy-python" type="button" disabled>Copy as Python</button>
    </div>
    <label for="export">Copied <span class="hint">(also on the clipboard when the browser allows)</span></label>
    <textarea id="export" readonly rows="8"></textarea>
    <p id="status" role="status" aria-live="polite"></p>
  </section>
</main>
<script type="application/json" id="domains">__DOMAINS__</script>
<script>
"use strict";
const KEY = "agentworld.sim.key";
const $ = (id) => document.getElementById(id);
const DOMAINS = JSON.parse($("domains").textContent);
let current = null;  // the session as the API returns it
let environments = {};

function status(text, error) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

async function api(method, path, body) {
  const headers = { "Authorization": "Bearer " + (sessionStorage.getItem(KEY) || "") };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await r.json().catch(() => ({}));
  if (!r.ok) {
    const e = data.error || {};
    throw new Error(`HTTP ${r.status} ${e.code || ""}: ${e.message || r.statusText}${e.field ? " (" + e.field + ")" : ""}`);
  }
  return data;
}

function showKeyState() {
  const has = !!sessionStorage.getItem(KEY);
  $("key-state").textContent = has ? "key set for this tab" : "no key yet";
  $("forget").disabled = !has;
}

async function loadEnvironments() {
  const select = $("source");
  select.textContent = "";
  const group = (label) => { const g = document.createElement("optgroup"); g.label = label; select.append(g); return g; };
  const domains = group("Domains");
  for (const [name, text] of Object.entries(DOMAINS)) {
    domains.append(new Option(`${name}: ${text}`, "domain:" + name));
  }
  if (DOMAINS.terminal) select.value = "domain:terminal";
  environments = {};
  if (!sessionStorage.getItem(KEY)) return showSource();
  try {
    const listed = (await api("GET", "/v1/environments")).environments;
    if (listed.length) {
      const registered = group("Registered environments");
      for (const e of listed) {
        environments[e.name] = e;
        registered.append(new Option(`${e.name} (${e.tools.length} tools)`, "env:" + e.name));
      }
    }
  } catch (e) { status(e.message, true); }
  showSource();
}

async function showSource() {
  const [kind, name] = $("source").value.split(/:(.*)/s);
  $("domain-fields").hidden = kind !== "domain";
  $("tools").textContent = "";
  $("env-info").textContent = "";
  if (kind !== "env") return;
  try {
    const env = await api("GET", "/v1/environments/" + encodeURIComponent(name));
    $("env-info").textContent = `${env.description || env.domain} — MCP server at ${location.origin}${env.mcp_path}`;
    for (const t of env.mcp_tools || env.tools || []) {
      const li = document.createElement("li");
      li.textContent = t.description ? `${t.name}: ${t.description}` : t.name;
      $("tools").append(li);
    }
  } catch (e) { status(e.message, true); }
}

function controlFromPage() {
  const control = {};
  const facts = $("facts").value.split("\n").map((s) => s.trim()).filter(Boolean);
  if (facts.length) control.world_facts = facts;
  if ($("tool-errors").value.trim()) control.tool_errors = JSON.parse($("tool-errors").value);
  if ($("page-size").value) control.paginate = { page_size: Number($("page-size").value) };
  const hidden = $("hidden").value.split(",").map((s) => s.trim()).filter(Boolean);
  if (hidden.length) control.hide_fields = hidden;
  if ($("instructions").value.trim()) control.instructions = $("instructions").value.trim();
  return control;
}

async function specFromPage() {
  const [kind, name] = $("source").value.split(/:(.*)/s);
  let spec;
  if (kind === "env") {
    const env = await api("GET", "/v1/environments/" + encodeURIComponent(name));
    spec = {};
    for (const k of ["domain", "environment", "tools", "initial_state", "control", "sampling"]) {
      if (env[k] !== undefined && env[k] !== null) spec[k] = env[k];
    }
  } else {
    spec = { domain: name };
    if ($("environment").value.trim()) spec.environment = $("environment").value;
    if ($("tool-defs").value.trim()) spec.tools = JSON.parse($("tool-defs").value);
  }
  const control = controlFromPage();
  if (Object.keys(control).length) spec.control = { ...(spec.control || {}), ...control };
  if ($("max-tokens").value) spec.sampling = { ...(spec.sampling || {}), max_tokens: Number($("max-tokens").value) };
  return spec;
}

function render() {
  const list = $("turns");
  list.textContent = "";
  $("session-id").textContent = current ? `${current.id} · turn ${current.turns.length}` : "none yet";
  for (const b of ["send", "copy-json", "copy-curl", "copy-python"]) $(b).disabled = !current;
  if (!current) return;
  for (const t of current.turns) list.append(turnItem(t));
}

function turnItem(t) {
  const li = document.createElement("li");
  li.className = "turn";
  const block = (who, text, cls) => {
    const label = document.createElement("div");
    label.className = "who";
    label.textContent = who;
    const pre = document.createElement("pre");
    pre.className = cls;
    pre.textContent = text;
    li.append(label, pre);
  };
  block(`Turn ${t.turn} · action`, t.action, "action");
  if (t.reasoning) {
    const d = document.createElement("details");
    const s = document.createElement("summary");
    s.textContent = "Reasoning";
    const pre = document.createElement("pre");
    pre.textContent = t.reasoning;
    d.append(s, pre);
    li.append(d);
  }
  block(t.injected ? "observation (prescribed tool error)" : "observation", t.observation, "observation");
  const fork = document.createElement("button");
  fork.type = "button";
  fork.className = "fork";
  fork.textContent = `Fork at turn ${t.turn}`;
  fork.setAttribute("aria-label", `Fork the session, keeping turns 1 to ${t.turn}`);
  fork.addEventListener("click", () => forkAt(t.turn));
  li.append(fork);
  return li;
}

async function run(label, work) {
  status(label + "…");
  try { await work(); status(label + ": done"); }
  catch (e) { status(e.message, true); }
}

function newSession() {
  return run("Opening a session", async () => {
    current = await api("POST", "/v1/sessions", await specFromPage());
    render();
    $("action").focus();
  });
}

function parseAction(text) {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    try {
      const call = JSON.parse(trimmed);
      if (call && typeof call.name === "string") return { name: call.name, arguments: call.arguments || {} };
    } catch (e) { /* not JSON: the text is the action */ }
  }
  return text;
}

function send() {
  const text = $("action").value;
  if (!current || !text.trim()) return;
  return run(`Simulating turn ${current.turns.length + 1}`, async () => {
    $("send").disabled = true;
    try {
      await api("POST", `/v1/sessions/${current.id}/step`, { action: parseAction(text) });
      current = await api("GET", `/v1/sessions/${current.id}`);
      $("action").value = "";
    } finally {
      render();
      $("action").focus();
    }
  });
}

function forkAt(turn) {
  return run(`Forking at turn ${turn}`, async () => {
    current = await api("POST", `/v1/sessions/${current.id}/fork`, { turn });
    render();
    $("action").focus();
  });
}

function shellQuote(s) { return "'" + s.replace(/'/g, "'\\''") + "'"; }

function py(v) {
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(py).join(", ") + "]";
  return "{" + Object.entries(v).map(([k, x]) => JSON.stringify(k) + ": " + py(x)).join(", ") + "}";
}

function reproduction() {
  const spec = { ...current.spec, metadata: { reproduces: current.id } };
  return { spec, actions: current.turns.map((t) => t.action) };
}

function asCurl() {
  const { spec, actions } = reproduction();
  const lines = [
    "# reproduces session " + current.id + "; the key comes from $AGENTWORLD_SIM_API_KEY",
    `URL=${location.origin}`,
    `K="Authorization: Bearer $AGENTWORLD_SIM_API_KEY"`,
    `SID=$(curl -s "$URL/v1/sessions" -H "$K" -H 'Content-Type: application/json' -d ${shellQuote(JSON.stringify(spec))} | jq -r .id)`,
  ];
  for (const a of actions) {
    lines.push(`curl -s "$URL/v1/sessions/$SID/step" -H "$K" -H 'Content-Type: application/json' -d ${shellQuote(JSON.stringify({ action: a }))}`);
  }
  return lines.join("\n") + "\n";
}

function asPython() {
  const { spec, actions } = reproduction();
  return [
    "# reproduces session " + current.id + "; the key comes from $AGENTWORLD_SIM_API_KEY",
    "import os",
    "",
    "from agentworld.sim import SimClient",
    "",
    `client = SimClient(${py(location.origin)}, os.environ["AGENTWORLD_SIM_API_KEY"])`,
    `session = client.create_session(**${py(spec)})`,
    `for action in ${py(actions)}:`,
    `    turn = client.step(session["id"], action)`,
    `    print(f"--- turn {turn['turn']}: {action}")`,
    `    print(turn["observation"])`,
    "",
  ].join("\n");
}

function copy(kind) {
  return run("Copying as " + kind, async () => {
    if (kind === "JSON") current = await api("GET", `/v1/sessions/${current.id}`);
    const text = kind === "JSON" ? JSON.stringify(current, null, 2) : kind === "curl" ? asCurl() : asPython();
    $("export").value = text;
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text).catch(() => {});
    }
  });
}

$("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const k = $("key").value.trim();
  if (k) sessionStorage.setItem(KEY, k);
  $("key").value = "";
  showKeyState();
  loadEnvironments();
});
$("forget").addEventListener("click", () => { sessionStorage.removeItem(KEY); showKeyState(); loadEnvironments(); });
$("source").addEventListener("change", showSource);
$("new").addEventListener("click", newSession);
$("send").addEventListener("click", send);
$("copy-json").addEventListener("click", () => copy("JSON"));
$("copy-curl").addEventListener("click", () => copy("curl"));
$("copy-python").addEventListener("click", () => copy("Python"));
$("action").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); send(); }
});
showKeyState();
loadEnvironments();
render();
</script>
</body>
</html>
"""
