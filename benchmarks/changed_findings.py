#!/usr/bin/env python3
"""Which findings a change adds or loses on the held-out sets, read only where it can matter.

    python benchmarks/changed_findings.py BASE [HEAD] --codes TML502 --only folds [--sets 2-149]

Each commit's tree is checked out with ``git worktree`` (HEAD defaults to the working tree's
commit); the labelled files of each set (``recall_holdoutN_labels.json``, the corpora under
``/tmp/tml-corpus/holdoutN`` that ``recall_families.py`` extracts) that a filter keeps are
linted by both with ``--select CODES`` (``recall_families.lint``, per package), and every finding
only one of them gives is printed (``NEW`` / ``LOST``), then the counts. A full run of every set
(``all_sets.sh``) takes the better part of an hour; this reads only the files a change can touch:

* ``folds``: an assignment whose target is read once among the operands of ``+ - * /`` with an
  addition on the way to it, other than ``t = t + x`` (``analysis/folds.py``'s accumulations);
* ``eval-items``: a file that calls ``.eval()`` on an item (``x[...].eval()``);
* ``subclasses``: a file with a class deriving from another class of the file
  (``analysis/class_lineage.py``: attributes a base or a subclass binds);
* ``module-lists``: a file building a ``ModuleList`` that names ``Identity`` or reads a list
  attribute with ``type`` / ``isinstance`` / ``repr`` / ``str`` / ``print`` / ``id`` (TML201's
  identity elements, ``module_lists._READS_ONLY``);
* ``choices``: a file with ``retain_graph``, a ``MagicMock`` import fallback, a layer chosen
  as ``... else nn.Identity()``, a name rebound from itself (``act = get_act(act)``) or a table
  of layers by dimension (the forty-fifth session's TML201/TML503 changes);
* ``all``: every labelled file.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import recall_families as rf  # noqa: E402
from corpus_findings import split_requirement  # noqa: E402

_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _dotted(node: ast.AST):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _holds(node: ast.AST, target: str) -> bool:
    return any(_dotted(inner) == target for inner in ast.walk(node) if isinstance(inner, (ast.Name, ast.Attribute)))


def _fold(target: str, value: ast.AST) -> bool:
    adds, node = False, value
    while _dotted(node) != target:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            node = node.operand
            continue
        if not isinstance(node, ast.BinOp) or not isinstance(node.op, _ARITHMETIC):
            return False
        left, right = _holds(node.left, target), _holds(node.right, target)
        if left == right:
            return False
        adds = adds or isinstance(node.op, ast.Add)
        node = node.left if left else node.right
    return adds


def _nodes(text: str) -> list:
    """Every node of the file's ``ast`` (none when it does not parse)."""
    try:
        return list(ast.walk(ast.parse(text)))
    except (SyntaxError, ValueError):
        return []


def has_fold(text: str) -> bool:
    for node in _nodes(text):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp):
            target, value = _dotted(node.targets[0]), node.value
            if target is None or (isinstance(value.op, ast.Add) and target in (_dotted(value.left), _dotted(value.right))):
                continue
            if _fold(target, value):
                return True
    return False


def has_subclass(text: str) -> bool:
    classes = [node for node in _nodes(text) if isinstance(node, ast.ClassDef)]
    names = {node.name for node in classes}
    return any(_dotted(base) in names for node in classes for base in node.bases)


def has_held_module(text: str) -> bool:
    """A class of the file whose ``forward`` calls nothing of its own ``self``, built into an
    attribute of another class (``self.attention_matmul = TfMatmulModule(...)``)."""
    nodes = _nodes(text)
    plain = set()
    for node in nodes:
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward" and not any(
                    isinstance(call, ast.Call) and (_dotted(call.func) or "").startswith("self.") for call in ast.walk(item)
                ):
                    plain.add(node.name)
    return bool(plain) and any(
        isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _dotted(node.value.func) in plain
        and any((_dotted(t) or "").startswith("self.") for t in node.targets) for node in nodes
    )


