"""Per-episode settings of the recorded environments: what real machines differ in and
a world model must not memorize as constants (user and host names, the prompt, home and
working directories, time zone and locale, terminal width, git identity, the share of
the search corpus that is indexed).

An episode's settings are drawn from its own RNG (see ``playbook.pick_task``): the same
seed gives the same settings, other seeds give others. ``DEFAULT`` is the fixed sandbox
the recorders used before (``agent@sandbox`` in /home/agent): what a task without drawn
settings gets.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

USERS = ("agent", "ana", "dev", "kenji", "maria", "ops", "priya", "runner", "sam", "ubuntu")
HOSTS = ("sandbox", "lab7", "build-03", "devbox", "ip-10-0-3-17", "mbp", "node2", "ws-114")
# Bash prompt strings with {user} and {host} filled in; \w is the working directory
# (~ for HOME), \W its last part. Literal names: \u would print the namespace's root.
PROMPTS = (
    "{user}@{host}:\\w$ ",
    "[{user}@{host} \\W]$ ",
    "{host}:\\w {user}$ ",
    "{user}@{host} \\w % ",
    "\\w$ ",
    "$ ",
    "({host}) \\W > ",
)
HOMES = ("/home/{user}", "/home/{user}", "/srv/{user}", "/workspace/{user}")
WORKDIRS = ("", "", "work", "projects/{project}", "src/{project}", "tmp-{project}")
PROJECTS = ("atlas", "beacon", "cedar", "dune", "ember", "fjord", "grove", "helix")
TIMEZONES = (
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "America/Sao_Paulo",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Australia/Sydney",
    "Africa/Nairobi",
)
LOCALES = ("C.UTF-8", "C.UTF-8", "POSIX")
COLUMNS = (80, 80, 100, 120, 132, 160, 200)
GIT_DATES = ("2024-03-11T10:12:00", "2025-07-02T16:45:00", "2026-01-05T09:00:00")


@dataclass(frozen=True, kw_only=True)
class Variety:
    user: str
    host: str
    home: str
    """Absolute HOME inside the sandbox."""
    workdir: str
    """Where the episode starts: HOME or a directory below it (absolute)."""
    prompt: str
    """Bash PS1 as shown (before the recorder's hidden end-of-output marker)."""
    timezone: str
    locale: str
    columns: int
    """Terminal width (the pty's window size)."""
    git_date: str
    search_share: float
    """Share of the search corpus's modules that this episode's index holds."""

    def env(self) -> dict[str, str]:
        """Environment variables of the episode's processes."""
        email = f"{self.user}@{self.host}"
        date = f"{self.git_date}+00:00"
        return {
            "HOME": self.home,
            "USER": self.user,
            "LOGNAME": self.user,
            "TZ": self.timezone,
            "LANG": self.locale,
            "LC_ALL": self.locale,
            "COLUMNS": str(self.columns),
            "GIT_AUTHOR_NAME": self.user,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": self.user,
            "GIT_COMMITTER_EMAIL": email,
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_DATE": date,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, state: dict[str, Any]) -> Variety:
        """The settings a task's state carries, else DEFAULT."""
        got = state.get("variety")
        return DEFAULT if got is None else cls(**got)


DEFAULT = Variety(
    user="agent",
    host="sandbox",
    home="/home/agent",
    workdir="/home/agent",
    prompt="agent@sandbox:\\w$ ",
    timezone="UTC",
    locale="C.UTF-8",
    columns=80,
    git_date="2026-01-05T09:00:00",
    search_share=1.0,
)


def draw_variety(rng: random.Random) -> Variety:
    """One episode's settings."""
    user, host = rng.choice(USERS), rng.choice(HOSTS)
    home = rng.choice(HOMES).format(user=user)
    sub = rng.choice(WORKDIRS).format(project=rng.choice(PROJECTS))
    return Variety(
        user=user,
        host=host,
        home=home,
        workdir=f"{home}/{sub}" if sub else home,
        prompt=rng.choice(PROMPTS).format(user=user, host=host),
        timezone=rng.choice(TIMEZONES),
        locale=rng.choice(LOCALES),
        columns=rng.choice(COLUMNS),
        git_date=rng.choice(GIT_DATES),
        search_share=rng.choice((0.5, 0.7, 0.85, 1.0)),
    )
