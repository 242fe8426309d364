"""TML601 where the contractions are modules of the file held as attributes, whose constructor
flags decide what their ``forward`` does and whose input is a list: torch-dag's
``self.attention_matmul = TfMatmulModule(transpose=True, normalize=True)`` called as
``self.attention_matmul([x_q, x_k])`` (``forward`` unpacks ``x, y = x``, permutes ``y`` when
``self.transpose``, scales when ``self.normalize``), then an ``nn.Softmax`` attribute, dropout
and ``self.final_matmul([qk, x_v])`` (``transpose=False``). The value graph runs each held
forward (also with one argument) knowing the flags its constructor set
(``attribute_calls.constructor_flags``), and a list handed only to the helper that makes the
product is not another reader of the weights (``attention._Question._into_product_helper``).
Reported without a fix: SDPA cannot run the modules.

Quiet: the weights also returned, the weights also kept in a list of the module, and XCiT's
channel attention through the same modules (a held ``PermuteModule(perm=(0, 2, 1))`` moves
the tokens last: d x d weights); the same heads with ``perm=(0, 1, 2)`` are reported.
"""

from __future__ import annotations

import pytest

from marked_cases import fix_at, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

HEADER = '''
from typing import List

import torch


class TfMatmulModule(torch.nn.Module):
    def __init__(self, transpose: bool, normalize: bool = True):
        super().__init__()
        self.transpose = transpose
        self.normalize = normalize

    def forward(self, x: List[torch.Tensor]) -> torch.Tensor:
        x, y = x
        dim = x.shape[-1]
        if self.transpose:
            y = torch.permute(y, (0, 2, 1))
        output = torch.matmul(x, y)
        if self.normalize:
            output /= torch.sqrt(torch.tensor(dim).to(torch.float32))
        return output


class PairMatmul(torch.nn.Module):
    def __init__(self, transpose=False):
        super().__init__()
        self.transpose = transpose

    def forward(self, x, y):
        if not self.transpose:
            return x @ y
        return x @ y.permute(0, 2, 1)


class Heads(torch.nn.Module):
    def __init__(self, dim, num_heads, scores_transposed=True):
        super().__init__()
        self.num_heads = num_heads
        self.q = torch.nn.ModuleList([torch.nn.Linear(dim, dim // num_heads) for _ in range(num_heads)])
        self.k = torch.nn.ModuleList([torch.nn.Linear(dim, dim // num_heads) for _ in range(num_heads)])
        self.v = torch.nn.ModuleList([torch.nn.Linear(dim, dim // num_heads) for _ in range(num_heads)])
        self.attention_matmul = TfMatmulModule(transpose=TRANSPOSED, normalize=True)
        self.final_matmul = TfMatmulModule(transpose=False, normalize=False)
        self.pair_scores = PairMatmul(transpose=True)
        self.pair_values = PairMatmul()
        self.softmax = torch.nn.Softmax(dim=-1)
        self.attn_drop = torch.nn.Dropout(0.1)
        self.kept = []
'''

LISTED = HEADER.replace("TRANSPOSED", "True") + '''
    def forward(self, x):
        carriers = []
        for k in range(self.num_heads):
            x_q, x_k, x_v = self.q[k](x), self.k[k](x), self.v[k](x)
            qk = self.attention_matmul([x_q, x_k])  # expect: TML601
            qk = self.softmax(qk)
            qk = self.attn_drop(qk)
            qkv = self.final_matmul([qk, x_v])
            carriers.append(qkv)
        return torch.cat(carriers, dim=-1)
'''

PAIRED = HEADER.replace("TRANSPOSED", "True") + '''
    def forward(self, x):
        x_q, x_k, x_v = self.q[0](x), self.k[0](x), self.v[0](x)
        qk = self.softmax(self.pair_scores(x_q, x_k))
        return self.pair_values(self.attn_drop(qk), x_v)  # expect: TML601
'''

RETURNED = HEADER.replace("TRANSPOSED", "True") + '''
    def forward(self, x):
        x_q, x_k, x_v = self.q[0](x), self.k[0](x), self.v[0](x)
        qk = self.softmax(self.attention_matmul([x_q, x_k]))
        return self.final_matmul([qk, x_v]), qk
'''

KEPT = HEADER.replace("TRANSPOSED", "True") + '''
    def forward(self, x):
        x_q, x_k, x_v = self.q[0](x), self.k[0](x), self.v[0](x)
        qk = self.softmax(self.attention_matmul([x_q, x_k]))
        pair = [qk, x_v]
        self.kept.append(pair)
        return self.final_matmul(pair)
'''

PERMUTE = '''

class PermuteModule(torch.nn.Module):
    def __init__(self, perm):
        super().__init__()
        self.perm = perm

    def forward(self, inputs):
        return torch.permute(inputs, self.perm)
'''

