"""TML601 on transformers-style models whose attention weights are returned only when
``output_attentions`` is set, off by default (``flags.py``, ``forward_calls.py``, ``built_lists.py``):

- the flag threaded down the module tree: ``BertModel.forward`` rebinds it to
  ``self.config.output_attentions`` when its caller passes ``None`` (transformers'
  ``PretrainedConfig`` defaults it to ``False``), passes it to the encoder, whose layers are
  built by a comprehension into a ``ModuleList`` and run as ``self.layer[i]``, directly or
  through a checkpointed closure (``create_custom_forward(layer_module)``, whose
  ``module(*inputs, past_key_value, output_attentions)`` gets the checkpoint's arguments first),
  or through ``self._gradient_checkpointing_func(layer.__call__, ...)``;
- members of the held instances read or set (``self.self.query = prune(...)``), the attribute
  name held by another class for another module (``self.attention`` in two classes), the class
  named in an annotation or an ``isinstance``: none of them calls ``forward``;
- the weights set to ``None`` unless the flag is set (``if not output_attentions: attn_weights =
  None``, the weights then returned; TransUNet's ``weights = attention_probs if self.vis else
  None``, ``vis`` a constructor parameter without a default that every construction gives, down
  from the model's ``vis=False``), and a helper that appends them to its outputs under
  ``self.output_attentions = config.output_attentions`` (pytorch-transformers' models);
- the building class's own flag handed down (Time-Series-Library: ``self.output_attention =
  False`` then ``FullAttention(..., output_attention=self.output_attention)``).

Look-alikes stay quiet: a caller that passes ``output_attentions=True``; a configuration that is
not transformers' (its ``output_attentions`` default unknown); a layer list passed elsewhere or
never run in the file; the layers' call on the default path passing ``True`` (a checkpointed
closure passing it runs only under ``self.gradient_checkpointing``, off by default); weights
nulled when the flag IS set.
"""

from __future__ import annotations

from attention_cases import found_sites, run_cli

BERT = '''
import math

import torch
import torch.nn as nn
import torch.utils.checkpoint
from transformers import PreTrainedModel


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(*new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None, head_mask=None, past_key_value=None, output_attentions=False):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.Softmax(dim=-1)(attention_scores)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(*(context_layer.size()[:-2] + (self.all_head_size,)))
        outputs = (context_layer, attention_probs) if output_attentions else (context_layer,)
        outputs = outputs + (past_key_value,)
        return outputs


class BertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)

    def prune_heads(self, index):
        self.self.query = nn.Linear(self.self.query.in_features, len(index))
        self.self.num_attention_heads = self.self.num_attention_heads - 1

    def forward(self, hidden_states, attention_mask=None, head_mask=None, past_key_value=None, output_attentions=False):
        self_outputs = self.self(hidden_states, attention_mask, head_mask, past_key_value, output_attentions)
        return (self.output(self_outputs[0]),) + self_outputs[1:]


class BertLayer(nn.Module):
    def __init__(self, config, index):
        super().__init__()
        self.attention = BertAttention(config)

    def forward(self, hidden_states, attention_mask=None, head_mask=None, past_key_value=None, output_attentions=False, mode="text"):
        return self.attention(hidden_states, attention_mask, head_mask, output_attentions=output_attentions, past_key_value=past_key_value)


class BertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.layer = nn.ModuleList([BertLayer(config, i) for i in range(config.num_hidden_layers)])
        self.gradient_checkpointing = False

    def forward(self, hidden_states, attention_mask=None, head_mask=None, past_key_values=None, output_attentions=False, mode="text"):
        all_self_attentions = () if output_attentions else None
        for i in range(len(self.layer)):
            layer_module = self.layer[i]
            layer_head_mask = head_mask[i] if head_mask is not None else None
            past_key_value = past_key_values[i] if past_key_values is not None else None
            if self.gradient_checkpointing and self.training:

                def create_custom_forward(module):
                    def custom_forward(*inputs):
                        return module(*inputs, past_key_value, output_attentions)

                    return custom_forward

                layer_outputs = torch.utils.checkpoint.checkpoint(
                    create_custom_forward(layer_module), hidden_states, attention_mask, layer_head_mask, mode=mode
                )
            else:
                layer_outputs = layer_module(hidden_states, attention_mask, layer_head_mask, past_key_value, output_attentions, mode=mode)
            hidden_states = layer_outputs[0]
            if output_attentions:
                all_self_attentions = all_self_attentions + (layer_outputs[1],)
        return hidden_states, all_self_attentions


class BertModel(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.config = config
        self.encoder = BertEncoder(config)

    def _set_gradient_checkpointing(self, module: BertEncoder, value=False):
        if isinstance(module, BertEncoder):
            module.gradient_checkpointing = value

    def _prune_heads(self, heads_to_prune):
        for layer, heads in heads_to_prune.items():
            self.encoder.layer[layer].attention.prune_heads(heads)

    def forward(self, embedding_output, attention_mask=None, output_attentions=None):
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        return self.encoder(embedding_output, attention_mask=attention_mask, output_attentions=output_attentions)


class BertLMHeadModel(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.bert = BertModel(config)

    def get_decoder(self):
        return self.bert

    def forward(self, embedding_output, attention_mask=None, output_attentions=None):
        return self.bert(embedding_output, attention_mask, output_attentions=output_attentions)
'''

