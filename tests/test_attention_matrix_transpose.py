"""TML601: attention over matrices whose key is transposed by ``k.transpose(0, 1)`` or ``k.t()``
(blt-trainer's cross-attention patch pooling, ``torch.matmul(q, k.transpose(0, 1))`` of 2-D q
and k): only a matrix's transpose makes sense as the right operand of a product, so it is the
key's transpose, reported without a fix as ``torch.mm`` is (CUDA's fused kernels take 4-D).
Look-alikes: a sequence-first ``transpose(0, 1)`` that is not a product's operand, and the same
product of a 3-D key by ``bmm`` after ``transpose(0, 1)`` (batch and sequence swapped: no
attention)."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "matrix_transpose": """
        import torch
        import torch.nn.functional as F


        def pool_patches(x, params, scale):
            k = F.linear(x, params["W_k_enc"])
            v = F.linear(x, params["W_v_enc"])
            q = params["q_seed"].to(dtype=k.dtype, device=k.device)
            scores = torch.matmul(q, k.transpose(0, 1)) * scale
            attn_weights = F.softmax(scores, dim=-1).to(dtype=v.dtype)
            pooled = torch.matmul(attn_weights, v)  # expect: TML601 fix=none
            return F.linear(pooled, params["W_out_enc"])


        def attend(q, k, v):
            w = F.softmax(q @ k.t() / 8.0, dim=-1)
            return w @ v  # expect: TML601 fix=none
    """,
    "sequence_first": """
        import torch
        import torch.nn.functional as F


        def encode(x, rnn, proj):
            h, _ = rnn(x.transpose(0, 1))
            h = h.transpose(0, 1)
            w = F.softmax(proj(h), dim=-1)
            return (w * h).sum(1)


        def batch_swapped(q, k, v):
            w = F.softmax(torch.bmm(q, k.transpose(0, 1)), dim=-1)
            return torch.bmm(w, v)
    """,
}


def test_matrix_transposes(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML601")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
    assert set(found["matrix_transpose"].values()) == {None}
