"""TML601 and a weights flag passed down through a module list filled by ``append`` (lfm2's
``self.layers = nn.ModuleList()``, ``self.layers.append(LFM2Block(config))`` for attention and
convolution blocks alike, run as ``for i, layer in enumerate(self.layers)`` with an
``isinstance`` test choosing the call), and read from the file's own configuration class when
the caller passes ``None`` (``output_attentions if output_attentions is not None else
self.config.output_attentions``, with ``output_attentions: bool = False`` in a dataclass ending
in ``Config``). Off by default: the weights are not kept, the attention is reported. A
configuration defaulting the flag on, or a list grown by ``extend`` of modules the file does not
show, keeps it quiet."""

from __future__ import annotations

import subprocess
import sys
import textwrap

MODEL = textwrap.dedent(
    """\
    import math
    from dataclasses import dataclass
    from typing import Optional

    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    @dataclass
    class TinyConfig:
        hidden_size: int = 32
        num_heads: int = 4
        num_conv_blocks: int = 1
        num_attention_blocks: int = 2
        output_attentions: bool = False


    class Attention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.h = config.num_heads
            self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)

        def forward(self, x, output_attentions: bool = False):
            b, n, c = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, self.h, c // self.h).permute(2, 0, 3, 1, 4)
            weights = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(c // self.h)
            weights = F.softmax(weights, dim=-1)
            out = torch.matmul(weights, v)  # row 30
            if not output_attentions:
                weights = None
            return out.transpose(1, 2).reshape(b, n, c), weights


    class ConvBlock(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.conv = nn.Conv1d(config.hidden_size, config.hidden_size, 3, padding=1)

        def forward(self, x):
            return self.conv(x.transpose(1, 2)).transpose(1, 2)


    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.attn = Attention(config)

        def forward(self, x, output_attentions: Optional[bool] = False):
            out, weights = self.attn(x, output_attentions=output_attentions)
            return (x + out, weights) if output_attentions else (x + out,)


    class Model(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.layers = nn.ModuleList()
            for _ in range(config.num_conv_blocks):
                self.layers.append(ConvBlock(config))
            for _ in range(config.num_attention_blocks):
                self.layers.append(Block(config))

        def forward(self, x, output_attentions: Optional[bool] = None):
            output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
            for i, layer in enumerate(self.layers):
                if isinstance(layer, ConvBlock):
                    x = layer(x)
                else:
                    x = layer(x, output_attentions=output_attentions)[0]
            return x
    """
)


def _rows(tmp_path, text: str) -> list:
    (tmp_path / "model.py").write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", "TML601", "model.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert result.returncode in (0, 1), result.stderr
    return [int(line.split(":")[1]) for line in result.stdout.splitlines() if "TML601" in line]


def test_a_flag_off_in_the_files_configuration_through_appended_blocks(tmp_path):
    assert _rows(tmp_path, MODEL) == [30]


def test_a_configuration_that_turns_the_flag_on_keeps_the_weights(tmp_path):
    on = MODEL.replace("output_attentions: bool = False\n", "output_attentions: bool = True\n")
    assert on != MODEL and _rows(tmp_path, on) == []


def test_a_list_extended_with_modules_the_file_does_not_show_stays_quiet(tmp_path):
    extended = MODEL.replace(
        "        for _ in range(config.num_attention_blocks):\n            self.layers.append(Block(config))\n",
        "        for _ in range(config.num_attention_blocks):\n            self.layers.append(Block(config))\n        self.layers.extend(config.extra_blocks)\n",
    )
    assert extended != MODEL and _rows(tmp_path, extended) == []


FACTORY = MODEL + textwrap.dedent(
    """\


    def create_model(size="tiny", **overrides):
        config = TinyConfig(**overrides)
        model = Model(config)
        print(sum(p.numel() for p in model.parameters()))
        return model


    def demo():
        model = create_model()
        model.eval()
        return model(torch.randn(2, 8, model.config.hidden_size)).shape
    """
)


def test_a_model_a_factory_hands_out_is_run_as_its_callers_in_the_file_say(tmp_path):
    """lfm2's ``model = LFM2ForCausalLM(config); return model``: the file's own calls of what
    the factory returns leave the flag off; one turning it on keeps the weights, one handing
    the model on is not known."""
    assert _rows(tmp_path, FACTORY) == [30]
    turned_on = FACTORY.replace(
        "model.config.hidden_size)).shape", "model.config.hidden_size), output_attentions=True).shape"
    )
    assert turned_on != FACTORY and _rows(tmp_path, turned_on) == []
    handed_on = FACTORY.replace("    model.eval()\n", "    model.eval()\n    register(model)\n")
    assert handed_on != FACTORY and _rows(tmp_path, handed_on) == []