LLAMA = '''
import math

import torch
import torch.nn as nn
from transformers.modeling_utils import PreTrainedModel


class LlamaAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // self.num_heads
        self.q_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.k_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.v_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, use_cache=False):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).reshape(bsz, q_len, -1)
        attn_output = self.o_proj(attn_output)
        if not output_attentions:
            attn_weights = None
        return attn_output, attn_weights


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = LlamaAttention(config=config)

    def forward(self, hidden_states, attention_mask=None, output_attentions=False, use_cache=False):
        hidden_states, weights = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask, output_attentions=output_attentions)
        return (hidden_states, weights) if output_attentions else (hidden_states,)


class LlamaModel(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.layers = nn.ModuleList([LlamaDecoderLayer(config) for _ in range(config.num_hidden_layers)])
        self.gradient_checkpointing = False

    def forward(self, hidden_states, attention_mask=None, output_attentions=None):
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        for idx, decoder_layer in enumerate(self.layers):
            if self.gradient_checkpointing and self.training:
                layer_outputs = self._gradient_checkpointing_func(decoder_layer.__call__, hidden_states, attention_mask, output_attentions)
            else:
                layer_outputs = decoder_layer(hidden_states, attention_mask=attention_mask, output_attentions=output_attentions)
            hidden_states = layer_outputs[0]
        return hidden_states
'''

GPT2 = '''
import math

import torch
import torch.nn as nn

from .modeling_utils import PretrainedConfig, PreTrainedModel


class Attention(nn.Module):
    def __init__(self, nx, n_ctx, config):
        super().__init__()
        self.output_attentions = config.output_attentions
        self.n_head = config.n_head
        self.c_attn = nn.Linear(nx, nx * 3)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)

    def _attn(self, q, k, v, head_mask=None):
        w = torch.matmul(q, k) / math.sqrt(v.size(-1))
        w = nn.Softmax(dim=-1)(w)
        w = self.attn_dropout(w)
        outputs = [torch.matmul(w, v)]
        if self.output_attentions:
            outputs.append(w)
        return outputs

    def split_heads(self, x, k=False):
        x = x.view(x.size(0), x.size(1), self.n_head, x.size(-1) // self.n_head)
        if k:
            return x.permute(0, 2, 3, 1)
        return x.permute(0, 2, 1, 3)

    def forward(self, x):
        query, key, value = self.c_attn(x).split(x.size(-1), dim=2)
        query = self.split_heads(query)
        key = self.split_heads(key, k=True)
        value = self.split_heads(value)
        attn_outputs = self._attn(query, key, value)
        return attn_outputs[0].permute(0, 2, 1, 3).reshape(x.size(0), x.size(1), -1)
'''


