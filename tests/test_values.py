"""The value graph (analysis/values.py): spellings normalised to operations over named axes,
branches joined, helpers summarised, uses recorded."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.names import Bindings


def graph(source: str, name: str = "forward"):
    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    analysis = FileAnalysis(module, bindings, text=module.code)
    for function, _ in analysis.value_graphs.functions():
        if function.name.value == name:
            return analysis, analysis.values(function)
    raise AssertionError(name)


def ops(values, op):
    return [v for v in values.values if v.op == op and v.function is values.function]


def bound(values, name):
    """The last value a name was bound to."""
    found = [v for v in values.values if name in v.info.get("names", ())]
    return found[-1]


def upstream(value, op):
    """The first value of ``op`` reached from ``value`` through its first inputs."""
    while value.op != op:
        assert value.inputs, value.op
        value = value.inputs[0]
    return value


def test_every_contraction_spelling_is_one_operation_over_named_axes():
    _, values = graph(
        """
        import torch
        import einops
        from torch import einsum

        def forward(q, k, v, h):
            spec = "b h"
            a = q @ k.transpose(-2, -1)
            b = torch.matmul(q, k.mT)
            c = torch.bmm(q, k.permute(0, 2, 1))
            d = q.matmul(k.transpose(-1, -2))
            e = einsum("b h i d, b h j d -> b h i j", q, k)
            f = torch.einsum("bct,bcs->bts", q, k)
            g = einops.einsum(q, k, "b i d, b j d -> b i j")
            i = torch.einsum(f"{spec} i d, {spec} j d -> {spec} i j", q, k)
            return a, b, c, d, e, f, g, i
        """
    )
    contractions = ops(values, "contract")
    assert len(contractions) == 8
    assert [len(c.info["contracted"]) for c in contractions] == [1] * 8
    channel_first = contractions[5]
    assert channel_first.info["specs"] == (("b", "c", "t"), ("b", "c", "s"), ("b", "t", "s"))
    assert channel_first.info["contracted"] == ["c"] and channel_first.rank == 3
    # the output axes say which operand each came from: the key axis comes from the right
    assert [axis.side for axis in channel_first.axes] == ["both", "left", "right"]
    assert contractions[7].info["specs"][2] == ("b", "h", "i", "j")  # the f-string's constant parts
    assert contractions[6].info["operands"][0].value == "q"  # einops: tensors first, pattern last


def test_transposes_and_permutes_relabel_the_same_axes():
    _, values = graph(
        """
        import torch

        def forward(q, k):
            s = torch.einsum("bid,bjd->bij", q, k)
            t = s.transpose(1, 2)
            p = s.permute(0, 2, 1)
            return t, p
        """
    )
    scores = ops(values, "contract")[0]
    transposed, permuted = bound(values, "t"), bound(values, "p")
    assert transposed.axes == (scores.axes[0], scores.axes[2], scores.axes[1])
    assert permuted.axes == transposed.axes and permuted.info["swap"] and transposed.info["swap"]


def test_softmax_spellings_are_one_operation_over_one_axis():
    _, values = graph(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Attention(nn.Module):
            def __init__(self, p):
                super().__init__()
                self.attend = nn.Softmax(dim=-1)
                self.attend_drop = nn.Sequential(nn.Softmax(-1), nn.Dropout(p))

            def forward(self, q, k, stable):
                s = torch.einsum("bid,bjd->bij", q, k)
                softmax = torch.softmax if stable else F.softmax
                a = self.attend(s)
                b = self.attend_drop(s)
                c = softmax(s, dim=-1)
                d = s.softmax(dim=2)
                e = F.softmax(s, dim=1)
                return a, b, c, d, e
        """
    )
    key = ops(values, "contract")[0].axes[-1]
    a, b, c, d, e = (bound(values, n) for n in "abcde")
    assert a.op == "softmax" and a.info["axis"] is key
    assert b.op == "dropout" and b.info["layer"] == ("attend_drop", 1, 2)
    assert upstream(b, "softmax").info["axis"] is key
    assert c.op == "join" and all(arm.op == "softmax" and arm.info["axis"] is key for arm in c.inputs)
    assert d.info["axis"] is key  # dim=2 of a 3-D tensor is its last axis
    assert e.info["axis"] is not key


def test_mask_fill_values_are_computed_through_locals_helpers_and_constants():
    _, values = graph(
        """
        import torch

        NEG = -1e9

        def max_neg_value(t):
            return -torch.finfo(t.dtype).max

        def forward(sim, mask, a, b, c):
            max_neg = -torch.finfo(sim.dtype).max
            a = sim.masked_fill(mask, max_neg)
            b = sim.masked_fill(mask, max_neg_value(sim))
            c = sim.masked_fill(mask, NEG)
            d = sim.masked_fill(mask, float("-inf"))
            e = sim.masked_fill(mask, 0.0)
            return a, b, c, d, e
        """
    )
    fills = [bound(values, n).info["fill"] for n in "abcde"]
    numbers = [f.info.get("number") for f in fills]
    assert all(n is not None and n <= -1e9 for n in numbers[:4]), numbers
    assert numbers[4] == 0.0


