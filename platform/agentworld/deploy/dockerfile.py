"""Static checks of the image build file (no docker engine is needed): a Ray GPU base
image of the Ray version pinned in pyproject.toml, sources that exist in the build context
(the repository root), our package installed with its ``gpu`` extra, and the folder the
RayJobs' runtime envs use as ``working_dir``."""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

from agentworld.deploy.problems import Problem

_ARG_REF = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_EXTRAS = re.compile(r"""pip[0-9.]* install\b[^&;|]*?["']?\.\[([\w,-]+)\]""")


@dataclasses.dataclass
class Stage:
    """One build stage: its base image, working folder and the extras it installs."""

    name: str
    base: str
    workdir: str | None = None
    extras: set[str] = dataclasses.field(default_factory=set)


def instructions(text: str) -> list[tuple[int, str, str]]:
    """(line number, INSTRUCTION, arguments) with continuation lines joined."""
    out, buf, start = [], "", 0
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if not buf:
            start = n
        if stripped.startswith("#"):
            continue  # comments inside a continued instruction
        buf += " " + stripped.removesuffix("\\") if buf else stripped.removesuffix("\\")
        if not stripped.endswith("\\"):
            word, _, rest = buf.strip().partition(" ")
            out.append((start, word.upper(), rest.strip()))
            buf = ""
    return out


def check_dockerfile(
    path: Path, repo_root: Path, *, ray_version: str
) -> tuple[list[Stage], list[Problem]]:
    """The build stages (the last one is the default target) and the problems found.
    Every stage must start from Ray ``ray_version`` and set the same absolute WORKDIR;
    the default target must be a GPU image that installs the ``gpu`` extra."""
    if not path.is_file():
        return [], [Problem("", "the image build file is missing")]
    args: dict[str, str] = {}
    stages: list[Stage] = []
    problems: list[Problem] = []
    for line, word, rest in instructions(path.read_text()):
        where = f"line {line}"
        if word == "ARG":
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip().strip('"')
        elif word == "FROM":
            parts = rest.split()
            base = _ARG_REF.sub(lambda m: args.get(m[1] or m[2], m[0]), parts[0])
            stages.append(
                Stage(
                    parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else str(len(stages)),
                    base,
                )
            )
            problems += _base_problems(base, ray_version, where)
        elif not stages:
            continue
        elif word == "WORKDIR":
            stages[-1].workdir = rest
        elif word in ("COPY", "ADD"):
            problems += _source_problems(rest, repo_root, where)
        elif word == "RUN":
            stages[-1].extras |= {e for m in _EXTRAS.finditer(rest) for e in m[1].split(",")}
    return stages, problems + _stage_problems(stages)


def _stage_problems(stages: list[Stage]) -> list[Problem]:
    if not stages:
        return [Problem("FROM", "no base image")]
    problems = []
    final = stages[-1]
    if not re.search(r"-(gpu|cu\d+)$", final.base):
        problems.append(
            Problem(f"FROM {final.base}", "the default (last) stage must be a Ray GPU image")
        )
    if "gpu" not in final.extras:
        problems.append(
            Problem(
                f"stage {final.name}",
                "installs no `.[gpu]`: the package and its gpu extra are missing",
            )
        )
    for stage in stages:
        if not stage.workdir or not stage.workdir.startswith("/"):
            problems.append(
                Problem(
                    f"stage {stage.name}", "must set an absolute WORKDIR (the RayJobs' working_dir)"
                )
            )
        elif stage.workdir != final.workdir:
            problems.append(
                Problem(
                    f"stage {stage.name}", f"WORKDIR {stage.workdir} differs from {final.workdir}"
                )
            )
    return problems


def _base_problems(base: str, ray_version: str, where: str) -> list[Problem]:
    repo, _, tag = base.partition(":")
    if repo != "rayproject/ray":
        return [Problem(f"FROM ({where})", f"{base!r} is not a rayproject/ray image")]
    problems = []
    if not tag.startswith(f"{ray_version}-"):
        problems.append(
            Problem(
                f"FROM ({where})",
                f"tag {tag!r} is not Ray {ray_version} (pinned in pyproject.toml)",
            )
        )
    return problems


def _source_problems(rest: str, repo_root: Path, where: str) -> list[Problem]:
    words = [w for w in shlex.split(rest) if not w.startswith("--")]
    if any(w.startswith("--from") for w in shlex.split(rest)) or len(words) < 2:
        return []
    return [
        Problem(
            f"COPY ({where})", f"{src!r} does not exist in the build context (the repository root)"
        )
        for src in words[:-1]
        if not list(repo_root.glob(src.rstrip("/") or "."))
    ]
