"""TML403 on transformers 5's layer classes: a class deriving ``GradientCheckpointingLayer``
has every call of its ``forward`` checkpointed while gradient checkpointing is on, so a
BatchNorm it holds (a conformer layer's convolution module) is updated twice per step. The
forms of transformers' own model files (reduced and rewritten): the base imported from
``transformers``, from ``transformers.modeling_layers`` or relatively, a layer deriving another
layer of the file or of another file of the project. Quiet look-alikes: a layer holding only
LayerNorm, BatchNorm without running statistics, a BatchNorm module that derives ``nn.Module``
only, a local class that happens to be called ``GradientCheckpointingLayer``.

Each case marks the rows that must be reported with ``# expect: TML403``; every other row must
stay quiet."""

from __future__ import annotations

import textwrap

import pytest

from marked_cases import marked
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

CONFORMER = '''
import torch
from torch import nn
{import_line}


class ConvolutionModule(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.pointwise_conv1 = nn.Conv1d(config.hidden_size, 2 * config.hidden_size, 1)
        self.glu = nn.GLU(dim=1)
        self.depthwise_conv = nn.Conv1d(config.hidden_size, config.hidden_size, 31, groups=config.hidden_size, padding=15)
        self.batch_norm = nn.BatchNorm1d(config.hidden_size)
        self.activation = nn.SiLU()

    def forward(self, hidden_states):
        hidden_states = self.glu(self.pointwise_conv1(hidden_states.transpose(1, 2)))
        hidden_states = self.activation(self.batch_norm(self.depthwise_conv(hidden_states)))
        return hidden_states.transpose(1, 2)


class FeedForward(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fc1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.fc2 = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, x):
        return self.fc2(torch.nn.functional.silu(self.fc1(x)))


class ConformerEncoderLayer({base}):  # expect: TML403
    def __init__(self, config):
        super().__init__()
        self.ffn1 = FeedForward(config)
        self.self_attn_layer_norm = nn.LayerNorm(config.hidden_size)
        self.self_attn = nn.MultiheadAttention(config.hidden_size, 4, batch_first=True)
        self.conv_module = ConvolutionModule(config)
        self.ffn2 = FeedForward(config)
        self.final_layer_norm = nn.LayerNorm(config.hidden_size)

    def forward(self, hidden_states, attention_mask=None):
        hidden_states = hidden_states + 0.5 * self.ffn1(hidden_states)
        normed = self.self_attn_layer_norm(hidden_states)
        hidden_states = hidden_states + self.self_attn(normed, normed, normed)[0]
        hidden_states = hidden_states + self.conv_module(hidden_states)
        hidden_states = hidden_states + 0.5 * self.ffn2(hidden_states)
        return self.final_layer_norm(hidden_states)


class SharedConformerEncoderLayer(ConformerEncoderLayer):  # expect: TML403
    pass


class DecoderLayer({base}):
    def __init__(self, config):
        super().__init__()
        self.input_layernorm = nn.LayerNorm(config.hidden_size)
        self.mlp = FeedForward(config)

    def forward(self, hidden_states):
        return hidden_states + self.mlp(self.input_layernorm(hidden_states))


class StatelessNormLayer({base}):
    def __init__(self, config):
        super().__init__()
        self.norm = nn.BatchNorm1d(config.hidden_size, track_running_stats=False)

    def forward(self, hidden_states):
        return self.norm(hidden_states)


class Encoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layers = nn.ModuleList([ConformerEncoderLayer(config) for _ in range(config.num_layers)])
        self.gradient_checkpointing = False

    def forward(self, hidden_states):
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return hidden_states
'''

FORMS = {
    "top_level": ("from transformers import GradientCheckpointingLayer", "GradientCheckpointingLayer"),
    "modeling_layers": ("from transformers.modeling_layers import GradientCheckpointingLayer as GCLayer", "GCLayer"),
    "module": ("import transformers.modeling_layers", "transformers.modeling_layers.GradientCheckpointingLayer"),
    "relative": ("from ...modeling_layers import GradientCheckpointingLayer", "GradientCheckpointingLayer"),
}

LOOKALIKE = CONFORMER.replace("  # expect: TML403", "").format(
    import_line="\n\nclass GradientCheckpointingLayer(nn.Module):\n    gradient_checkpointing = False\n",
    base="GradientCheckpointingLayer",
)


def _found(source: str):
    return {(f.location.row, f.code) for f in lint_source(source, "case.py", Settings(select=("TML403",)))}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_a_layer_holding_batchnorm_is_reported_at_its_class(form):
    import_line, base = FORMS[form]
    source = textwrap.dedent(CONFORMER.format(import_line=import_line, base=base))
    assert _found(source) == marked(source)


def test_a_local_class_of_that_name_checkpoints_nothing():
    assert _found(textwrap.dedent(LOOKALIKE)) == set()


def test_a_layer_deriving_one_of_another_file(tmp_path):
    """A modular model file: its layer derives a layer another file of the package defines."""
    package = tmp_path / "models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text(textwrap.dedent(CONFORMER.format(
        import_line="from transformers import GradientCheckpointingLayer", base="GradientCheckpointingLayer")))
    source = textwrap.dedent('''
        from torch import nn
        from transformers.modeling_layers import GradientCheckpointingLayer

        from .layers import ConformerEncoderLayer, DecoderLayer


        class WideConformerEncoderLayer(ConformerEncoderLayer):
            pass


        class WideDecoderLayer(DecoderLayer):
            pass
    ''')
    path = package / "wide.py"
    path.write_text(source)
    from torchmemlint.engine import lint_paths
    (result,) = lint_paths([str(path)], Settings(select=("TML403",)), jobs=1)
    assert [(f.location.row, f.code) for f in result.findings] == [(8, "TML403")]
