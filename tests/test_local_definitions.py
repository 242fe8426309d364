"""Classes and functions defined inside a function: a functional-module factory
(``def Module(modules, forward_fn): class Module(nn.Module): ...; return Module()``) is not a
helper the value graph may run, and the attention it wraps is still seen. Driven through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SOURCE = textwrap.dedent(
    """
    from typing import Callable, Sequence

    import torch.nn as nn
    from einops import rearrange
    from torch import einsum


    def Module(modules: Sequence[nn.Module], forward_fn: Callable):
        class Module(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList(modules)

            def forward(self, *args, **kwargs):
                return forward_fn(*args, **kwargs)

        return Module()


    def Residual(block: nn.Module) -> nn.Module:
        class Skip(nn.Module):
            def forward(self, x):
                return x + block(x)

        skip = Skip()
        return Module([skip], lambda x: skip(x))


    def AttentionBase(features: int, head_features: int, num_heads: int) -> nn.Module:
        scale = head_features ** -0.5
        to_out = nn.Linear(head_features * num_heads, features, bias=False)

        def forward(q, k, v):
            q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=num_heads), (q, k, v))
            sim = einsum("... n d, ... m d -> ... n m", q, k) * scale
            attn = sim.softmax(dim=-1)
            out = einsum("... n m, ... m d -> ... n d", attn, v)
            return to_out(rearrange(out, "b h n d -> b n (h d)"))

        return Module([to_out], forward)


    def WeightsKept(features: int) -> nn.Module:
        def forward(q, k, v):
            attn = einsum("b n d, b m d -> b n m", q, k).softmax(dim=-1)
            return einsum("b n m, b m d -> b n d", attn, v), attn

        return Module([], forward)
    """
)


def test_a_local_class_called_by_its_factory_is_no_helper_and_the_wrapped_attention_is_found(tmp_path):
    path = tmp_path / "blocks.py"
    path.write_text(SOURCE)
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--no-cache", "--output-format", "json", str(path)],
        capture_output=True, text=True, env={"PYTHONPATH": str(REPO), "PATH": ""}, timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    found = [(f["code"], f["location"]["row"]) for f in json.loads(result.stdout)]
    # the eager attention of AttentionBase (reported at its product with v), and not the one whose weights are returned
    row = next(i for i, line in enumerate(SOURCE.splitlines(), 1) if "out = einsum(\"... n m" in line)
    assert found == [("TML601", row)], found