TRANSUNET = '''
import math

import torch
import torch.nn as nn
from torch.nn import Dropout, Linear, Softmax


class Attention(nn.Module):
    def __init__(self, config, vis):
        super().__init__()
        self.vis = vis
        self.num_attention_heads = config.num_heads
        self.attention_head_size = config.hidden_size // config.num_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = Linear(config.hidden_size, self.all_head_size)
        self.key = Linear(config.hidden_size, self.all_head_size)
        self.value = Linear(config.hidden_size, self.all_head_size)
        self.out = Linear(config.hidden_size, config.hidden_size)
        self.attn_dropout = Dropout(config.attention_dropout_rate)
        self.softmax = Softmax(dim=-1)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(*new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_probs = self.softmax(attention_scores)
        weights = attention_probs if self.vis else None
        attention_probs = self.attn_dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        context_layer = context_layer.view(*(context_layer.size()[:-2] + (self.all_head_size,)))
        return self.out(context_layer), weights


class Block(nn.Module):
    def __init__(self, config, vis):
        super().__init__()
        self.attn = Attention(config, vis)

    def forward(self, x):
        h, weights = self.attn(x)
        return x + h, weights


class Encoder(nn.Module):
    def __init__(self, config, vis):
        super().__init__()
        self.vis = vis
        self.layer = nn.ModuleList()
        for _ in range(config.num_layers):
            self.layer.append(Block(config, vis))

    def forward(self, hidden_states):
        attn_weights = []
        for layer_block in self.layer:
            hidden_states, weights = layer_block(hidden_states)
            if self.vis:
                attn_weights.append(weights)
        return hidden_states, attn_weights


class VisionTransformer(nn.Module):
    def __init__(self, config, img_size=224, num_classes=21843, zero_head=False, vis=False):
        super().__init__()
        self.encoder = Encoder(config, vis)

    def forward(self, x):
        return self.encoder(x)[0]
'''


def test_the_flag_off_through_the_config_threads_down_to_the_attention():
    (site,) = found_sites(BERT)
    assert site.function.name.value == "forward"
    assert "`output_attentions` is set" in site.reason and not site.fixable, site.reason


def test_a_configuration_module_of_the_package_counts_as_transformers():
    copied = BERT.replace("from transformers import PreTrainedModel", "from .configuration_bert import BertConfig\nfrom .modeling_utils import PreTrainedModel")
    assert len(found_sites(copied)) == 1


def test_weights_nulled_unless_the_flag_is_set_are_not_kept():
    (site,) = found_sites(LLAMA)
    assert not site.fixable  # (SDPA does not make the weights the flag returns; also cast before v)


def test_a_helper_appending_the_weights_under_the_config_flag():
    (site,) = found_sites(GPT2)
    assert site.function.name.value == "forward" and not site.fixable  # (where forward runs it: k laid out there)


def test_the_cli_reports_each_form(tmp_path):
    for name, source in (("bert", BERT), ("llama", LLAMA), ("gpt2", GPT2)):
        (tmp_path / f"modeling_{name}.py").write_text(source)
    result = run_cli("--no-cache", "--select", "TML601", "--output-format", "concise", str(tmp_path))
    reported = sorted(line.split(":")[0].rsplit("/", 1)[-1] for line in result.stdout.splitlines() if "TML601" in line)
    assert reported == ["modeling_bert.py", "modeling_gpt2.py", "modeling_llama.py"], result.stdout + result.stderr


def test_look_alikes_stay_quiet():
    turned_on = BERT.replace(
        "return self.encoder(embedding_output, attention_mask=attention_mask, output_attentions=output_attentions)",
        "return self.encoder(embedding_output, attention_mask=attention_mask, output_attentions=True)",
    )
    own_config = BERT.replace("from transformers import PreTrainedModel", "from .base import PreTrainedModel")
    passed_on = BERT.replace("        self.gradient_checkpointing = False\n", "        self.gradient_checkpointing = False\n        self.hooks = register(self.layer)\n", 1)
    never_run = LLAMA.replace("        for idx, decoder_layer in enumerate(self.layers):", "        for idx in range(0):").replace(
        "layer_outputs = self._gradient_checkpointing_func(decoder_layer.__call__, hidden_states, attention_mask, output_attentions)", "layer_outputs = (hidden_states,)"
    ).replace("layer_outputs = decoder_layer(hidden_states, attention_mask=attention_mask, output_attentions=output_attentions)", "layer_outputs = (hidden_states,)")
    called_on = BERT.replace(
        "layer_outputs = layer_module(hidden_states, attention_mask, layer_head_mask, past_key_value, output_attentions, mode=mode)",
        "layer_outputs = layer_module(hidden_states, attention_mask, layer_head_mask, past_key_value, True, mode=mode)",
    )
    nulled_when_set = LLAMA.replace("if not output_attentions:", "if output_attentions:")
    own_gpt2 = GPT2.replace("from .modeling_utils import PretrainedConfig, PreTrainedModel", "from .modeling_utils import PreTrainedModel")
    cases = {
        "turned on": turned_on, "own config": own_config, "list passed on": passed_on, "list never run": never_run,
        "the default path turns it on": called_on, "nulled when set": nulled_when_set, "gpt2 own config": own_gpt2,
    }
    for name, source in cases.items():
        assert source != BERT and source != LLAMA and source != GPT2, name
        assert found_sites(source) == [], name


