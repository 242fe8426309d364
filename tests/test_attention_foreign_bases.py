"""TML601 through a method that a base class of ANOTHER project file defines.

transformer_lens's attention bridges (the eighteenth held-out set) compute the scores, call
``self._softmax_dropout_pattern(scores)`` (defined in the base class of ``attention.py``, which
calls ``self._masked_softmax`` in turn) and contract the weights with v. The value graph runs
such a method with the defining file's own value graphs (``helper_runs.foreign_method``, the
file found by ``links.py``); the finding has no fix (the fix edits only the linted file, and
the other file's method may do more than the graph keeps).

Driven through the real engine (``lint_paths``), the real CLI with its result cache on, and
flake8; the package takes the forms real code uses: a re-export in ``__init__.py``, a relative
import, an absolute import of the package's own module, a two-level chain of bases across two
files, a base method that calls another base method. The look-alikes stay quiet: a base helper
that keeps the weights on ``self`` (they escape: SDPA never makes them), one that is linear
attention (no softmax), and a base class imported from outside the project.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchmemlint.config import Settings
from torchmemlint.engine import lint_paths

BASE = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


class AttentionBridge(nn.Module):
    def __init__(self, dim, p=0.1):
        super().__init__()
        self.scale = dim ** -0.5
        self.attn_dropout = nn.Dropout(p)
        self.hook_pattern = nn.Identity()

    def _masked_softmax(self, scores):
        return F.softmax(scores, dim=-1)

    def _softmax_dropout_pattern(self, scores):
        weights = self._masked_softmax(scores)
        weights = self.attn_dropout(weights)
        return self.hook_pattern(weights)

    def _compat_softmax(self, scores, mask):
        if not self.compatibility_mode:
            return F.softmax(scores, dim=-1)
        pattern = F.softmax(scores.masked_fill(mask, 0.0), dim=-1)
        return pattern.masked_fill(mask, 0.0)

    def _stored_pattern(self, scores):
        weights = scores.softmax(dim=-1)
        self.last_pattern = weights
        return weights

    def _linear_pattern(self, scores):
        return F.elu(scores) + 1
'''

FILES = {
    "__init__.py": "from .attention import AttentionBridge\n",
    "attention.py": BASE,
    # a relative import of the base class
    "joint.py": '''\
import torch

from .attention import AttentionBridge


class JointQKVAttentionBridge(AttentionBridge):
    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        weights = self._softmax_dropout_pattern(scores)
        return torch.matmul(weights, v)  # site
''',
    # an absolute import of the package's own module; the base's base is in a third file
    "codegen.py": '''\
import torch

from pkg.joint import JointQKVAttentionBridge


class CodeGenAttentionBridge(JointQKVAttentionBridge):
    def forward(self, q, k, v):
        scores = q @ k.transpose(-2, -1)
        scores = scores / 8.0
        return self._softmax_dropout_pattern(scores) @ v  # site
''',
    # the package's re-export, and a same-file class between
    "bloom.py": '''\
import torch

from . import AttentionBridge


class Middle(AttentionBridge):
    pass


class BloomAttentionBridge(Middle):
    def forward(self, q, k, v):
        scores = torch.einsum("bhid,bhjd->bhij", q, k) * self.scale
        weights = self._softmax_dropout_pattern(scores)
        return torch.einsum("bhij,bhjd->bhid", weights, v)  # site
''',
    # a base method with two returns (transformer_lens's ``_masked_softmax``): either
    "compat.py": '''\
import torch

from .attention import AttentionBridge


class CompatBridge(AttentionBridge):
    def forward(self, q, k, v, mask):
        scores = torch.matmul(q, k.transpose(-2, -1))
        return torch.matmul(self._compat_softmax(scores, mask), v)  # site
''',
    "quiet.py": '''\
import torch
from transformers.modeling_utils import PreTrainedModel

from . import AttentionBridge


class Stored(AttentionBridge):
    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        return torch.matmul(self._stored_pattern(scores), v)


class Linear(AttentionBridge):
    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1))
        return torch.matmul(self._linear_pattern(scores), v)


class External(PreTrainedModel):
    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1))
        return torch.matmul(self._softmax_dropout_pattern(scores), v)
''',
}


@pytest.fixture
def project(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    for name, text in FILES.items():
        (package / name).write_text(text)
    return tmp_path


def marked(project, *names):
    """{(file, row)} of the lines marked ``# site`` in the package's files ``names``."""
    return {
        (name, row)
        for name in names
        for row, line in enumerate((project / "pkg" / name).read_text().splitlines(), 1)
        if line.endswith("# site")
    }


