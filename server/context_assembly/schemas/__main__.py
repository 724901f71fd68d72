"""`python -m context_assembly.schemas --write DIR | --check DIR`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .build import check_files, write_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m context_assembly.schemas",
                                     description="Generate the JSON Schemas from the registries.")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", metavar="DIR", type=Path, help="write the schema files into DIR")
    action.add_argument("--check", metavar="DIR", type=Path,
                        help="exit 1, listing the files, when DIR differs from what would be written")
    args = parser.parse_args(argv)
    if args.write is not None:
        for path in write_files(args.write):
            print(path)
        return 0
    problems = check_files(args.check)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("run: python -m context_assembly.schemas --write " + str(args.check), file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