# XCiT's cross-covariance attention through the same modules: q, k, v moved to (B, d, T) by a
# held ``PermuteModule(perm=(0, 2, 1))`` (its literal known), so the scores contract the tokens
# and the softmax runs over the channels: d x d weights, quiet (``axis_kinds.small_weights``,
# through ``self.q[k]`` of a ModuleList of ``nn.Linear``: ``attribute_calls.listed_layer``).
CHANNELS = HEADER.replace("\n\nclass Heads(", PERMUTE + "\n\nclass Heads(").replace("TRANSPOSED", "True").replace(
    "        self.kept = []\n", "        self.kept = []\n        self.to_channels = PermuteModule(perm=(0, 2, 1))\n"
) + '''
    def forward(self, x):
        carriers = []
        for k in range(self.num_heads):
            x_q = self.to_channels(self.q[k](x))
            x_k = self.to_channels(self.k[k](x))
            x_v = self.to_channels(self.v[k](x))
            qk = self.softmax(self.attention_matmul([x_q, x_k]))
            carriers.append(self.to_channels(self.final_matmul([qk, x_v])))
        return torch.cat(carriers, dim=-1)
'''

# the same heads over the tokens, the permute given as ``perm=(0, 1, 2)``: reported
TOKENS = CHANNELS.replace("PermuteModule(perm=(0, 2, 1))", "PermuteModule(perm=(0, 1, 2))").replace(
    "qk = self.softmax(self.attention_matmul([x_q, x_k]))", "qk = self.softmax(self.attention_matmul([x_q, x_k]))  # expect: TML601"
)

# a held quantiser on the weights whose forward the graph cannot follow (``torch.floor``,
# ``torch.clamp``: its result's axes not known): the weights keep their axes through it,
# conservatively (``attention._Question._weights``), and its inner steps do not read them
# elsewhere (``_inside_step``): reported, without a fix (spikingjelly's SpikeZIP example)
QUANTISED = HEADER.replace("\n\nclass Heads(", '''


class Quantiser(torch.nn.Module):
    def __init__(self, level=8, scale=0.125):
        super().__init__()
        self.s = torch.nn.Parameter(torch.tensor(float(scale)))
        self.level = level

    def forward(self, x):
        q = torch.floor(x / self.s + 0.5)
        q = torch.clamp(q, min=0.0, max=float(self.level - 1))
        return q * self.s


class Heads(''').replace("TRANSPOSED", "True").replace(
    "        self.kept = []\n", "        self.kept = []\n        self.attn_quan = Quantiser()\n"
) + '''
    def forward(self, x):
        x_q, x_k, x_v = self.q[0](x), self.k[0](x), self.v[0](x)
        scores = torch.matmul(x_q, x_k.transpose(-1, -2)) / 8.0
        probs = self.attn_quan(self.attn_drop(torch.softmax(scores, dim=-1)))
        return torch.matmul(probs, x_v)  # expect: TML601
'''

CASES = {
    "listed": LISTED, "quantised": QUANTISED, "paired": PAIRED, "returned": RETURNED, "kept": KEPT,
    "channels": CHANNELS, "tokens": TOKENS,
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("held_matmuls"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name]), findings[name]


@pytest.mark.parametrize("name", ["listed", "paired", "quantised"])
def test_reported_without_a_fix(findings, name):
    (row, _), = findings[name]
    assert fix_at(findings[name], row) is None


@pytest.mark.parametrize("name", ["listed", "paired"])
def test_a_held_module_of_another_file(tmp_path, name):
    # torch-dag's prunable modules: ``from torch_dag import structured_modules as smodules``,
    # ``self.attention_matmul = smodules.TfMatmulModule(...)``: the class's forward is run from
    # the file that defines it (``attribute_calls.held_class``), the weights are this file's;
    # "paired" names no contraction in the caller (``self.pair_scores``, ``self.pair_values``):
    # the held forwards of the other file say it contracts (``contractions._held_forwards``)
    import json
    import subprocess
    import sys
    import textwrap

    package = tmp_path / "dagpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    header = textwrap.dedent(HEADER)
    modules, heads = header.split("\nclass Heads(", 1)
    (package / "smodules.py").write_text(modules)
    user = "from typing import List\n\nimport torch\n\nfrom dagpkg import smodules\n\n\nclass Heads(" + heads.replace("TRANSPOSED", "True")
    user = user.replace("= TfMatmulModule(", "= smodules.TfMatmulModule(").replace("= PairMatmul(", "= smodules.PairMatmul(")
    user += CASES[name].split("        self.kept = []\n", 1)[1]
    (package / "heads.py").write_text(user)
    proc = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML601", "--output-format", "json",
         "--no-cache", "--isolated", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    found = [(item["filename"].rsplit("/", 1)[-1], item["location"]["row"]) for item in json.loads(proc.stdout)]
    row = next(n for n, line in enumerate(user.splitlines(), 1) if "# expect: TML601" in line)
    assert found == [("heads.py", row)], (found, proc.stderr)