FILTERS = {
    "folds": has_fold,
    "eval-items": lambda text: re.search(r"\]\s*\.eval\(\)", text) is not None,
    "subclasses": has_subclass,
    "module-lists": lambda text: "ModuleList" in text and re.search(r"Identity|\b(?:type|isinstance|repr|str|print|id)\(self\.", text) is not None,
    "filled-tensors": lambda text: re.search(r"\.new_(?:zeros|ones|empty|full|tensor)\(", text) is not None or (
        "where(" in text and re.search(r"_like\(|torch\.(?:full|tensor|as_tensor|scalar_tensor|zeros|ones)\(", text) is not None),
    "held-modules": has_held_module,
    "eval-copies": lambda text: ".eval()" in text and re.search(r"deepcopy\(|__class__\(|type\(self\)\(|\w\s*:\s*(?:torch\.)?(?:nn\.)?[A-Z]\w*\s*[,)=]", text) is not None,
    "choices": lambda text: "retain_graph" in text or "MagicMock" in text or re.search(
        r"else\s+(?:nn\.)?Identity\(\)|(\w+)\s*=\s*\w+\(\1\)|\{\s*1\s*:\s*(?:nn\.)?\w+[123]d", text) is not None,
    "all": lambda text: True,
}


def jobs(low: int, high: int, keep) -> list:
    found = []
    for number in range(low, high + 1):
        path = rf.RESULTS / f"recall_holdout{number}_labels.json"
        if not path.exists():
            continue
        labels = rf.normalise(json.loads(path.read_text(encoding="utf-8")), "families")
        for key, requirement in labels["packages"].items():
            package, version = split_requirement(requirement)
            folder = Path(f"/tmp/tml-corpus/holdout{number}/{package}-{version}")
            files = [f.split("/", 1)[1] for f in labels["files"] if f.split("/", 1)[0] == key]
            files = [f for f in files if (folder / f).is_file()
                     and keep((folder / f).read_text(encoding="utf-8", errors="replace"))]
            if files:
                found.append((number, key, folder, files))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("head", nargs="?", default="HEAD")
    parser.add_argument("--codes", required=True)
    parser.add_argument("--only", choices=sorted(FILTERS), default="all")
    parser.add_argument("--sets", default="2-149")
    args = parser.parse_args()
    low, high = (int(part) for part in args.sets.split("-"))
    todo = jobs(low, high, FILTERS[args.only])
    print(f"{sum(len(j[3]) for j in todo)} labelled files of {len(todo)} packages kept by `{args.only}`", flush=True)
    codes = args.codes.split(",")
    with tempfile.TemporaryDirectory() as scratch:
        trees = []
        for name, commit in (("base", args.base), ("head", args.head)):
            tree = Path(scratch) / name
            subprocess.run(["git", "-C", str(HERE.parent), "worktree", "add", "-q", "--detach", str(tree), commit], check=True)
            trees.append(tree)
        try:
            def one(job):
                number, key, folder, files = job
                base, head = ({(f["filename"], f["location"]["row"], f["code"]): f["message"]
                               for f in rf.lint(folder, files, codes, tree)} for tree in trees)
                return number, key, base, head

            added = lost = 0
            with ThreadPoolExecutor(2) as pool:
                for number, key, base, head in pool.map(one, todo):
                    for found in sorted(set(base) | set(head)):
                        if found not in base:
                            added += 1
                            print(number, "NEW", key, *found, head[found][:160], flush=True)
                        elif found not in head:
                            lost += 1
                            print(number, "LOST", key, *found, base[found][:160], flush=True)
            print(f"{added} new, {lost} lost ({args.base} -> {args.head}, --select {args.codes})")
        finally:
            for tree in trees:
                subprocess.run(["git", "-C", str(HERE.parent), "worktree", "remove", "--force", str(tree)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
