"""Re-linting an edited document (incremental.Document) gives what a fresh lint gives.

- The module assembled from reused and newly parsed chunks is libcst's parse of the whole text
  (``deep_equals`` and the code), on every fixture and example and on the forms where cutting
  a text into top-level statements is easy to get wrong.
- Between versions, only the chunks an edit touched are parsed again.
- ``lint_source`` with a document gives the findings (ranges, fixes, `# noqa` rows) of
  ``lint_source`` without one, for every rule, version after version.
"""

from __future__ import annotations

from pathlib import Path
from typing import List

import libcst as cst
import pytest

from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.incremental import Document, chunk_bounds
from torchmemlint.rules import all_rules

from rule_examples import examples

ROOT = Path(__file__).resolve().parent.parent

TRICKY = {
    "docstring with column-0 lines": '"""Module docs.\n\nimport torch\nclass X:\n"""\nimport torch\n\nx = 1\n',
    "string in a function": 'def f():\n    s = """\nhello\n# not a comment\n"""\n    return s\n\ny = f()\n',
    "decorators over lines": "@decorate(\n    1,\n)\n@other\n\ndef f():\n    pass\nx = 1\n",
    "if and else": "if a:\n    x = 1\n# between\nelif b:\n    x = 2\nelse:\n    x = 3\ny = 4\n",
    "try": "try:\n    import torch\nexcept ImportError:\n    torch = None\nfinally:\n    pass\nz = 1\n",
    "closing bracket": "x = dict(\n    a=1,\n)\ny = [\n1,\n2,\n]\nz = 3\n",
    "backslash": "x = 1 + \\\n2\ny = 3\n",
    "comments around blocks": (
        "def f():\n    x = 1\n\n    # indented\n# column 0\n\ny = 2\n"
        "def g():\n    x = 1\n# column 0\n    # indented\n\nz = 3\n"
        "class A:\n    pass\n    # at the end\n"
    ),
    "trailing comments at the end": "x = 1\ndef f():\n    return 1\n\n# last\n\n",
    "no trailing newline": "import torch\nx = torch.zeros(1)",
    "semicolons and one-line suites": "a = 1; b = 2\nclass A: pass\nif a: b = 3\nc = 4\n",
    "two-space indentation": "def f():\n  return 1\n\ndef g():\n  return 2\n",
    "indentation that differs": "def f():\n  return 1\n\ndef g():\n    return 2\n",
    "tabs": "def f():\n\treturn 1\nx = 1\n",
    "crlf": "import torch\r\n\r\ndef f():\r\n    return 1\r\nx = 2\r\n",
    "cr": "import torch\rdef f():\r    return 1\rx = 2\r",
    "mixed line breaks": "x = 1\r\ndef f():\n    return 1\ny = 2\n",
    "form feed": "x = 1\n\x0c\ndef f():\n    return 1\n",
    "match": "match x:\n    case 1:\n        y = 1\n    case _:\n        y = 2\nz = 3\n",
    "comment-only file": "# nothing\n\n# here\n",
    "a statement at the very end without a newline after a block": "def f():\n    pass\nx = 1",
}


def _texts() -> List[str]:
    texts = list(TRICKY.values())
    for path in sorted(ROOT.glob("fixtures/**/*.py")):
        texts.append(path.read_text())
    for code in sorted(all_rules()):
        texts.extend(examples(code).valid)
        texts.extend(invalid.code for invalid in examples(code).invalid)
    return texts


def _same_as_libcst(document: Document, text: str) -> None:
    module = document.parse(text)
    expected = cst.parse_module(text)
    assert module.code == expected.code  # the text, except where libcst drops a final "\r"
    assert module.deep_equals(expected), text


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_forms_assemble_to_libcsts_module(name):
    text = TRICKY[name]
    _same_as_libcst(Document(), text)
    # and again from the chunks kept (every one reused)
    document = Document()
    document.parse(text)
    _same_as_libcst(document, text)


@pytest.mark.slow
def test_fixtures_and_examples_assemble_to_libcsts_module():
    cut = 0
    for text in _texts():
        document = Document()
        _same_as_libcst(document, text)
        cut += document.parsed > 1
    assert cut > 40  # most texts are assembled from several chunks, not parsed whole


def test_a_wrong_cut_is_joined_not_trusted():
    text = TRICKY["docstring with column-0 lines"]
    # the cutter guesses inside the docstring; libcst refuses those chunks and they are joined
    assert len(chunk_bounds(text)) - 1 > 3
    document = Document()
    module = document.parse(text)
    assert len(module.body) == 3


