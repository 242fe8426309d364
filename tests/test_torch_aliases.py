"""Names the file binds to torch without importing them: an alias of a torch path (``nn =
torch.nn``, ``F = torch.nn.functional``, at module level or inside the function that defines the
model classes), ``torch = _require_torch()`` (a project function that imports torch lazily,
foresight-ts's form), and an einsum spec held in a module-level string constant
(``_EINSUM_QK_SCORES = "bhld,bhmd->bhlm"``). Look-alikes: a name assigned two different torch
paths, a local ``torch`` bound to a call of a function that does not name torch, and a spec
constant assigned twice."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "module_alias": """
        import torch
        nn = torch.nn
        F = torch.nn.functional


        class GRN(nn.Module):
            def __init__(self, d_in, d_hidden):
                super().__init__()
                self.fc1 = nn.Linear(d_in, d_hidden)
                self.fc2 = nn.Linear(d_hidden, d_in)

            def forward(self, x):
                h = F.elu(self.fc1(x))  # expect: TML201
                return self.fc2(h)
    """,
    "lazy_torch_factory": """
        from typing import Any

        from .torch_nn import _require_torch


        def make_grn(d_in: int, d_hidden: int, dropout: float = 0.0) -> Any:
            torch = _require_torch()
            nn = torch.nn
            F = torch.nn.functional

            class _GRN(nn.Module):
                def __init__(self) -> None:
                    super().__init__()
                    self.fc1 = nn.Linear(d_in, d_hidden)
                    self.fc2 = nn.Linear(d_hidden, d_in)
                    self.dropout = nn.Dropout(float(dropout))

                def forward(self, x):
                    h = F.elu(self.fc1(x))  # expect: TML201
                    h = self.fc2(h)
                    return self.dropout(h)

            return _GRN()
    """,
    "local_import_alias": """
        def make_block(d):
            import torch
            nn = torch.nn

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1 = nn.Linear(d, d)
                    self.act = nn.SELU()  # expect: TML201
                    self.fc2 = nn.Linear(d, d)

                def forward(self, x):
                    return self.fc2(self.act(self.fc1(x)))

            return Block()
    """,
    "spec_constant": """
        import torch
        from torch import nn

        _QK = "bhld,bhmd->bhlm"
        _OUT = "bhlm,bhmd->bhld"


        class Attention(nn.Module):
            def __init__(self, d, heads):
                super().__init__()
                self.heads = heads
                self.qkv = nn.Linear(d, 3 * d)

            def forward(self, x):
                b, n, d = x.shape
                q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
                scores = torch.einsum(_QK, q * (d // self.heads) ** -0.5, k)
                w = torch.softmax(scores, dim=-1)
                out = torch.einsum(_OUT, w, v)  # expect: TML601
                return out.transpose(1, 2).reshape(b, n, d)
    """,
    "twice_bound_alias": """
        import torch
        Act = torch.nn.ELU
        Act = torch.nn.GELU


        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = torch.nn.Linear(4, 4)
                self.act = Act()
                self.fc2 = torch.nn.Linear(4, 4)

            def forward(self, x):
                return self.fc2(self.act(self.fc1(x)))
    """,
    "other_provider": """
        def load_backend():
            return None


        def make(d):
            torch = load_backend()
            nn = torch.nn
            F = torch.nn.functional

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1 = nn.Linear(d, d)
                    self.fc2 = nn.Linear(d, d)

                def forward(self, x):
                    return self.fc2(F.elu(self.fc1(x)))

            return Block()
    """,
    "spec_constant_twice": """
        import torch
        from torch import nn

        _QK = "bhld,bhmd->bhld"
        _QK = "bhld,bhmd->bhlm"


        class Attention(nn.Module):
            def forward(self, q, k, v):
                scores = torch.einsum(_QK, q, k)
                w = torch.softmax(scores, dim=-1)
                return torch.einsum("bhlm,bhmd->bhld", w, v)
    """,
}


def test_torch_names_bound_without_import(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML201,TML601")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
