"""Soak with faults: many sessions step at once for minutes while one simulator replica
and then the session-store actor are killed, on loopback.

Starts a local Ray cluster (4 logical CPUs) and the simulator app (serve/sim_cpu.yaml's
settings, two ingress replicas, ``storage_url`` in a temporary directory) on a tiny
checkpoint. S sessions step in their own threads for --duration-s; at one third of it
one SimIngress replica is killed (Serve replaces it), at two thirds the store actor
(Ray restarts it and it reloads the sessions it wrote). S clients step one session
each at a time and open a new one after --turns-per-session steps (a session's history
must stay inside the model's context). A client retries a failed call (0/5xx) only after
reading back whether it landed: a step is matched against the session's last turn, a
create against the session list (each session carries its client's label in its
metadata), so nothing is sent twice. At the end every session is read and compared with
the steps its client saw acknowledged.

Figures: steps, steps/s, p50/p99 latency of a step (retries included) and of the steps
outside the kill windows, errors inside and outside the windows (by status and error
code), sessions lost (with the status their read got) or duplicated. Goals: 0 sessions
lost, 0 duplicated turns or sessions, 0 errors outside the kill windows, 0 steps failed
after retries. Exit code 1 if a goal is missed.
Writes bench/results/soak.json.

Run:  python bench/bench_soak.py [--sessions 16 --duration-s 240] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from _quick import parse_sized
from _results import goal, write_result
from bench_serve import ROOT, _quantile, tiny_model

KEY = "sk-soak-000000"
APP = "agentworld-sim-soak"
STORE = "agentworld-sim-soak-sessions"
NAMESPACE = "agentworld"
QUICK = {"sessions": 8, "duration_s": 60.0, "window_s": 20.0}
RETRYABLE = {0, 500, 502, 503, 504}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sessions", type=int, default=16)
    p.add_argument("--duration-s", type=float, default=240.0, help="how long sessions step")
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument(
        "--turns-per-session",
        type=int,
        default=12,
        help="steps in one session before its client moves to the next (context budget)",
    )
    p.add_argument(
        "--window-s",
        type=float,
        default=45.0,
        help="a kill window lasts from the kill until this long after every session"
        " stepped again; errors are expected only inside",
    )
    p.add_argument("--retries", type=int, default=30, help="attempts per step before it fails")
    p.add_argument("--model", default=None, help="checkpoint (default: a tiny one built here)")
    return parse_sized(p, QUICK)


def start(model: str, storage: str) -> str:
    import yaml
    from ray import serve

    from agentworld.sim.placement.app import build_app

    config = yaml.safe_load(open(os.path.join(ROOT, "serve", "sim_cpu.yaml")))
    args = config["applications"][0]["args"]
    args["model"] = model
    args["engine"]["max_model_len"] = 1024
    args["auth"] = {"api_keys": {"soak": KEY}, "api_keys_env": None}
    args["limits"].update(rate_per_minute=1e6, burst=100_000, request_timeout_s=60)
    args["limits"]["max_sessions_per_team"] = 1_000_000  # every session is read at the end
    args.update(store_name=STORE, store_namespace=NAMESPACE, storage_url=storage)
    args["ingress_replicas"] = 2
    from agentworld.cluster import init_with_retry

    init_with_retry(
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.path.join(ROOT, "platform")}},
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(build_app(args), name=APP, route_prefix="/")
    return f"http://127.0.0.1:{port}"


def stop() -> None:
    import ray
    from ray import serve

    try:
        serve.shutdown()
        ray.kill(ray.get_actor(STORE, namespace=NAMESPACE))
    finally:
        ray.shutdown()


def call(url: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """(status, JSON body); status 0 when the connection failed."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {KEY}")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=90) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read())
        except ValueError:
            return e.code, {}
    except (OSError, ValueError):
        return 0, {}


