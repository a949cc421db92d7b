"""``--quick``: the same benchmark at small sizes (``make bench-quick``, all of them in
under 10 minutes on a 2-core machine). Sizes given on the command line still win."""

from __future__ import annotations

import argparse
from typing import Any


def parse_sized(
    parser: argparse.ArgumentParser, quick: dict[str, Any], argv: list[str] | None = None
) -> argparse.Namespace:
    """Parse ``argv``; with ``--quick``, ``quick`` replaces the defaults it names."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes (make bench-quick): " + ", ".join(f"{k}={v}" for k, v in quick.items()),
    )
    args = parser.parse_args(argv)
    unknown = sorted(k for k in quick if not hasattr(args, k))
    if unknown:
        raise ValueError(f"quick sizes name no option of this benchmark: {unknown}")
    if args.quick:
        # Defaults changed, then parsed again: an explicit flag beats the quick size.
        parser.set_defaults(**quick)
        args = parser.parse_args(argv)
    return args