VERSIONS = [
    "import torch\nimport torch.nn as nn\n\n\nclass A(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.act = nn.ReLU()\n\n    def forward(self, x):\n"
    "        return self.act(self.act(x))\n\n\ndef train(model, loader):\n    total = 0\n"
    "    for x in loader:\n        loss = model(x).sum()\n        loss.backward()\n"
    "        total += loss\n    return total\n",
]


def _edits(text: str) -> List[str]:
    """Versions an editor sends: a line appended, one changed in the middle, a statement
    inserted, one removed, a syntax error and its repair."""
    lines = text.splitlines(keepends=True)
    middle = len(lines) // 2
    changed = lines[:middle] + [lines[middle].replace("x", "y", 1)] + lines[middle + 1 :]
    inserted = lines[:middle] + ["\n", "def helper():\n", "    return 1\n", "\n"] + lines[middle:]
    return [
        text + "\nvalue = 1\n",
        "".join(changed),
        "".join(inserted),
        "".join(lines[:-1]),
        text + "\ndef broken(:\n",
        text,
    ]


def test_only_the_edited_chunk_is_parsed_again():
    document = Document()
    text = VERSIONS[0]
    document.parse(text)
    assert document.parsed > 3 and document.reused == 0
    document.parse(text + "\nvalue = 1\n")
    assert document.parsed == 1 and document.reused == document_chunks(text)
    edited = text.replace("total += loss", "total += loss.item()")
    document.parse(edited)
    assert document.parsed == 1  # the function `train` alone
    with pytest.raises(cst.ParserSyntaxError):
        document.parse(text + "\ndef broken(:\n")
    _same_as_libcst(document, text)


def document_chunks(text: str) -> int:
    return len(chunk_bounds(text)) - 1


def _lint_pairs(texts: List[str], codes) -> int:
    document = Document()
    settings = Settings()
    kept = 0  # versions whose positions came from the ranges the document keeps
    for text in texts:
        fresh = lint_source(text, "m.py", settings, codes, ignore_noqa=True)
        again = lint_source(text, "m.py", settings, codes, ignore_noqa=True, document=document)
        assert again == fresh, text
        assert [f.noqa_rows for f in again] == [f.noqa_rows for f in fresh], text
        kept += bool(document.positions)
    return kept


@pytest.mark.slow
def test_findings_equal_a_fresh_lint_version_after_version():
    codes = frozenset(all_rules())
    kept = 0
    for text in [VERSIONS[0], *(p.read_text() for p in sorted(ROOT.glob("fixtures/lint/**/*.py")))]:
        kept += _lint_pairs([text, *_edits(text)], codes)
    assert kept > 50


@pytest.mark.slow
def test_findings_equal_on_examples_with_edits():
    codes = frozenset(all_rules())
    kept = 0
    for code in sorted(codes):
        for invalid in examples(code).invalid:
            kept += _lint_pairs([invalid.code, *_edits(invalid.code)], codes)
    assert kept > 100


def test_language_server_keeps_a_document_per_buffer(tmp_path, monkeypatch):
    from pygls.workspace import TextDocument

    from torchmemlint import lsp

    server = lsp.TorchMemLintServer()
    settings = Settings(root=str(tmp_path))
    monkeypatch.setattr(server, "settings_for", lambda path: settings)
    uri = (tmp_path / "m.py").as_uri()
    text = VERSIONS[0]
    first = server.findings(TextDocument(uri, text))[0]
    edited = text.replace("total = 0", "total = 0.0")
    again = server.findings(TextDocument(uri, edited))[0]
    document = server.documents[str(tmp_path / "m.py")]
    assert document.parsed == 1 and document.reused >= 3  # the edited function alone
    assert first and again == lint_source(edited, str(tmp_path / "m.py"), settings)


@pytest.mark.slow
def test_module_index_put_together_equals_one_built_whole():
    from torchmemlint.tree import NodeIndex, node_index

    compared = 0
    for text in _texts():
        document = Document()
        module = document.parse(text)
        document.parse(text)  # the second time from the kept pieces
        assembled = document.index(module)
        assert node_index(module) is assembled  # registered: the walk and analyses use it
        whole = NodeIndex(module, register=False)
        assert [id(node) for node in assembled.order] == [id(node) for node in whole.order]
        assert assembled.parent == whole.parent and assembled.end == whole.end
        assert assembled.scope == whole.scope and assembled.position == whole.position
        assert [list(map(id, k)) for k in assembled.kids] == [list(map(id, k)) for k in whole.kids]
        compared += len(whole.order)
    assert compared > 10_000
