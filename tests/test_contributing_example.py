"""The worked example of docs/contributing.md is a real rule: taken from the page, registered,
and run through the real engine (in process and through the CLI)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import torchmemlint.rules
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE, re.S)
RULE_SOURCE, MODEL_SOURCE = BLOCKS[0], BLOCKS[1]

HEAD = "import torch.nn as nn\n\nclass Block(nn.Module):\n    def __init__(self):\n"


@pytest.fixture
def example_rule(tmp_path):
    folder = tmp_path / "example_rules"
    folder.mkdir()
    (folder / "example_rule.py").write_text(RULE_SOURCE, encoding="utf-8")
    torchmemlint.rules.__path__.append(str(folder))
    all_rules.cache_clear()
    try:
        assert "TML900" in all_rules()
        yield folder
    finally:
        torchmemlint.rules.__path__.remove(str(folder))
        all_rules.cache_clear()


def _lint(code):
    return lint_source(code, "model.py", Settings(select=("TML900",)))


def test_the_page_example_reports_where_the_page_says(example_rule):
    findings = _lint(MODEL_SOURCE)
    assert [(f.code, f.location.row, f.location.column) for f in findings] == [("TML900", 10, 13)]
    message = findings[0].message
    assert message == "`self.act` (nn.ReLU) runs on `x`, read again later"
    assert f"model.py:10:13: TML900 {message}\n" in PAGE


@pytest.mark.parametrize(
    "init, forward, expected",
    [
        # an alias of torch's class is torch's class
        ("from torch.nn import ReLU as R\n", "        self.act = R()\n", None),
        # a list of blocks, the activation reused in a loop
        ("", "        self.act = nn.GELU()\n", "loop"),
    ],
)
def test_forms_real_code_uses(example_rule, init, forward, expected):
    body = "    def forward(self, x):\n"
    if expected == "loop":
        body += "        for block in self.blocks:\n            y = self.act(x)\n            x = block(y) + x\n        return x\n"
    else:
        body += "        y = self.act(x)\n        return y + x\n"
    code = init + HEAD + "        super().__init__()\n" + forward + body
    findings = _lint(code)
    assert [f.code for f in findings] == ["TML900"], code


@pytest.mark.parametrize(
    "assignment, forward",
    [
        # the input is only used through the new value
        ("self.act = nn.ReLU(inplace=True)", "        x = self.act(x)\n        return x\n"),
        # a local class named ReLU is not torch's
        ("self.act = ReLU()", "        y = self.act(x)\n        return y + x\n"),
        # a constructor argument the file does not pin down (no layer default)
        ("self.act = act_layer()", "        y = self.act(x)\n        return y + x\n"),
        # a constructor argument whose default one call in the file overrides with another
        # layer while another call leaves it (either may run)
        ("self.act = act_layer2()", "        y = self.act(x)\n        return y + x\n"),
        # another attribute
        ("self.gate = nn.ReLU()", "        y = self.gate(x)\n        return y + x\n"),
    ],
)
def test_look_alikes_stay_quiet(example_rule, assignment, forward):
    code = (
        "import torch.nn as nn\n\nclass ReLU:\n    pass\n\nclass Block(nn.Module):\n"
        "    def __init__(self, act_layer=None, act_layer2=nn.ReLU):\n        super().__init__()\n"
        f"        {assignment}\n\n    def forward(self, x):\n" + forward
        + "\nblock = Block(act_layer2=nn.SiLU)\nplain = Block()\n"
    )
    assert _lint(code) == []


@pytest.mark.slow
def test_the_example_runs_through_the_cli(example_rule, tmp_path):
    (tmp_path / "model.py").write_text(MODEL_SOURCE, encoding="utf-8")
    launcher = (
        "import sys, runpy, torchmemlint.rules\n"
        f"torchmemlint.rules.__path__.append({str(example_rule)!r})\n"
        "sys.argv = ['torchmemlint', '--select', 'TML900', '--isolated', 'model.py']\n"
        "runpy.run_module('torchmemlint', run_name='__main__', alter_sys=True)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", launcher], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 1, result.stderr
    assert "model.py:10:13: TML900 `self.act` (nn.ReLU) runs on `x`, read again later" in result.stdout
