"""Validate, render or sync the KubeRay deployment under k8s/.

Run (from the repository root; `make k8s-validate` runs the first):
  python -m agentworld.deploy validate              # every overlay, every manifest
  python -m agentworld.deploy render k8s/overlays/cpu/jobs
  python -m agentworld.deploy sync-serve            # copy serve/ configs into RayServices
The KubeRay CRDs are read from ../shared/kuberay-crds (or $AGENTWORLD_KUBERAY_CRDS).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from agentworld.deploy.kustomize import build
from agentworld.deploy.rayconfig import sync_serve_configs
from agentworld.deploy.validate import overlay_dirs, validate


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m agentworld.deploy",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--root", type=Path, default=Path("."), help="repository root")
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="check the image build file and every overlay")
    v.add_argument("--crds", type=Path, help="folder with the KubeRay CRD files")
    r = sub.add_parser("render", help="print an overlay's objects as YAML (like kubectl kustomize)")
    r.add_argument("overlay", type=Path)
    sub.add_parser("sync-serve", help="copy each RayService's serve/ config into its serveConfigV2")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "render":
        docs = [r.doc for r in build(args.overlay).resources]
        sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=False))
        return 0
    if args.command == "sync-serve":
        for path in sync_serve_configs(args.root):
            print(f"[deploy] updated {path}")
        return 0

    problems = validate(args.root, crd_dir=args.crds)
    for p in problems:
        print(p, file=sys.stderr)
    overlays = len(overlay_dirs(args.root.resolve()))
    print(f"[deploy] {overlays} overlays checked: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
