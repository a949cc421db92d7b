"""Progress of a run on the driver. Rank 0 sends every step's metrics, and Ray Train's
controller (an actor) every kept checkpoint and worker failure, into a queue; the
driver drains it in a thread, logs every step to wandb (offline by default) and keeps
the history that goes into the manifest. The person at the terminal gets a step line
at most every few seconds (and always the first step, the last, each held-out loss),
plus every checkpoint and failure: 700 SFT steps are not 700 lines."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentworld.console import Every, duration, say


@dataclass
class History:
    """What the driver saw: per-step train and held-out losses, checkpoints, failures."""

    loss: dict[int, float] = field(default_factory=dict)
    eval_loss: dict[int, float] = field(default_factory=dict)
    checkpoints: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    resumed_from: list[int] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)


def progress_line(
    stage: str, m: dict[str, Any], checkpoint: str | None, left_s: float | None = None
) -> str:
    parts = [f"[{stage}] step {m.get('step', 0)}/{m.get('max_steps', '?')}"]
    if "loss" in m:
        parts.append(f"loss {m['loss']:.4f} lb {m['load_balance_loss']:.4f} lr {m['lr']:.2e}")
        parts.append(f"{m['tokens_per_s']:.0f} tok/s")
    if "eval_loss" in m:
        parts.append(f"eval {m['eval_loss']:.4f}")
    if checkpoint:
        parts.append(f"ckpt {checkpoint.rstrip('/').rsplit('/', 1)[-1]}")
    if left_s is not None:
        parts.append(f"about {duration(left_s)} left")
    return " | ".join(parts)


class Progress:
    """Drains the queue on a thread while ``trainer.fit()`` runs."""

    def __init__(
        self,
        stage: str,
        queue,
        *,
        wandb_run=None,
        log: Callable[[str], None] = say,
        on_event: Callable[[dict], None] | None = None,
        every_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``every_s``: the least time between two plain step lines; ``clock``: seconds
        (a test's own)."""
        self.stage, self.queue, self.wandb_run, self.log = stage, queue, wandb_run, log
        self.on_event, self.clock = on_event, clock
        self._every = Every(every_s, clock)
        self.history = History()
        self._first: tuple[int, float] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{stage}-progress", daemon=True)

    def _left(self, m: dict[str, Any]) -> float | None:
        """Seconds left at the rate of the steps seen in this process, counted from its
        first training step: not from the held-out loss before it, as the first step's
        warm-up would then weigh on the rate (the demo's SFT showed "about 4h14m left"
        at step 1 of a 10-minute run). A resumed run starts counting at its first step."""
        step, total = int(m.get("step", 0)), m.get("max_steps")
        now = self.clock()
        if self._first is None:
            if "loss" in m:
                self._first = (step, now)
            return None
        done = step - self._first[0]
        if not total or done <= 0 or step >= int(total):
            return None
        return (int(total) - step) * (now - self._first[1]) / done

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._drain(block=False)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._drain(block=True)

    def _drain(self, *, block: bool) -> None:
        # not at the top: it brings ray into this light module
        from agentworld.train.placement import next_event

        while (event := next_event(self.queue, block=block)) is not None:
            self.handle(event)

    def handle(self, event: dict[str, Any]) -> None:
        h = self.history
        if event["kind"] == "failure":
            h.failures.append(event)
            self.log(f"[{self.stage}] worker failure on ranks {event['ranks']}: {event['error']}")
        elif event["kind"] == "checkpoint":  # after its step's report, once Ray Train kept it
            h.checkpoints.append(event["checkpoint"])
            m = event["metrics"]
            self.log(
                progress_line(
                    self.stage, {k: m.get(k) for k in ("step", "max_steps")}, event["checkpoint"]
                )
            )
        else:
            m = event["metrics"]
            step = int(m.get("step", 0))
            if m.get("resumed_from_step") and m["resumed_from_step"] not in h.resumed_from:
                h.resumed_from.append(int(m["resumed_from_step"]))
            if "loss" in m:
                h.loss[step] = float(m["loss"])
            if "eval_loss" in m:
                h.eval_loss[step] = float(m["eval_loss"])
            h.last = m
            left = self._left(m)
            # A line for the first step seen, the last, each held-out loss, and otherwise
            # at most every ``every_s``.
            total = m.get("max_steps")
            final = total is not None and step >= int(total)
            if self._every.due(force=final or "eval_loss" in m):
                self.log(progress_line(self.stage, m, None, left))
            if self.wandb_run is not None:
                self.wandb_run.log(
                    {k: v for k, v in m.items() if isinstance(v, int | float)}, step=step
                )
        if self.on_event is not None:
            self.on_event(event)
