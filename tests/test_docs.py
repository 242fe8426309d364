"""The generated rule docs and the README's rule table are current."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import List

import pytest

from torchmemlint.docs import rule_table, rules_markdown

ROOT = Path(__file__).resolve().parent.parent


def test_docs_rules_md_is_generated_from_the_rules():
    current = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert current == rules_markdown(), "run: torchmemlint rule --markdown > docs/rules.md"


def test_readme_rule_table_is_current():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- rules -->\n(.*?)<!-- /rules -->", readme, re.S)
    assert match, "README lacks the <!-- rules --> block"
    assert match.group(1) == rule_table()


def _fix_cases(code: str) -> "Counter[str]":
    """How rule ``code``'s INVALID examples are fixed, linted as a user would lint them: one
    count per finding, "safe", "unsafe" or "none" (no fix)."""
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source

    from rule_examples import examples

    counts: Counter = Counter()
    for example in examples(code).invalid:
        settings = Settings(select=(code,), options=tuple(example.options))
        for finding in lint_source(example.code, "example.py", settings, ignore_noqa=True):
            if finding.code == code:
                counts[finding.fix.applicability.value if finding.fix else "none"] += 1
    return counts


def test_the_fix_column_is_what_the_rules_examples_get():
    from torchmemlint.docs import fix_summary
    from torchmemlint.rules import all_rules
    from torchmemlint.rules.base import FixAvailability

    from rule_examples import examples

    for code, rule in all_rules().items():
        cases = _fix_cases(code)
        assert sum(cases.values()) >= len(examples(code).invalid) > 0, code
        # The declared availability and applicabilities are what the examples get.
        if rule.fix_availability is FixAvailability.ALWAYS:
            assert not cases["none"], f"{code} says 'always' but an example gets no fix"
        if rule.fix_availability is FixAvailability.NONE:
            assert set(cases) == {"none"}, f"{code} says 'none' but an example gets a fix"
        assert set(rule.fix_applicability) == set(cases) - {"none"}, code
        summary = fix_summary(rule)
        assert ("unsafe" in summary) == bool(cases["unsafe"]), code
        assert ("safe" in summary.replace("unsafe", "")) == bool(cases["safe"]), code
    # The two the issue found wrong ("always"): TML401's fix is never safe (and not offered
    # where the called attribute may hold a function without `use_reentrant`); TML201's only in
    # some cases (LeakyReLU/RReLU with a literal non-negative slope).
    rules = all_rules()
    assert fix_summary(rules["TML401"]) == "sometimes, unsafe"
    assert fix_summary(rules["TML201"]) == "safe or unsafe"


@pytest.mark.slow
def test_readme_install_for_your_own_project_works_verbatim_from_a_fresh_copy(tmp_path):
    """The README's `pip install ./torchmemlint` line, run as written next to a fresh copy of
    the repository (its committed and uncommitted files, as a clone would have them), in a
    new virtual environment: the command, the flake8 plugin and the hooks' entry point work."""
    import os
    import shutil
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"For use in your own project.*?```sh\n(.*?)```", readme, re.S)
    assert block, "README lacks the install block for your own project"
    command = block.group(1).splitlines()[0].split("#")[0].strip()
    assert command == "pip install ./torchmemlint"

    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
        capture_output=True, text=True,
    ).stdout.splitlines()
    for relative in listed:
        if (ROOT / relative).is_file():
            (tmp_path / "torchmemlint" / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / relative, tmp_path / "torchmemlint" / relative)
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "env")], check=True)
    bin_dir = tmp_path / "env" / "bin"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    installed = subprocess.run(
        command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    model = tmp_path / "model.py"
    model.write_text("from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x)\n")
    for args in (["torchmemlint", "check", "model.py"], ["flake8", "--select", "TML", "model.py"]):
        result = subprocess.run(
            [str(bin_dir / args[0]), *args[1:]], cwd=tmp_path, env=env, capture_output=True,
            text=True,
        )
        assert result.returncode == 1 and "model.py:2:5: TML401" in result.stdout, result
    # The static linter never needs torch: the fresh environment has none.
    assert subprocess.run([str(bin_dir / "python"), "-c", "import torch"], env=env).returncode


@pytest.mark.slow
def test_readme_fixture_outputs_are_what_the_cli_prints():
    """The README's first example (`--output-format concise`) and the set-up command's
    `--statistics` output, as the README quotes them: totals and the lines shown."""
    import subprocess
    import sys

    def cli(*args: str) -> List[str]:
        result = subprocess.run(
            [sys.executable, "-m", "torchmemlint", *args, "--exit-zero", "fixtures/"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
        )
        return result.stdout.splitlines()

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    concise, statistics = re.findall(r"```console\n(.*?)```", readme, re.S)[:2]
    shown = [line for line in concise.splitlines() if line != "..." and not line.startswith("$")]
    assert len(shown) >= 4 and set(shown) <= set(cli("--output-format", "concise"))
    lines = cli("--statistics")
    total = re.search(r"\((\d+) findings in all;", readme)
    assert total and sum(int(line.split()[0]) for line in lines) == int(total.group(1))
    shown = [line for line in statistics.splitlines() if line != "..."]
    assert shown[:3] == lines[:3] and shown[-1] == lines[-1]
