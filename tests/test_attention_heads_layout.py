"""TML601 and q, k kept (B, L, H, D): ``query.view(batch_size, seq_length, self.num_heads,
self.head_dim)`` multiplied by ``key.transpose(-2, -1)`` with no transpose of the heads first
(nexus' attentions) gives (B, L, H, H) scores: the softmax runs over the heads, and the weights
grow with the sequence, not its square. SDPA would compute another thing (attention over the
positions), so there is nothing to report (``axis_kinds.heads_only``): also through a slice of
the queries (``q[:, start:end]``, a block of the sequence) and an ``if`` whose arms agree.

Reported as before: the same code with the heads transposed first (``.transpose(1, 2)``), also
sliced into blocks along the sequence."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "heads_not_transposed": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from rotary_embedding_torch import RotaryEmbedding


        class MultiHeadAttention(nn.Module):
            def __init__(self, hidden_size, num_heads, add_bias=False, use_rotary: bool = False):
                super().__init__()
                self.num_heads = num_heads
                self.head_dim = hidden_size // num_heads
                self.hidden_size = hidden_size
                self.add_bias = add_bias
                self.use_rotary = use_rotary
                self.rotary_emb = RotaryEmbedding(self.head_dim)
                self.qkv_proj = nn.Linear(hidden_size, 3 * hidden_size)
                self.scale = self.head_dim ** -0.5
                self.dropout = nn.Dropout(0.1)
                self.out_proj = nn.Linear(hidden_size, hidden_size)

            def forward(self, hidden_states):
                batch_size, seq_length = hidden_states.shape[:2]
                query, key, value = self.qkv_proj(hidden_states).chunk(3, dim=-1)
                query = query.view(batch_size, seq_length, self.num_heads, self.head_dim)
                key = key.view(batch_size, seq_length, self.num_heads, self.head_dim)
                value = value.view(batch_size, seq_length, self.num_heads, self.head_dim)
                if self.add_bias:
                    query = query + 1.0
                if self.use_rotary:
                    query, key = self.rotary_emb(query, key)
                scores = torch.matmul(query, key.transpose(-2, -1)) * self.scale
                probs = self.dropout(F.softmax(scores, dim=-1))
                context = torch.matmul(probs, value)
                return self.out_proj(context.reshape(batch_size, seq_length, self.hidden_size))


        class BlockAttention(nn.Module):
            def __init__(self, hidden_size, num_heads, block_size=64):
                super().__init__()
                self.num_heads = num_heads
                self.head_dim = hidden_size // num_heads
                self.block_size = block_size
                self.q = nn.Linear(hidden_size, hidden_size)
                self.k = nn.Linear(hidden_size, hidden_size)
                self.v = nn.Linear(hidden_size, hidden_size)

            def forward(self, x):
                b, n, _ = x.shape
                q = self.q(x).view(b, n, self.num_heads, self.head_dim)
                k = self.k(x).view(b, n, self.num_heads, self.head_dim)
                v = self.v(x).view(b, n, self.num_heads, self.head_dim)
                output = torch.zeros_like(q)
                for start in range(0, n, self.block_size):
                    q_block = q[:, start:start + self.block_size]
                    scores = torch.matmul(q_block, k.transpose(-2, -1)) * self.head_dim ** -0.5
                    output[:, start:start + self.block_size] = torch.matmul(F.softmax(scores, dim=-1), v)
                return output.reshape(b, n, -1)
    ''',
    "rotary_on_by_default": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from rotary_embedding_torch import RotaryEmbedding


        class MultiHeadAttention(nn.Module):
            def __init__(self, hidden_size, num_heads, use_rotary: bool = True):
                super().__init__()
                self.num_heads = num_heads
                self.head_dim = hidden_size // num_heads
                self.use_rotary = use_rotary
                self.rotary_emb = RotaryEmbedding(self.head_dim)
                self.qkv_proj = nn.Linear(hidden_size, 3 * hidden_size)

            def forward(self, hidden_states):
                batch_size, seq_length = hidden_states.shape[:2]
                query, key, value = self.qkv_proj(hidden_states).chunk(3, dim=-1)
                query = query.view(batch_size, seq_length, self.num_heads, self.head_dim)
                key = key.view(batch_size, seq_length, self.num_heads, self.head_dim)
                value = value.view(batch_size, seq_length, self.num_heads, self.head_dim)
                if self.use_rotary:
                    query, key = self.rotary_emb(query, key)
                scores = torch.matmul(query, key.transpose(-2, -1)) * self.head_dim ** -0.5
                return torch.matmul(F.softmax(scores, dim=-1), value)  # expect: TML601
    ''',
    "heads_transposed": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class MultiHeadAttention(nn.Module):
            def __init__(self, hidden_size, num_heads):
                super().__init__()
                self.num_heads = num_heads
                self.head_dim = hidden_size // num_heads
                self.qkv_proj = nn.Linear(hidden_size, 3 * hidden_size)
                self.out_proj = nn.Linear(hidden_size, hidden_size)

            def forward(self, hidden_states):
                batch_size, seq_length = hidden_states.shape[:2]
                query, key, value = self.qkv_proj(hidden_states).chunk(3, dim=-1)
                query = query.view(batch_size, seq_length, self.num_heads, self.head_dim).transpose(1, 2)
                key = key.view(batch_size, seq_length, self.num_heads, self.head_dim).transpose(1, 2)
                value = value.view(batch_size, seq_length, self.num_heads, self.head_dim).transpose(1, 2)
                scores = torch.matmul(query, key.transpose(-2, -1)) * self.head_dim ** -0.5
                context = torch.matmul(F.softmax(scores, dim=-1), value)  # expect: TML601
                return self.out_proj(context.transpose(1, 2).reshape(batch_size, seq_length, -1))


        class BlockAttention(nn.Module):
            def __init__(self, hidden_size, num_heads, block_size=64):
                super().__init__()
                self.num_heads = num_heads
                self.head_dim = hidden_size // num_heads
                self.block_size = block_size
                self.q = nn.Linear(hidden_size, hidden_size)
                self.k = nn.Linear(hidden_size, hidden_size)
                self.v = nn.Linear(hidden_size, hidden_size)

            def forward(self, x):
                b, n, _ = x.shape
                q = self.q(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
                k = self.k(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
                v = self.v(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
                outputs = []
                for start in range(0, n, self.block_size):
                    q_block = q[:, :, start:start + self.block_size]
                    scores = torch.matmul(q_block, k.transpose(-2, -1)) * self.head_dim ** -0.5
                    outputs.append(torch.matmul(F.softmax(scores, dim=-1), v))  # expect: TML601
                return torch.cat(outputs, dim=2).transpose(1, 2).reshape(b, n, -1)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("attention_heads_layout"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
