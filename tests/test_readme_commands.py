"""Every command line the README gives is accepted by its job's own parser (no work is
done), so README and code cannot drift; the same line with an unknown flag appended is
rejected by the job and by the KubeRay entrypoint check (`make k8s-validate`)."""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from agentworld.deploy.crd import default_crd_dir
from agentworld.deploy.entrypoint import check_entrypoint
from agentworld.deploy.validate import validate

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
MAKEFILE = (ROOT / "Makefile").read_text()
BOGUS = ["--bogus-flag", "1"]


def code_lines(text: str) -> list[str]:
    """Lines of the fenced code blocks, continuation backslashes joined, comments cut."""
    lines, block, joined = [], False, ""
    for raw in text.splitlines():
        if raw.strip().startswith("```"):
            block = not block
            continue
        if not block:
            continue
        joined += raw.rstrip().removesuffix("\\") + " "
        if raw.rstrip().endswith("\\"):
            continue
        line = re.sub(r"\s+#\s.*$", "", joined).strip()
        joined = ""
        if line:
            lines.append(line)
    return lines


def job_commands() -> list[list[str]]:
    """argv (from ``jobs/...``) of every ``python jobs/...`` line, on its own or after
    ``ray job submit ... --``; environment assignments before the command are dropped."""
    out = []
    shell = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:python3? jobs/|ray job submit )")
    for line in code_lines(README):
        if not shell.match(line):
            continue
        argv = shlex.split(line)
        while argv and re.fullmatch(r"[A-Z_]+=.*", argv[0]):
            argv = argv[1:]
        if "--" in argv and argv[:3] == ["ray", "job", "submit"]:
            argv = argv[argv.index("--") + 1 :]
        if len(argv) >= 2 and argv[0] in ("python", "python3") and argv[1].startswith("jobs/"):
            out.append(argv[1:])
    return out


def make_targets() -> list[str]:
    """Every ``make TARGET`` the README names: inline code in prose, or a code line."""
    inline = re.findall(r"`(?:[A-Z_]+=\S+ )*make ([a-z][a-z0-9-]*)[^`]*`", README)
    lines = [
        m.group(1)
        for line in code_lines(README)
        if (m := re.match(r"make ([a-z][a-z0-9-]*)", line))
    ]
    return sorted(set(inline + lines))


def recipe_of(target: str) -> list[str]:
    """The recipe lines of a Makefile target (empty when it has none)."""
    lines = MAKEFILE.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(rf"^{re.escape(target)}:(?!=)", line)]
    assert starts, f"README names `make {target}`, which the Makefile does not define"
    recipe = []
    for line in lines[starts[-1] + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def make_job_commands(target: str) -> list[list[str]]:
    """``jobs/<x>.py ...`` argv of the target's recipe, Makefile defaults substituted."""
    defaults = dict(re.findall(r"^([A-Z_]+) \?= (.*)$", MAKEFILE, flags=re.M))
    out = []
    for line in recipe_of(target):
        line = re.sub(r"\$\(([A-Z_]+)\)", lambda m: defaults.get(m.group(1), ""), line)
        argv = shlex.split(line)
        jobs = [i for i, a in enumerate(argv) if a.startswith("jobs/") and a.endswith(".py")]
        if jobs:
            out.append(argv[jobs[0] :])
    return out


def load_job(path: str):
    spec = importlib.util.spec_from_file_location(f"_readme_{Path(path).stem}", ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parses(argv: list[str]) -> tuple[bool, str]:
    parse_args = getattr(load_job(argv[0]), "parse_args", None)
    assert parse_args is not None, f"{argv[0]} has no module-level parse_args"
    try:
        parse_args(argv[1:])
    except SystemExit as e:
        return False, f"exit {e.code}"
    return True, ""


README_JOBS = job_commands()


def test_the_readme_has_job_lines_for_every_stage():
    named = {Path(argv[0]).stem for argv in README_JOBS}
    assert {"collect", "prepare", "cpt", "sft", "rl", "evaluate", "serve", "demo", "report"} <= (
        named | {Path(a[0]).stem for t in make_targets() for a in make_job_commands(t)}
    ), named


@pytest.mark.parametrize("argv", README_JOBS, ids=[" ".join(a)[:80] for a in README_JOBS])
def test_readme_job_line_parses_and_an_unknown_flag_is_rejected(argv, capsys):
    ok, why = parses(argv)
    assert ok, f"README line `python {' '.join(argv)}` is refused by its parser ({why})"
    ok, _ = parses([*argv, *BOGUS])
    assert not ok, f"`python {' '.join(argv)} --bogus-flag 1` was accepted"
    assert "unrecognized arguments: --bogus-flag" in capsys.readouterr().err
    entry, problems = check_entrypoint(shlex.join(["python", *argv, *BOGUS]), ROOT)
    assert any("rejects its arguments" in str(p) for p in problems), problems


@pytest.mark.parametrize("target", make_targets())
def test_readme_make_target_exists_and_its_job_line_parses(target):
    for argv in make_job_commands(target):
        ok, why = parses(argv)
        assert ok, f"`make {target}` runs `{' '.join(argv)}`, which its parser refuses ({why})"


def test_a_rayjob_carrying_an_unknown_flag_fails_validation(tmp_path):
    for name in ("k8s", "jobs", "serve"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "platform").symlink_to(ROOT / "platform")
    crds = default_crd_dir(ROOT)
    assert [str(p) for p in validate(tmp_path, crd_dir=crds)] == []
    for stage in ("cpt", "sft"):
        path = tmp_path / "k8s" / "base" / "jobs" / f"rayjob-{stage}.yaml"
        docs = list(yaml.safe_load_all(path.read_text()))
        docs[0]["spec"]["entrypoint"] += " --bogus-flag 1"
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    problems = [str(p) for p in validate(tmp_path, crd_dir=crds)]
    for stage in ("cpt", "sft"):
        assert any(
            f"jobs/{stage}.py rejects its arguments" in p and "--bogus-flag" in p for p in problems
        ), problems