class Session:
    """One session's client: steps, retries with read-back, and what it was told."""

    def __init__(self, url: str, index: int, a: argparse.Namespace, log: list) -> None:
        self.url, self.index, self.a, self.log = url, index, a, log
        self.acked: list[str] = []
        self.latencies: list[tuple[float, float]] = []  # (start time, seconds)
        self.failed = 0
        self.id = self._create()

    def _create(self) -> str:
        label = {"soak": f"session-{self.index}"}
        spec = {
            "domain": "terminal",
            "environment": f"bash 5.2 in /home/user{self.index}",
            "metadata": label,
        }
        for attempt in range(self.a.retries):
            status, body = call(self.url, "POST", "/v1/sessions", spec)
            if status == 201:
                return body["id"]
            self._log(status, body)
            if status not in RETRYABLE:
                break
            landed = self._created(label)  # made, but the answer was lost: not made twice
            if landed is not None:
                return landed
            time.sleep(min(0.2 * 2**attempt, 2.0))
        raise RuntimeError(f"session {self.index} could not be created: {status} {body}")

    def _created(self, label: dict[str, str]) -> str | None:
        """The id of the session carrying ``label``, if the failed create made it."""
        for attempt in range(self.a.retries):
            status, listing = call(self.url, "GET", "/v1/sessions")
            if status == 200:
                ids = [s["id"] for s in listing["sessions"] if s.get("metadata") == label]
                return ids[0] if ids else None
            self._log(status, listing)
            time.sleep(min(0.2 * 2**attempt, 2.0))
        raise RuntimeError(f"session {self.index}: the server never answered a listing")

    def step(self, action: str) -> None:
        t0, path = time.monotonic(), f"/v1/sessions/{self.id}/step"
        body = {"action": action, "sampling": {"max_tokens": self.a.max_tokens}}
        for attempt in range(self.a.retries):
            status, answer = call(self.url, "POST", path, body)
            if status == 200:
                break
            self._log(status, answer)
            if status == 409 or status in RETRYABLE:
                if self._landed(action):  # answered late or lost, but stored: not resent
                    break
                time.sleep(min(0.2 * 2**attempt, 2.0))
                continue
            self.failed += 1
            return
        else:
            self.failed += 1
            return
        self.acked.append(action)
        self.latencies.append((t0, time.monotonic() - t0))

    def _log(self, status: int, answer: dict) -> None:
        error = answer.get("error", {}) if isinstance(answer, dict) else {}
        self.log.append((time.monotonic(), self.index, status, error))

    def _landed(self, action: str) -> bool:
        """Whether the failed attempt was stored after all. Asked until the server
        answers: a step resent on a guess could land twice."""
        for attempt in range(self.a.retries):
            status, session = call(self.url, "GET", f"/v1/sessions/{self.id}")
            if status == 200:
                turns = session["turns"]
                return len(turns) == len(self.acked) + 1 and turns[-1]["action"] == action
            self._log(status, session)
            time.sleep(min(0.2 * 2**attempt, 2.0))
        raise RuntimeError(f"session {self.index}: the server never answered a read")


class Client:
    """One thread: a session at a time, ``turns_per_session`` steps each."""

    def __init__(self, url: str, index: int, a: argparse.Namespace, log: list) -> None:
        self.url, self.index, self.a, self.log = url, index, a, log
        self.sessions: list[Session] = []
        self.gave_up: str | None = None  # why the thread stopped early, if it did

    def run(self, until: float) -> None:
        try:
            self._run(until)
        except RuntimeError as e:  # the server never answered a create or a read
            self.gave_up = str(e)

    def _run(self, until: float) -> None:
        while time.monotonic() < until:
            n = len(self.sessions)
            s = Session(self.url, self.index * 100_000 + n, self.a, self.log)
            self.sessions.append(s)
            for k in range(self.a.turns_per_session):
                if time.monotonic() >= until:
                    return
                s.step(f"echo s{s.index}-t{k}")


def kill_replica() -> str:
    import ray

    names = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith(f"SERVE_REPLICA::{APP}#SimIngress#")
    ]
    ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)
    return names[0]


def kill_store() -> str:
    import ray

    ray.kill(ray.get_actor(STORE, namespace=NAMESPACE), no_restart=False)
    return STORE


def read(url: str, path: str, attempts: int = 30) -> tuple[int, dict]:
    """GET ``path``, again while the answer is retryable (a store still restarting
    answers 503): only a definite answer counts."""
    for attempt in range(attempts):
        status, body = call(url, "GET", path)
        if status not in RETRYABLE:
            break
        time.sleep(min(0.2 * 2**attempt, 2.0))
    return status, body


def check(url: str, sessions: list[Session]) -> dict:
    """Every session as the server holds it vs what its client was told."""
    status, listing = read(url, "/v1/sessions")
    listed = [s["id"] for s in listing.get("sessions", [])] if status == 200 else []
    ours = {s.id for s in sessions}
    lost: list[dict] = []
    duplicated = mismatched = 0
    for s in sessions:
        code, record = read(url, f"/v1/sessions/{s.id}")
        if code != 200:
            error = record.get("error", {}) if isinstance(record, dict) else {}
            lost.append({"session": s.index, "acked": len(s.acked), "status": code, **error})
            continue
        actions = [t["action"] for t in record["turns"]]
        duplicated += len(actions) - len(set(actions))
        mismatched += actions != s.acked
    return {
        "list_status": status,
        "sessions_listed": len(listed),
        "sessions_listed_twice": len(listed) - len(set(listed)),
        # Made by a create whose answer was lost and then made again: a duplicate.
        "sessions_unknown_to_clients": len(set(listed) - ours),
        "lost": len(lost),
        "lost_detail": lost[:10],
        "duplicated_turns": duplicated,
        "sessions_not_matching_client": mismatched,
    }


def main() -> int:
    a = parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.time()
        url = start(a.model or tiny_model(tmp), os.path.join(tmp, "sessions"))
        print(f"[soak] simulator up in {time.time() - t0:.0f}s at {url}")
        try:
            result = soak(url, a)
        finally:
            stop()
    return report(a, result)