def test_weights_chosen_by_a_constructor_flag_every_caller_leaves_off():
    (site,) = found_sites(TRANSUNET)
    assert not site.fixable
    on_by_default = TRANSUNET.replace("zero_head=False, vis=False):", "zero_head=False, vis=True):")
    turned_on = TRANSUNET.replace("self.encoder = Encoder(config, vis)", "self.encoder = Encoder(config, True)")
    kept_always = TRANSUNET.replace("weights = attention_probs if self.vis else None", "weights = attention_probs")
    for source in (on_by_default, turned_on, kept_always):
        assert source != TRANSUNET and found_sites(source) == []


# -- callers a review found the first version missed: each turns the flag on (or may) -------------
REVIEW_BASE = '''
import torch
import torch.nn as nn
from transformers import PreTrainedModel


class Attn(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.k = nn.Linear(8, 8)
        self.v = nn.Linear(8, 8)

    def forward(self, x, output_attentions=False):
        s = torch.matmul(self.q(x), self.k(x).transpose(-1, -2))
        p = s.softmax(dim=-1)
        o = torch.matmul(p, self.v(x))
        return (o, p) if output_attentions else (o,)


class Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = Attn(config)

    def forward(self, x, output_attentions=False):
        return self.attention(x, output_attentions=output_attentions)


class Encoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([Layer(config) for _ in range(4)])

    def forward(self, x, output_attentions=False):
        for i in range(len(self.layer)):
            m = self.layer[i]
            x = m(x, output_attentions)[0]
        return x


class Model(PreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.config = config
        self.encoder = Encoder(config)

    def forward(self, x, output_attentions=None):
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        return self.encoder(x, output_attentions=output_attentions)
'''

REVIEW_CALLERS = {
    'a configuration built with the flag on': '''

from transformers import BertConfig


class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Model(BertConfig(output_attentions=True))

    def forward(self, x):
        return self.model(x)
''',
    'a configuration given the flag': '''

class Wrapper(nn.Module):
    def __init__(self, config):
        super().__init__()
        config.output_attentions = True
        self.model = Model(config)

    def forward(self, x):
        return self.model(x)
''',
    'a subclass calling the holder it inherits': '''

class Holder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attention = Attn(config)

    def forward(self, x):
        return self.attention(x)[0]


class Sub(Holder):
    def __init__(self, config):
        super().__init__(config)
        if config.no_attn:
            self.attention = nn.Identity()

    def forward(self, x):
        return self.attention(x, output_attentions=True)
''',
    'a holder returned to a caller of the file': '''

class Probe(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.block = Layer(config)

    def get_attention(self):
        return self.block.attention

    def forward(self, x):
        return self.get_attention()(x, output_attentions=True)
''',
    'an isinstance-selected module called': '''

def attention_maps(model, x):
    maps = []
    for m in model.modules():
        if isinstance(m, Attn):
            maps.append(m(x, output_attentions=True)[1])
    return maps
''',
    'the class calling itself with the flag': '''

class Probe(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.attn = Attn(config)

    def forward(self, x):
        return self.attn(x)[0]

    def maps(self, x):
        return self.attn.attention_map(x)


def attention_map(self, x):
    return self(x, output_attentions=True)[1]


Attn.attention_map = attention_map
''',
}


def test_the_review_base_is_reported_and_each_caller_that_turns_the_flag_on_keeps_it_quiet():
    assert len(found_sites(REVIEW_BASE)) == 1
    for name, tail in REVIEW_CALLERS.items():
        assert found_sites(REVIEW_BASE + tail) == [], name


