"""The engine's one-pass positions equal libcst's PositionProvider and
WhitespaceInclusivePositionProvider on every node of real files and awkward text."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider, WhitespaceInclusivePositionProvider

from torchmemlint.positions import _OffsetPositions, _Rows
from torchmemlint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
AWKWARD = {
    "crlf": "import torch\r\nclass A:\r\n    def f(self, x):\r\n        return x  # c\r\n",
    "cr": "x = 1\ry = (1,\r     2)\r",
    "tabs": "if x:\n\ty = f(\n\t\t1)\n",
    "unicode": "s = 'ünïcødé 😀'; t = f(s)\n",
    "continuation": "x = 1 + \\\n    2\n",
    "no trailing newline": "def f():\n    return g(1)",
    "empty": "",
    "comments only": "# a\n\n# b\n",
    "decorators": "@d(1)\n@e\nclass A(B, metaclass=M):\n    x: int = 1\n",
    "strings": 'x = """a\nb\n""" + f"{y!r:>{w}}"\n',
}


def cases():
    found = {f"awkward:{name}": text for name, text in AWKWARD.items()}
    for path in sorted((ROOT / "fixtures").rglob("*.py")):
        found[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    for code, rule in all_rules().items():
        for index, example in enumerate(rule.INVALID):
            found[f"{code}-invalid-{index}"] = example.code
    # the package's top-level modules (the CLI, the engine, the server ...): real code of every
    # kind of statement; its subpackages add time, not syntax
    for path in sorted((ROOT / "torchmemlint").glob("*.py")):
        found[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
    return found


CASES = cases()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_positions_match_libcst(name):
    text = CASES[name]
    module = cst.parse_module(text)
    metadata = MetadataWrapper(module, unsafe_skip_copy=True).resolve_many(
        [PositionProvider, WhitespaceInclusivePositionProvider]
    )
    state = _OffsetPositions(module)
    module._codegen(state)
    assert text.startswith(module.code) and state.code().startswith(module.code)
    rows = _Rows(state.code())

    def as_tuple(code_range):
        return (
            (code_range.start.line, code_range.start.column + 1),
            (code_range.end.line, code_range.end.column + 1),
        )

    def ours(span):
        start, end = rows.range(span)
        return (start.row, start.column), (end.row, end.column)

    syntactic = metadata[PositionProvider]
    inclusive = metadata[WhitespaceInclusivePositionProvider]
    assert set(syntactic) == set(state.inclusive) == set(inclusive)
    for node in syntactic:
        assert ours(state.span(node)) == as_tuple(syntactic[node]), node
        assert ours(state.inclusive[node]) == as_tuple(inclusive[node]), node


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_wanted_nodes_get_the_ranges_of_the_full_pass(name):
    """The engine records only the nodes it needs; theirs are the ranges every node gets."""
    module = cst.parse_module(CASES[name])
    full = _OffsetPositions(module)
    module._codegen(full)
    nodes = list(full.inclusive)
    picked = nodes[::7] + [node for node in nodes if isinstance(node, cst.IndentedBlock)][:5]
    if not picked:
        return
    state = _OffsetPositions(module, {id(node) for node in picked})
    module._codegen(state)
    assert state.code() == full.code()
    assert len(state.inclusive) < len(nodes) or len(nodes) < 3
    for node in picked:
        assert state.span(node) == full.span(node), node
        assert state.inclusive[node] == full.inclusive[node], node
