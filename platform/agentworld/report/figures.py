"""The report's PNG figures (matplotlib, Agg). Each returns PNG bytes, or None when
its stage left nothing to draw."""

from __future__ import annotations

import io
from typing import Any


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _figure(ncols: int = 1, width: float = 7.0):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(1, ncols, figsize=(width, 3.4), squeeze=False)


def loss_curves(found: dict[str, dict | None]) -> bytes | None:
    """Train and held-out loss per step, one panel per stage (cpt, sft)."""
    stages = [s for s in ("cpt", "sft") if found.get(s)]
    if not stages:
        return None
    fig, axes = _figure(len(stages), width=4.2 * len(stages))
    for ax, stage in zip(axes[0], stages, strict=True):
        c = found[stage]["counts"]
        for key, label, style in (("loss", "train", "-"), ("eval_loss", "held-out", "o--")):
            points = sorted((int(k), v) for k, v in c.get(key, {}).items())
            if points:
                ax.plot(*zip(*points, strict=True), style, label=label)
        ax.set_title(stage)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend()
    return _png(fig)


def rl_curves(rows: list[dict[str, Any]]) -> bytes | None:
    """Reward components per step; KL and weight-sync share per step."""
    if not rows:
        return None
    fig, axes = _figure(2, width=9.0)
    ax_r, ax_k = axes[0]
    steps = [r["step"] for r in rows]
    # not at the top: agentworld.report imports this module (a cycle)
    from agentworld.report.sections import reward_keys

    for key in reward_keys(rows):
        ax_r.plot(steps, [r.get(key) for r in rows], marker=".", label=key.removeprefix("reward/"))
    ax_r.set_title("reward components")
    ax_r.set_xlabel("step")
    ax_r.legend(fontsize=7)
    ax_k.plot(steps, [r.get("learner/kl", 0) for r in rows], marker=".", label="KL")
    ax_s = ax_k.twinx()
    ax_s.plot(steps, [100 * r.get("time/sync_share", 0) for r in rows], "g--", label="sync %")
    ax_k.set_title("KL (left), weight-sync share of step % (right)")
    ax_k.set_xlabel("step")
    return _png(fig)


def fidelity_bars(summary: dict[str, Any] | None, metric: str = "char_f1") -> bytes | None:
    """``metric`` per domain: the model beside each baseline."""
    if not summary:
        return None
    domains = list(summary["domains"])
    series = [(summary["model"], summary["domains"])]
    series += list(summary.get("baselines", {}).items())
    fig, axes = _figure(1, width=max(6.0, 1.4 * len(domains) + 2))
    ax = axes[0][0]
    width = 0.8 / len(series)
    for i, (name, per_domain) in enumerate(series):
        values = [(per_domain.get(d) or {}).get("rule", {}).get(metric) or 0 for d in domains]
        ax.bar([x + i * width for x in range(len(domains))], values, width, label=name)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(domains))], domains)
    ax.set_ylabel(f"{metric} (0-100)")
    ax.legend(fontsize=8)
    return _png(fig)


def stage_times(timings: dict[str, Any]) -> bytes | None:
    """Seconds per stage of the last pipeline run."""
    stages = [(k, v.get("seconds", 0)) for k, v in timings.items()]
    if not stages:
        return None
    fig, axes = _figure(1)
    ax = axes[0][0]
    ax.barh([k for k, _ in stages][::-1], [s for _, s in stages][::-1])
    ax.set_xlabel("seconds")
    return _png(fig)
