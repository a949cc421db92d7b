"""Every command line the README, CONTRIBUTING.md and the docs pages (docs/*.md) give, in
a code block or inline, is accepted by its job's own parser (no work is done), so the
documentation and the code cannot drift; the same line with an unknown flag appended is
rejected by the job and by the KubeRay entrypoint check (`make k8s-validate`). Every
`make TARGET` they name exists, and its job line parses too."""

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
PAGES = {
    "README.md": README,
    "CONTRIBUTING.md": (ROOT / "CONTRIBUTING.md").read_text(),
    **{f"docs/{p.name}": p.read_text() for p in sorted((ROOT / "docs").glob("*.md"))},
}
"""Every page whose commands are checked, by its path from the repository root."""
STAGE_PAGES = {
    "docs/collect.md": {"collect"},
    "docs/prepare.md": {"prepare"},
    "docs/train.md": {"cpt", "sft"},
    "docs/rl.md": {"rl"},
    "docs/evaluate.md": {"evaluate"},
    "docs/serve.md": {"serve"},
    "docs/agent.md": {"agent"},
    "docs/index.md": {"demo", "report"},
}
"""The jobs each page is about: it must show a command line of each."""
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


def inline_code(text: str) -> list[str]:
    """The inline code spans of the prose (outside fenced blocks), a span broken over
    lines joined."""
    prose, block = [], False
    for raw in text.splitlines():
        if raw.strip().startswith("```"):
            block = not block
            continue
        prose.append("" if block else raw)
    paragraphs = "\n".join(prose).split("\n\n")
    return [
        span.strip() for p in paragraphs for span in re.findall(r"`([^`]+)`", p.replace("\n", " "))
    ]


def job_commands(text: str) -> list[list[str]]:
    """argv (from ``jobs/...``) of every ``python jobs/...`` line, in a code block or an
    inline span, on its own or after ``ray job submit ... --``; environment assignments
    before the command are dropped, and a template (``jobs/<stage>.py``) is no command."""
    out = []
    shell = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:python3? jobs/|ray job submit )")
    for line in code_lines(text) + inline_code(text):
        if not shell.match(line):
            continue
        argv = shlex.split(line)
        while argv and re.fullmatch(r"[A-Z_]+=.*", argv[0]):
            argv = argv[1:]
        if "--" in argv and argv[:3] == ["ray", "job", "submit"]:
            argv = argv[argv.index("--") + 1 :]
        if len(argv) >= 2 and argv[0] in ("python", "python3") and argv[1].startswith("jobs/"):
            if "<" not in argv[1]:
                out.append(argv[1:])
    return out


def make_targets(text: str) -> list[str]:
    """Every ``make TARGET`` a page names: an inline span in prose, or a code line."""
    make = re.compile(r"^(?:[A-Z_]+=\S+ )*make ([a-z][a-z0-9-]*)")
    spans = inline_code(text) + code_lines(text)
    return sorted({m.group(1) for span in spans if (m := make.match(span))})


def recipe_of(target: str) -> list[str]:
    """The recipe lines of a Makefile target (empty when it has none)."""
    lines = MAKEFILE.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(rf"^{re.escape(target)}:(?!=)", line)]
    assert starts, f"the docs name `make {target}`, which the Makefile does not define"
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


README_JOBS = job_commands(README)
DOC_JOBS = [(page, argv) for page, text in PAGES.items() for argv in job_commands(text)]
DOC_TARGETS = sorted({target for text in PAGES.values() for target in make_targets(text)})


def named_jobs(text: str) -> set[str]:
    """The jobs a page shows a command line of, directly or through a make target."""
    direct = {Path(argv[0]).stem for argv in job_commands(text)}
    made = {Path(a[0]).stem for t in make_targets(text) for a in make_job_commands(t)}
    return direct | made


def test_the_readme_has_job_lines_for_every_stage():
    named = {Path(argv[0]).stem for argv in README_JOBS}
    assert {"collect", "prepare", "cpt", "sft", "rl", "evaluate", "serve", "demo", "report"} <= (
        named | {Path(a[0]).stem for t in make_targets(README) for a in make_job_commands(t)}
    ), named


@pytest.mark.parametrize("page", sorted(STAGE_PAGES))
def test_each_stage_page_shows_its_jobs_command_lines(page):
    assert page in PAGES, f"{page} is missing"
    missing = STAGE_PAGES[page] - named_jobs(PAGES[page])
    assert not missing, f"{page} shows no command line of jobs {sorted(missing)}"


def test_the_docs_show_every_job():
    jobs = {p.stem for p in (ROOT / "jobs").glob("*.py")}
    shown = set().union(*(named_jobs(text) for text in PAGES.values()))
    assert jobs <= shown, f"no page shows a command line of {sorted(jobs - shown)}"


@pytest.mark.parametrize(
    "page,argv", DOC_JOBS, ids=[f"{page}: {' '.join(a)}"[:100] for page, a in DOC_JOBS]
)
def test_doc_job_line_parses_and_an_unknown_flag_is_rejected(page, argv, capsys):
    ok, why = parses(argv)
    assert ok, f"{page} line `python {' '.join(argv)}` is refused by its parser ({why})"
    ok, _ = parses([*argv, *BOGUS])
    assert not ok, f"`python {' '.join(argv)} --bogus-flag 1` was accepted"
    assert "unrecognized arguments: --bogus-flag" in capsys.readouterr().err
    entry, problems = check_entrypoint(shlex.join(["python", *argv, *BOGUS]), ROOT)
    assert any("rejects its arguments" in str(p) for p in problems), problems


@pytest.mark.parametrize("target", DOC_TARGETS)
def test_doc_make_target_exists_and_its_job_line_parses(target):
    for argv in make_job_commands(target):
        ok, why = parses(argv)
        assert ok, f"`make {target}` runs `{' '.join(argv)}`, which its parser refuses ({why})"


def test_commands_are_found_in_code_blocks_and_inline():
    page = (
        "Run `python jobs/rl.py --data d --init i --out o` or\n"
        "`make\ndocs`, a template `python jobs/<stage>.py ...`:\n\n"
        "```bash\n"
        "ray job submit --working-dir . -- python jobs/cpt.py --data d \\\n"
        "    --out o   # a comment\n"
        "make test\n"
        "```\n"
    )
    assert job_commands(page) == [
        ["jobs/cpt.py", "--data", "d", "--out", "o"],
        ["jobs/rl.py", "--data", "d", "--init", "i", "--out", "o"],
    ]
    assert make_targets(page) == ["docs", "test"]


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