def soak(url: str, a: argparse.Namespace) -> dict:
    log: list = []
    clients = [Client(url, i, a, log) for i in range(a.sessions)]
    begin = time.monotonic()
    until = begin + a.duration_s
    threads = [threading.Thread(target=c.run, args=(until,)) for c in clients]
    for t in threads:
        t.start()
    kills = []
    for at, what in ((a.duration_s / 3, kill_replica), (2 * a.duration_s / 3, kill_store)):
        time.sleep(max(0.0, begin + at - time.monotonic()))
        kills.append({"at_s": round(time.monotonic() - begin, 2), "killed": what()})
        print(f"[soak] killed {kills[-1]['killed']} at {kills[-1]['at_s']}s")
    for t in threads:
        t.join(timeout=a.duration_s + 600)
    sessions = [s for c in clients for s in c.sessions]
    windows = kill_windows(begin, kills, clients, a.window_s)
    inside = [e for e in log if any(lo <= e[0] <= hi for lo, hi in windows)]
    steady = [
        d for s in sessions for t, d in s.latencies if not any(lo <= t <= hi for lo, hi in windows)
    ]
    every = sorted(d for s in sessions for _, d in s.latencies)
    return {
        "clients": a.sessions,
        "sessions": len(sessions),
        "turns_per_session": a.turns_per_session,
        "duration_s": a.duration_s,
        "kills": kills,
        "windows_s": [[round(lo - begin, 2), round(hi - begin, 2)] for lo, hi in windows],
        "steps": len(every),
        "steps_per_s": round(len(every) / a.duration_s, 3),
        "p50_s": round(_quantile(every, 0.5), 4),
        "p99_s": round(_quantile(every, 0.99), 4),
        "steady_p99_s": round(_quantile(sorted(steady), 0.99), 4),
        "errors_inside_windows": len(inside),
        "errors_outside_windows": len(log) - len(inside),
        "error_codes": sorted({str(e[2]) for e in log}),
        "errors_by_code_inside": _by_code(inside),
        "errors_by_code_outside": _by_code([e for e in log if e not in inside]),
        "first_errors_outside": [
            {"at_s": round(e[0] - begin, 2), "status": e[2], "error": e[3]}
            for e in log
            if e not in inside
        ][:5],
        "sessions_stepped": sum(bool(s.acked) for s in sessions),
        # Clients stop early only when all their sessions are full: then it shows here.
        "last_ack_s": round(max((t + d for t, d in _latencies(sessions)), default=0) - begin, 2),
        "failed_steps": sum(s.failed for s in sessions) + sum(bool(c.gave_up) for c in clients),
        "clients_gave_up": [c.gave_up for c in clients if c.gave_up],
        **check(url, sessions),
    }


def _latencies(sessions: list[Session]) -> list[tuple[float, float]]:
    """(start time, seconds) of every acknowledged step."""
    return [x for s in sessions for x in s.latencies]


def _by_code(entries: list) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in entries:
        key = f"{e[2]} {e[3].get('code') or e[3].get('type') or ''}".strip()
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def kill_windows(begin: float, kills: list, clients: list[Client], grace: float) -> list:
    """From each kill until ``grace`` after every client had a step acknowledged again."""
    windows = []
    for k in kills:
        lo = begin + k["at_s"]
        recovered = [
            min((t + d for s in c.sessions for t, d in s.latencies if t + d > lo), default=lo)
            for c in clients
        ]
        windows.append((lo, max(recovered) + grace))
    return windows


def report(a: argparse.Namespace, r: dict) -> int:
    keys = ("sessions", "steps", "steps_per_s", "p50_s", "p99_s", "steady_p99_s")
    for key in (*keys, "errors_by_code_inside", "errors_by_code_outside"):
        print(f"[soak] {key}: {r[key]}")
    print(
        f"[soak] errors inside/outside the kill windows: {r['errors_inside_windows']}"
        f"/{r['errors_outside_windows']}; failed steps {r['failed_steps']}; lost {r['lost']};"
        f" duplicated turns {r['duplicated_turns']}; mismatched {r['sessions_not_matching_client']}"
    )
    goals = [
        goal(
            "sessions_lost", r["lost"], "<=", 0, "no session lost across a replica and a store kill"
        ),
        goal(
            "duplicates",
            r["duplicated_turns"]
            + r["sessions_listed_twice"]
            + r["sessions_unknown_to_clients"]
            + r["sessions_not_matching_client"],
            "<=",
            0,
            "no turn or session duplicated: every session holds exactly the acknowledged steps",
        ),
        goal(
            "errors_outside_kill_windows",
            r["errors_outside_windows"],
            "<=",
            0,
            "errors only while a replica or the store restarts",
        ),
        goal("failed_steps", r["failed_steps"], "<=", 0, "every error was retried to success"),
    ]
    print(f"[soak] -> {write_result('soak', {'bench': 'soak', 'quick': a.quick, **r}, goals)}")
    return 0 if all(g["met"] for g in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