def test_an_if_else_joins_what_both_arms_bind_and_an_ending_arm_joins_nothing():
    _, values = graph(
        """
        import torch

        def forward(q, k, mask, flash):
            if flash:
                return torch.nn.functional.scaled_dot_product_attention(q, k, k)
            s = q @ k.transpose(-2, -1)
            if mask is None:
                w = s.softmax(-1)
            else:
                w = s.masked_fill(~mask, -1e4).softmax(-1)
            return w
        """
    )
    w = values.returns[-1]
    assert w.op == "join" and [arm.op for arm in w.inputs] == ["softmax", "softmax"]
    assert w.info["branches"] == (True, False) and cst.Module([]).code_for_node(w.info["test"]) == "mask is None"
    assert len(values.returns) == 2 and values.returns[0].op == "attention"
    assert w.axes == ops(values, "contract")[0].axes  # both arms keep the scores' axes


def test_a_same_file_helper_returns_its_result_in_terms_of_its_arguments():
    _, values = graph(
        """
        import torch

        def add_rel_pos(attn, q, table):
            return attn + q @ table

        def stable_softmax(t, dim=-1):
            t = t - t.amax(dim=dim, keepdim=True).detach()
            return t.softmax(dim=dim)

        def forward(q, k, table):
            attn = torch.einsum("bid,bjd->bij", q, k)
            attn = add_rel_pos(attn, q, table)
            return stable_softmax(attn)
        """
    )
    scores = ops(values, "contract")[0]
    helper = bound(values, "attn")
    assert helper.op == "helper" and helper.axes == scores.axes
    assert upstream(helper, "contract") is scores  # the chain goes through the helper
    result = values.returns[0]
    softmax = upstream(result, "softmax")
    assert softmax.info["axis"] is scores.axes[-1]  # the default dim=-1 of the helper


def test_uses_say_where_a_value_goes():
    _, values = graph(
        """
        import torch
        import torch.nn as nn

        class A(nn.Module):
            def forward(self, q, k, v, maps):
                attn = (q @ k.transpose(-2, -1)).softmax(-1)
                n = attn.shape[-1]
                self.last = attn
                maps.append(attn)
                if attn.requires_grad:
                    pass
                return attn @ v
        """
    )
    attn = bound(values, "attn")
    consumers = values.consumers(attn)
    kinds = sorted(c if isinstance(c, str) else c.op for c in consumers)
    assert "store" in kinds and "meta" in kinds and "contract" in kinds
    assert any(not isinstance(c, str) and c.op == "call" and c.info.get("method") == "append" for c in consumers)


def test_casts_and_in_place_changes():
    _, values = graph(
        """
        import torch

        def forward(q, k, mask):
            w = torch.einsum("bid,bjd->bij", q, k)
            w.masked_fill_(mask, -1e9)
            w.mul_(0.5)
            return torch.softmax(w.float(), dim=-1).type(w.dtype)
        """
    )
    result = values.returns[0]
    assert result.op == "cast" and result.inputs[0].op == "softmax"
    inner = result.inputs[0].inputs[0]
    assert inner.op == "cast" and inner.inputs[0].op == "scale" and inner.inputs[0].inputs[0].op == "fill"


def test_the_graph_is_built_once_per_function_and_shared():
    analysis, values = graph(
        """
        def forward(x):
            return x
        """
    )
    assert analysis.values(values.function) is values


def _graph_question_blocks():
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "contributing.md").read_text(encoding="utf-8")
    section = page.split("## A rule as a graph question", 1)[1]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_graph_question_of_the_contributing_page_runs_through_the_engine(tmp_path):
    """docs/contributing.md's rule written as a graph question is a real rule: registered, it
    flags the page's two spellings and stays quiet on the look-alikes."""
    import torchmemlint.rules
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source
    from torchmemlint.rules import all_rules

    rule_source, model_source = _graph_question_blocks()[:2]
    folder = tmp_path / "graph_rules"
    folder.mkdir()
    (folder / "graph_rule.py").write_text(rule_source, encoding="utf-8")
    torchmemlint.rules.__path__.append(str(folder))
    all_rules.cache_clear()
    try:
        head = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom torch import einsum\n\n\n"
        quiet = (
            "\n\ndef classify(x):\n    return F.softmax(x, dim=-1)\n"
            "\n\ndef over_heads(q, k, v):\n    attn = einsum('b h i d, b h j d -> b h i j', q, k).softmax(dim=1)\n"
            "    return attn @ v, attn\n"
        )
        findings = lint_source(head + model_source + quiet, "model.py", Settings(select=("TML901",)))
        rows = sorted(f.location.row for f in findings)
        lines = (head + model_source).splitlines()
        assert [lines[row - 1].strip()[:10] for row in rows] == ["attn = tor", "attn = sel"]
    finally:
        torchmemlint.rules.__path__.remove(str(folder))
        all_rules.cache_clear()


def test_a_function_defined_elsewhere_keeps_the_shape_of_its_tensor_argument():
    _, values = graph(
        """
        import torch
        from .layers import add_decomposed_rel_pos

        def forward(q, k, rel):
            attn = torch.einsum("bid,bjd->bij", q, k)
            attn = add_decomposed_rel_pos(attn, q, rel)
            total = torch.sum(attn, dim=-1)
            return attn.softmax(dim=-1), total
        """
    )
    scores = ops(values, "contract")[0]
    helper = bound(values, "attn")
    assert helper.op == "helper" and helper.info["assumed"] and helper.axes == scores.axes
    assert upstream(values.returns[0].inputs[0], "softmax").info["axis"] is scores.axes[-1]
    total = bound(values, "total")  # a torch function is not assumed to keep the shape: a sum over one axis
    assert total.op == "reduce" and total.info["kind"] == "sum" and total.axes is None and not total.info["keepdim"]
