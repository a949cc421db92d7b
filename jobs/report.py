"""report: rebuild the report of a run directory, a partial one included (a stage that
has not run or not finished is shown as missing).

Writes <run>/report/index.html (self-contained: inline style, PNG figures beside it),
<run>/report/report.md and the PNGs: data per domain, loss curves, RL rewards, KL and
sync share, fidelity beside the baselines, serve latencies, time per stage, artifacts,
recipe and versions.

Run:  python jobs/report.py --run runs/demo
"""

from __future__ import annotations

import argparse
import sys

from agentworld.cli import run_job, url


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--run", type=url, required=True, help="run directory (path or URL)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from agentworld.console import say
    from agentworld.io import exists
    from agentworld.report import build_report

    if not exists(args.run):
        raise SystemExit(f"report: --run {args.run} does not exist")
    say(f"[report] {build_report(args.run)}/index.html")
    return 0


if __name__ == "__main__":
    sys.exit(run_job("report", main))
