"""Write the exclusion list a labeller checks candidates against (``benchmarks/labelling.md``):
every package of every label file (``benchmarks/results/recall_*labels.json``, by its key and
its pinned name) and every PyPI name their ``about`` texts give with a version (the packages
earlier labellers downloaded or claimed but did not label), normalised (lower case, runs of
``-_.`` as ``-``). The list lives outside the repository and is lost with ``/tmp``: rebuild it
before labelling.

    python benchmarks/exclusions.py [--pypi /work/.library/env/packages/pypi.tsv] [--out /tmp/tml-corpus/exclusions.txt]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.lower())


def excluded(pypi: Path) -> set:
    known = {normalise(line.split("\t", 1)[0]) for line in pypi.read_text(encoding="utf-8").splitlines()[1:]}
    names = set()
    for path in RESULTS.glob("recall_*labels.json"):
        labels = json.loads(path.read_text(encoding="utf-8"))
        for key, pinned in (labels.get("packages") or {}).items():
            names.add(normalise(key))
            if isinstance(pinned, str):
                names.add(normalise(re.split(r"[=<>\s]", pinned)[0]))
        about = labels.get("about") if isinstance(labels.get("about"), str) else json.dumps(labels.get("about"))
        for match in re.finditer(r"([A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]) v?\d+\.\d+", about or ""):
            if normalise(match.group(1)) in known:
                names.add(normalise(match.group(1)))
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pypi", default="/work/.library/env/packages/pypi.tsv")
    parser.add_argument("--out", default="/tmp/tml-corpus/exclusions.txt")
    args = parser.parse_args()
    names = excluded(Path(args.pypi))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(sorted(names)) + "\n", encoding="utf-8")
    print(f"{len(names)} names -> {out}")


if __name__ == "__main__":
    main()
