"""The KubeRay deployment under k8s/, checked offline: an offline renderer for the
kustomize features the overlays use, the CRD schemas (``ray.io/v1``) applied the way the
API server applies them, KubeRay's own rules, Ray's runtime-env and Serve schemas, job
entrypoints against jobs/ and the recipes, and credentials kept in Secrets.

    python -m agentworld.deploy validate      # or: make k8s-validate
"""

from agentworld.deploy.kustomize import KustomizeError, build
from agentworld.deploy.problems import Problem
from agentworld.deploy.validate import overlay_dirs, validate

__all__ = ["KustomizeError", "Problem", "build", "overlay_dirs", "validate"]
