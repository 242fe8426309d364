"""TML201 through module lists whose elements may be ``nn.Identity``: aviary's
``SimpleNetwork`` zips ``self.fcs``, ``self.bns`` (``nn.BatchNorm1d`` or, without batch norm,
``nn.Identity`` in the other arm of an ``if``) and ``self.acts`` and runs ``act(bn(fc(x)))``:
the activation's input is the norm's output or, through the identity, the linear layer's,
fresh either way (``producers.Producers.listed``). Its ``__repr__`` reads
``type(self.acts[0]).__name__``, which runs no element (``module_lists._READS_ONLY``).

Look-alikes: the linear output also read by a residual (through the identity the activation
would overwrite it), and an element handed to a function that may run it."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "identity_arm": """
        import torch.nn as nn


        class SimpleNetwork(nn.Module):
            def __init__(self, dims, batch_norm=False):
                super().__init__()
                self.fcs = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(len(dims) - 1))
                if batch_norm:
                    self.bns = nn.ModuleList(nn.BatchNorm1d(dims[i + 1]) for i in range(len(dims) - 1))
                else:
                    self.bns = nn.ModuleList(nn.Identity() for _ in range(len(dims) - 1))
                self.acts = nn.ModuleList(nn.LeakyReLU() for _ in range(len(dims) - 1))  # expect: TML201

            def forward(self, x):
                for fc, bn, act in zip(self.fcs, self.bns, self.acts, strict=False):
                    x = act(bn(fc(x)))
                return x

            def __repr__(self):
                activation = type(self.acts[0]).__name__
                return f"{type(self).__name__}({activation=}, {len(self.acts)} layers)"
    """,
    "read_by_repr": """
        import torch.nn as nn


        class Encoder(nn.Module):
            def __init__(self, dims):
                super().__init__()
                self.fcs = nn.ModuleList(nn.Linear(d, d) for d in dims)
                self.acts = nn.ModuleList(nn.ELU() for _ in dims)  # expect: TML201

            def forward(self, x):
                for fc, act in zip(self.fcs, self.acts):
                    x = act(fc(x))
                return x

            def extra_repr(self):
                return f"activation={type(self.acts[0]).__name__}, isinstance={isinstance(self.acts[-1], nn.ELU)}"
    """,
    "look_alikes": """
        import torch.nn as nn


        class ResidualNetwork(nn.Module):
            def __init__(self, dims, batch_norm=False):
                super().__init__()
                self.fcs = nn.ModuleList(nn.Linear(d, d) for d in dims)
                if batch_norm:
                    self.bns = nn.ModuleList(nn.BatchNorm1d(d) for d in dims)
                else:
                    self.bns = nn.ModuleList(nn.Identity() for _ in dims)
                self.acts = nn.ModuleList(nn.LeakyReLU() for _ in dims)

            def forward(self, x):
                for fc, bn, act in zip(self.fcs, self.bns, self.acts):
                    h = fc(x)
                    x = act(bn(h)) + h
                return x


        class Exported(nn.Module):
            def __init__(self, dims):
                super().__init__()
                self.fcs = nn.ModuleList(nn.Linear(d, d) for d in dims)
                self.acts = nn.ModuleList(nn.ELU() for _ in dims)

            def forward(self, x):
                for fc, act in zip(self.fcs, self.acts):
                    x = act(fc(x))
                return x

            def probe(self, x):
                return trace_layer(self.acts[0], x)
    """,
}


def test_identity_list_arms(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML201")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), (name, found[name])