def test_a_base_method_of_another_file_is_run_there_and_reported_without_a_fix(project):
    paths = sorted(str(path) for path in (project / "pkg").glob("*.py"))
    results = lint_paths(paths, Settings(select=("TML601",)), jobs=1)
    findings = [(os.path.basename(result.path), finding) for result in results for finding in result.findings]
    assert {(name, finding.location.row) for name, finding in findings} == marked(project, "joint.py", "codegen.py", "bloom.py", "compat.py")
    for name, finding in findings:
        assert finding.fix is None
        helper = "_compat_softmax" if name == "compat.py" else "_softmax_dropout_pattern"
        assert "pass through `%s` of `attention.py`, another file" % helper in finding.message
        assert ("dropout mask" in finding.message) == (name != "compat.py")  # the base's nn.Dropout, read in its own file


def test_the_same_classes_in_one_file_keep_their_same_file_reading(tmp_path):
    """Pasted into one file, the chain is a same-file helper's: no foreign step named."""
    one = tmp_path / "one.py"
    one.write_text(BASE + "\n\n" + FILES["joint.py"].split("\n\n\n", 1)[1])
    (result,) = lint_paths([str(one)], Settings(select=("TML601",)), jobs=1)
    assert [finding.location.row for finding in result.findings] == [
        row for row, line in enumerate(one.read_text().splitlines(), 1) if line.endswith("# site")
    ]
    assert "another file" not in result.findings[0].message


SEVERAL_RETURNS = '''\
import torch
import torch.nn.functional as F


def masked_softmax(scores, mask, compatibility=False):
    if not compatibility:
        return F.softmax(scores, dim=-1)
    return F.softmax(scores.masked_fill(mask, 0.0), dim=-1).masked_fill(mask, 0.0)


def probabilities(scores, mask):
    if mask is None:
        return F.softmax(scores, dim=-1)
    return scores.new_zeros(1)


def attend(q, k, v, mask):
    return masked_softmax(q @ k.transpose(-2, -1), mask) @ v  # site


def attend_shapeless(q, k, v, mask):
    return probabilities(q @ k.transpose(-2, -1), mask) @ v
'''


def test_a_helper_with_several_returns_of_known_axes_gives_either():
    """Each return with its axes known: a join, as an ``if``'s arms; a return of unknown
    axes (a fresh tensor) leaves the call opaque, as before."""
    from attention_cases import found_sites

    sites = found_sites(SEVERAL_RETURNS)
    assert [site.function.name.value for site in sites] == ["attend"]
    assert sites[0].reason  # the softmax is the helper's: no fix


def run_cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TORCHMEMLINT"))}
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.mark.slow
def test_an_edit_of_the_base_file_relints_the_subclass_through_the_cache(tmp_path):
    """Two files, the CLI with its result cache on: the subclass's finding follows the base file."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    base, sub = package / "attention.py", package / "joint.py"
    base.write_text(BASE)
    sub.write_text(FILES["joint.py"])
    args = ["--select", "TML601", "--output-format", "json", "--exit-zero", "pkg/joint.py"]

    def rows():
        return [(Path(item["filename"]).name, item["location"]["row"], item["fix"]) for item in json.loads(run_cli(*args, cwd=tmp_path).stdout)]

    site = [("joint.py", row, None) for _, row in marked(tmp_path, "joint.py")]
    assert rows() == site
    assert list((tmp_path / ".torchmemlint_cache").glob("*/*/*.json"))  # the cache is on
    base.write_text(BASE.replace("return F.softmax(scores, dim=-1)", "return torch.sigmoid(scores)"))
    assert rows() == []  # the subclass's file did not change; its base's did
    base.write_text(BASE)
    assert rows() == site


@pytest.mark.slow
def test_the_cache_follows_a_base_two_files_away_through_an_absolute_import(project):
    """codegen.py imports joint.py by absolute name, whose class derives from attention.py's."""
    base = project / "pkg" / "attention.py"
    args = ["--select", "TML601", "--output-format", "json", "--exit-zero", "pkg/codegen.py"]

    def rows():
        return {(Path(item["filename"]).name, item["location"]["row"]) for item in json.loads(run_cli(*args, cwd=project).stdout)}

    assert rows() == marked(project, "codegen.py")
    base.write_text(BASE.replace("weights = self.attn_dropout(weights)", "weights = self.attn_dropout(weights)\n        self.pattern = weights"))
    assert rows() == set()  # the weights now kept on self in the base: they escape
    base.write_text(BASE)
    assert rows() == marked(project, "codegen.py")


@pytest.mark.slow
def test_flake8_lints_the_subclass_file_with_its_project(project):
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "TML601", "pkg/joint.py", "pkg/quiet.py"],
        cwd=project, capture_output=True, text=True, timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    found = {(Path(line.split(":")[0]).name, int(line.split(":")[1])) for line in result.stdout.splitlines() if " TML601 " in line}
    assert found == marked(project, "joint.py")
