"""The run report: ``<run>/report/index.html`` (self-contained, PNG figures beside it)
and ``<run>/report/report.md``, built from the manifests and metrics a pipeline run
leaves behind. A partial run gives a partial report: a missing stage is shown as missing.

    python jobs/report.py --run runs/demo
"""

from agentworld.report.build import build_report

__all__ = ["build_report"]
