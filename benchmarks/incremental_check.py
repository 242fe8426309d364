"""The language server's incremental parse against libcst's, on whole corpora.

For every ``.py`` file under the given directories: ``incremental.Document().parse(text)``
(cut into chunks, each parsed alone, assembled) must deep-equal ``libcst.parse_module(text)``
and give back the same code; then an edit (a line appended) must re-parse one chunk and still
equal libcst's parse of the edited text. Prints the counts; exits 1 on any difference.

    python benchmarks/incremental_check.py /tmp/tml-corpus/M /tmp/tml-corpus/S /tmp/tml-corpus/TV

tests/test_incremental.py checks the same on the fixtures, the rule examples and the awkward
forms; this runs it where the forms come from real projects (minutes: ``deep_equals`` is slow).
"""

from __future__ import annotations

import sys
from pathlib import Path

import libcst as cst

from torchmemlint.incremental import Document
from torchmemlint.sourcefile import SourceError, decode_source


def main(roots) -> int:
    files = differences = whole = reparsed_more = 0
    for root in roots:
        for path in sorted(Path(root).rglob("*.py")):
            try:
                text = decode_source(str(path), path.read_bytes()).text
                expected = cst.parse_module(text)
            except (SourceError, cst.ParserSyntaxError, OSError):
                continue
            files += 1
            document = Document()
            module = document.parse(text)
            whole += document.parsed == 0  # one chunk, or chunks that disagree: parsed whole
            edited = text + ("" if text.endswith("\n") or not text else "\n") + "value = 1\n"
            again = document.parse(edited)
            reparsed_more += document.parsed > 1
            same = module.code == expected.code and module.deep_equals(expected)
            same = same and again.deep_equals(cst.parse_module(edited))
            if not same:
                differences += 1
                print(f"DIFFERENT: {path}")
    print(
        f"{files} files: {differences} differ from libcst's parse; {whole} parsed whole "
        f"(one chunk, or mixed indentation / line breaks); after a line appended, {reparsed_more} "
        "re-parsed more than that line's chunk"
    )
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["."]))
