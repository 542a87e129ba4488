"""Regenerate the README screenshots: ``python -m tests.ui.scenes [NAME ...]`` (from the repository root)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from tests.ui.scenes.fleet import ROOT
from tests.ui.scenes.registry import SCENES, Shot

OUT = ROOT / "screenshots"


async def shoot(shot: Shot, out: Path) -> Path:
    app, prepare = shot.make()
    async with app.run_test(size=shot.size, notifications=False) as pilot:
        await prepare(pilot)
        path = out / f"{shot.name}.svg"
        path.write_text(app.export_screenshot(title=f"rocm-console — {shot.name}"), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.ui.scenes", description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", help=f"scenes (default: the README set; 'all' for every one): {', '.join(SCENES)}"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the SVGs (default: screenshots/)")
    args = parser.parse_args(argv)
    names = list(SCENES) if args.names == ["all"] else args.names or [n for n, s in SCENES.items() if s.readme]
    unknown = [n for n in names if n not in SCENES]
    if unknown:
        parser.error(f"unknown scene {unknown[0]!r}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = asyncio.run(shoot(SCENES[name], args.out))
        print(f"{path}  {SCENES[name].doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
