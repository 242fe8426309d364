"""TML601 through ``self.<name>(scores, q, k)`` where ``__init__`` assigns ``self.<name>`` an
instance of a module class of the same file, or one of two in the arms of an ``if``/``else``
(``self.make_causal = Causal(...)`` if causal else ``NonCausal()``: random_neural_net_models'
transformer, a measured miss on a held-out set). The value graph runs each class's ``forward``
with the call's arguments and its own ``self`` (``attribute_calls._held_module_call``): the
causal mask's ``masked_fill`` and the identity both keep the scores' axes, so the softmax (an
``nn.Softmax`` attribute) over the keys and the product with ``v`` are eager attention.
Reported without a fix: SDPA cannot run the module.

Quiet: a held module whose ``forward`` keeps the scores (a recorder appending them to a list of
its own: the weights escape), and one that reduces them over the keys (no key axis left for
the softmax)."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import fix_at, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

HELPERS = '''
class Causal(nn.Module):
    def __init__(self, n_q, n_kv):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(n_q, n_kv)).view(1, 1, n_q, n_kv))

    def forward(self, attn, q, k):
        n_q, n_k = q.shape[2], k.shape[2]
        return attn.masked_fill(self.bias[:, :, :n_q, :n_k] == 0, float("-inf"))


class NonCausal(nn.Module):
    def forward(self, attn, *args):
        return attn


class Recorder(nn.Module):
    def __init__(self):
        super().__init__()
        self.maps = []

    def forward(self, attn, q, k):
        self.maps.append(attn)
        return attn


class Pooled(nn.Module):
    def forward(self, attn, q, k):
        return attn.mean(dim=-1, keepdim=True)
'''


def attention(init: str, mark: str) -> str:
    return '''
import torch
import torch.nn as nn
from einops import einsum, rearrange
''' + HELPERS + '''

class Attention(nn.Module):
    def __init__(self, dim, causal, n_q, n_kv):
        super().__init__()
        self.softmax = nn.Softmax(dim=-1)
        self.out = nn.Linear(dim, dim)
INIT

    def forward(self, q, k, v):
        _, _, _, part = q.shape
        k_t = rearrange(k, "B H N P -> B H P N")
        attn = einsum(q, k_t, "B H NQ P, B H P NK -> B H NQ NK")
        attn = attn / part
        attn = self.make_causal(attn, q, k)
        attn = self.softmax(attn)
        out = einsum(attn, v, "B H NQ NK, B H NK P -> B H NQ P")MARK
        return self.out(rearrange(out, "B H N P -> B N (H P)"))
'''.replace("INIT", init).replace("MARK", mark)


EITHER = '''        if causal:
            self.make_causal = Causal(n_q, n_kv)
        else:
            self.make_causal = NonCausal()'''

CASES: Dict[str, str] = {
    "causal_or_not": attention(EITHER, "  # expect: TML601 fix=none"),
    "always_causal": attention("        self.make_causal = Causal(n_q, n_kv)", "  # expect: TML601 fix=none"),
    "never_causal": attention("        self.make_causal = NonCausal()", "  # expect: TML601 fix=none"),
    # look-alikes: the weights kept by the held module; the keys reduced away
    "recorded": attention("        self.make_causal = Recorder()", ""),
    "pooled": attention("        self.make_causal = Pooled()", ""),
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("held_modules"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


@pytest.mark.parametrize("name", ["causal_or_not", "always_causal", "never_causal"])
def test_reported_without_a_fix(findings, name):
    assert all(fix_at(findings[name], row) == fix for row, fix in marked_fixes(CASES[name]).items())
