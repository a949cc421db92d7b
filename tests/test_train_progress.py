"""The training progress a person sees: rate-limited step lines that still show the
first and last step, each held-out loss, every checkpoint and failure, while the
history (the manifest's figures) keeps every step."""

from __future__ import annotations

from agentworld.train.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _step(step: int, **extra: float) -> dict:
    m = {"step": step, "max_steps": 100, "loss": 1.0, "load_balance_loss": 2.0, "lr": 1e-3}
    return {"kind": "metrics", "metrics": {**m, "tokens_per_s": 900.0, **extra}}


def test_a_long_run_prints_a_step_line_every_few_seconds_and_keeps_every_step():
    clock, lines = Clock(), []
    progress = Progress("sft", queue=None, log=lines.append, every_s=5.0, clock=clock)
    for step in range(1, 101):
        clock.now += 1.0  # a step a second
        extra = {"eval_loss": 1.5} if step % 50 == 0 else {}
        progress.handle(_step(step, **extra))
        if step == 60:
            progress.handle({"kind": "failure", "ranks": [1], "error": "died"})
        if step == 100:
            ckpt = {"kind": "checkpoint", "checkpoint": "/x/step-000100", "metrics": {"step": 100}}
            progress.handle(ckpt | {"metrics": {"step": 100, "max_steps": 100}})
    steps = [int(line.split()[2].split("/")[0]) for line in lines if "| loss" in line]
    assert steps[0] == 1 and steps[-1] == 100 and 50 in steps
    assert len(steps) <= 100 / 5 + 3, steps  # not one line per step
    assert all(b - a <= 5 for a, b in zip(steps, steps[1:], strict=False)), steps
    assert "[sft] worker failure on ranks [1]: died" in lines
    assert "[sft] step 100/100 | ckpt step-000100" in lines
    assert sorted(progress.history.loss) == list(range(1, 101))
    assert progress.history.eval_loss == {50: 1.5, 100: 1.5}


def test_the_time_left_counts_from_the_first_training_step():
    """A held-out loss at step 0, then a first step slowed by warm-up (100 s), then a
    step a second: the time left is the steps left at a second each, not 10x that."""
    clock, lines = Clock(), []
    progress = Progress("sft", queue=None, log=lines.append, every_s=5.0, clock=clock)
    progress.handle({"kind": "metrics", "metrics": {"step": 0, "max_steps": 100, "eval_loss": 3.8}})
    clock.now = 100.0
    progress.handle(_step(1))
    for step in range(2, 12):
        clock.now += 1.0
        progress.handle(_step(step))
    assert "left" not in lines[1], lines  # step 1: no rate yet
    assert lines[-1].startswith("[sft] step 11/100") and lines[-1].endswith("about 1m29s left")