def test_a_method_of_the_class_calling_itself_with_the_flag():
    own = REVIEW_BASE.replace(
        "        return (o, p) if output_attentions else (o,)\n",
        "        return (o, p) if output_attentions else (o,)\n\n    def attention_map(self, x):\n        return self(x, output_attentions=True)[1]\n",
    )
    assert own != REVIEW_BASE and found_sites(own) == []


def test_a_recursive_flag_chain_is_not_an_internal_error(tmp_path):
    source = """
import torch
import torch.nn as nn


class Node(nn.Module):
    def __init__(self, depth, keep=False):
        super().__init__()
        self.keep = keep
        self.q = nn.Linear(8, 8)
        f = self.keep
        self.child = Node(depth - 1, keep=f) if depth else None

    def forward(self, x):
        s = torch.matmul(self.q(x), x.transpose(-1, -2))
        p = s.softmax(dim=-1)
        o = torch.matmul(p, x)
        if self.keep:
            return o, p
        return o
"""
    path = tmp_path / "node.py"
    path.write_text(source)
    result = run_cli("--no-cache", "--select", "TML601", str(path))
    assert "TML900" not in result.stdout and result.returncode in (0, 1), result.stdout + result.stderr


def test_transformers_init_weights_hooks_are_type_tests_only():
    hooked = BERT.replace(
        "    def _prune_heads(self, heads_to_prune):",
        "    def _init_weights(self, module):\n"
        "        super()._init_weights(module)\n"
        "        if isinstance(module, BertSelfAttention):\n"
        "            module.query.weight.data.normal_()\n"
        "        elif isinstance(module, BertLayer):\n"
        "            module.reset_parameters()\n\n"
        "    def _prune_heads(self, heads_to_prune):",
    )
    assert hooked != BERT and len(found_sites(hooked)) == 1
    handed = hooked.replace("            module.reset_parameters()\n", "            keep(module)\n")
    assert handed != hooked and found_sites(handed) == []  # (the module passed on: its calls unknown)


# -- Time-Series-Library style: the model sets its own flag off and hands it to the attention ------
TSLIB = '''
from math import sqrt

import numpy as np
import torch
import torch.nn as nn


class FullAttention(nn.Module):
    def __init__(self, mask_flag=True, factor=5, scale=None, attention_dropout=0.1, output_attention=False, configs=None):
        super(FullAttention, self).__init__()
        self.mask_flag = mask_flag
        self.output_attention = output_attention
        self.dropout = nn.Dropout(attention_dropout)
        self.scale = scale

    def forward(self, queries, keys, values, attn_mask):
        B, L, H, E = queries.shape
        scale = self.scale or 1. / sqrt(E)
        scores = torch.einsum("blhe,bshe->bhls", queries, keys)
        if self.mask_flag:
            scores.masked_fill_(attn_mask, -np.inf)
        A = self.dropout(torch.softmax(scores * scale, dim=-1))
        V = torch.einsum("bhls,bshd->blhd", A, values)
        if self.output_attention:
            return (V.contiguous(), A)
        else:
            return (V.contiguous(), None)


class Model(nn.Module):
    def __init__(self, configs):
        super().__init__()
        self.output_attention = False
        self.attention = FullAttention(False, configs.factor, attention_dropout=configs.dropout,
                                       output_attention=self.output_attention, configs=configs)

    def forward(self, x):
        out, attn = self.attention(x, x, x, None)
        if self.output_attention:
            return out, attn
        return out
'''


def test_a_flag_the_building_class_sets_off_on_itself():
    (site,) = found_sites(TSLIB)
    assert site.function.name.value == "forward" and not site.fixable
    set_on = TSLIB.replace("        self.output_attention = False\n", "        self.output_attention = True\n")
    from_config = TSLIB.replace("        self.output_attention = False\n", "        self.output_attention = configs.output_attention\n")
    set_twice = TSLIB.replace("    def forward(self, x):\n        out,", "    def show(self):\n        self.output_attention = True\n\n    def forward(self, x):\n        out,")
    for source in (set_on, from_config, set_twice):
        assert source != TSLIB and found_sites(source) == []
