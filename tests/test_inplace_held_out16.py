"""TML201 on forms a sixteenth held-out set showed it missed, modelled as general constructs.

- A module method that returns the module itself (``nn.LeakyReLU(0.05).to(device=d)``,
  ``nn.Linear(a, b).cuda()``, ``.float()``, ``.train()``, ``.apply(init)`` ...) is the module
  its receiver builds: the resolver reads through the chain wherever a layer is recognised
  (``analysis/syntax.py``: ``module_itself``; ``Resolver.layer``), so a Sequential element,
  ``self.act = nn.ELU().cuda()`` and the Linear before them are what they build. A method that
  returns something else (``.parameters()``, ``.state_dict()``) is not the module.
- A functional activation on an addition that only the activation reads
  (``analysis/activations.py``, ``analysis/activation_facts.py``): a size read of it
  (``ret.shape[-1]``) keeps nothing, a read in the other arm of an ``if`` (``x =
  F.leaky_relu(x)`` / ``else: x = torch.sigmoid(x)``) never runs with it, and a join of an
  ``if`` around the join the activation reads (``if residual:`` ``if ...:`` ``ret = ret +
  x``) carries the same tensor to it either way.
- A module a class keeps from its constructor (``self.activation = activation``) and places
  in its Sequential (``mlp.append(self.activation)``), given by another class that keeps it
  too and passes ``activation=self.activation`` (``analysis/module_flow.py``): the layer built
  as that class's default (``activation=nn.LeakyReLU()``) runs where the first class places
  it, reported at the default.

Look-alikes stay quiet: an addition read again after the activation, or read by a product
first (which keeps it for backward); a size read that comes with a real read; a kept module
placed first in its Sequential; a kept module also called on a tensor read again; a kept
module another object reads (``learner.activation``); a method chain that is not the module.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from marked_cases import lint_cases, marked
from torchmemlint.analysis.syntax import module_itself

CHAINED = '''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class MaskedNN(nn.Module):
        def __init__(self, mask, num_hidden_layers, hidden_dim, device=None):
            super().__init__()
            self.mask = mask
            self.device = device
            md = {}
            for i in range(self.mask.shape[0]):
                reg_nn = []
                for j in range(num_hidden_layers):
                    func = nn.Sequential(
                        nn.Linear(in_features=hidden_dim, out_features=hidden_dim).to(device=self.device),
                        nn.LeakyReLU(negative_slope=0.05).to(device=self.device)  # expect: TML201 fix=safe
                    )
                    reg_nn.append(func)
                reg_nn.append(nn.Linear(hidden_dim, 1).to(device=self.device))
                md[str(i)] = nn.Sequential(*reg_nn)
            self.nets = nn.ModuleDict(md)

        def forward(self, x, choice):
            return self.nets[choice](x)


    class Kept(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n).cuda().float()
            self.act = nn.ELU().cuda()  # expect: TML201 fix=unsafe

        def forward(self, x):
            return self.act(self.fc(x))


    class ReadAgain(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n).to("cuda")
            self.act = nn.LeakyReLU(0.2).train()

        def forward(self, x):
            h = self.fc(x)
            return self.act(h) + h


    class NotTheModule(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = nn.Linear(n, n)
            self.weights = nn.Linear(n, n).state_dict()

        def forward(self, x):
            return self.fc(x)
'''

ADDITIONS = '''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class AttnHead(nn.Module):
        def __init__(self, hidden_dim, out_sz):
            super().__init__()
            self._seq_fts = nn.Conv1d(hidden_dim, out_sz, 1, bias=False)
            self._ret = nn.Conv1d(hidden_dim, out_sz, 1)
            self._bias = nn.Parameter(torch.ones(1))

        def forward(self, seq, residual=False):
            seq = seq.permute(0, 2, 1)
            seq_fts = self._seq_fts(seq)
            vals = torch.matmul(seq_fts, seq_fts.permute(0, 2, 1))
            ret = vals + self._bias
            if residual:
                if seq.permute(0, 2, 1).shape[-1] != ret.shape[-1]:
                    ret = ret + self._ret(seq).permute(0, 2, 1)
                else:
                    ret = ret + seq.permute(0, 2, 1)
            return F.elu(ret)  # expect: TML201 fix=unsafe


    class BaseModel(nn.Module):
        def __init__(self, hidden_num, nonlinear="leaky-relu"):
            super().__init__()
            self.hidden_num = hidden_num
            self.nonlinear = nonlinear

        def forward_given_params(self, x, weights, biases):
            for k in range(self.hidden_num + 1):
                if k == 0:
                    adj = self.adjacency.unsqueeze(0)
                    x = torch.einsum("tij,ljt,bj->bti", weights[k], adj, x) + biases[k]
                else:
                    x = torch.einsum("tij,btj->bti", weights[k], x) + biases[k]
                if k != self.hidden_num:
                    if self.nonlinear == "leaky-relu":
                        x = F.leaky_relu(x)  # expect: TML201 fix=safe
                    else:
                        x = torch.sigmoid(x)
            return torch.unbind(x, 1)


    class ReadAfter(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.proj = nn.Linear(n, n)
            self.bias = nn.Parameter(torch.zeros(n))

        def forward(self, x):
            ret = self.proj(x) + self.bias
            if ret.shape[-1] != x.shape[-1]:
                ret = ret + 1
            out = F.elu(ret)
            return out + ret


    class ProductFirst(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.proj = nn.Linear(n, n)
            self.gate = nn.Parameter(torch.zeros(n))

        def forward(self, x, gated=False):
            ret = self.proj(x) + self.gate
            scaled = ret * self.gate
            if gated:
                ret = F.leaky_relu(ret, 0.1)
            else:
                ret = torch.tanh(ret)
            return ret + scaled


    class SizeAndRead(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.proj = nn.Linear(n, n)

        def forward(self, x):
            ret = self.proj(x) + x
            if ret.shape[-1] > 1:
                skip = ret
            else:
                skip = x
            return F.elu(ret) + skip
'''

KEPT = '''
    import torch
    import torch.nn as nn


    class MLP(nn.Module):
        def __init__(self, input_dim, hidden_layers, hidden_units, output_dim, bias=True,
                     activation=None, device=None):
            super().__init__()
            self.activation = activation
            mlp = []
            for i in range(hidden_layers):
                input_size = hidden_units
                if i == 0:
                    input_size = input_dim
                weight = nn.Linear(in_features=input_size, out_features=hidden_units, bias=bias, device=device)
                mlp.append(weight)
                if self.activation is not None:
                    mlp.append(self.activation)
            mlp.append(nn.Linear(hidden_units, output_dim, bias=bias, device=device))
            self.mlp = nn.Sequential(*mlp)

        def forward(self, x):
            return self.mlp(x)


    class PNL:
        def __init__(self, hidden_layers=1, hidden_units=10, activation=nn.LeakyReLU(), device_type="cpu"):  # expect: TML201 fix=safe
            self.hidden_layers = hidden_layers
            self.hidden_units = hidden_units
            self.activation = activation

        def learn(self, data):
            l1 = MLP(input_dim=1, hidden_layers=self.hidden_layers, hidden_units=self.hidden_units,
                     output_dim=1, activation=self.activation)
            l2 = MLP(input_dim=1, hidden_layers=self.hidden_layers, hidden_units=self.hidden_units,
                     output_dim=1, activation=self.activation)
            return l1(data), l2(data)


    class LeadingMLP(nn.Module):
        def __init__(self, sizes, activation=None):
            super().__init__()
            self.activation = activation
            layers = []
            for n_in, n_out in zip(sizes, sizes[1:]):
                layers.append(self.activation)
                layers.append(nn.Linear(n_in, n_out))
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)


    class Leading:
        def __init__(self, sizes, activation=nn.LeakyReLU(0.1)):
            self.activation = activation
            self.sizes = sizes

        def build(self):
            return LeadingMLP(self.sizes, activation=self.activation)


    class CalledMLP(nn.Module):
        def __init__(self, n, activation=None):
            super().__init__()
            self.activation = activation
            self.fc = nn.Linear(n, n)
            self.net = nn.Sequential(nn.Linear(n, n), self.activation)

        def forward(self, x):
            return self.net(x) + self.activation(x)


    class Called:
        def __init__(self, n, activation=nn.ELU()):
            self.activation = activation
            self.n = n

        def build(self):
            return CalledMLP(self.n, activation=self.activation)


    class Shared:
        def __init__(self, n, activation=nn.LeakyReLU(0.2)):  # expect: TML201 fix=safe
            self.activation = activation
            self.n = n

        def build(self):
            return MLP(self.n, 2, self.n, 1, activation=self.activation)


    class NonlinMLP(nn.Module):
        def __init__(self, n, nonlin=None):
            super().__init__()
            self.nonlin = nonlin
            self.net = nn.Sequential(nn.Linear(n, n), self.nonlin, nn.Linear(n, 1))

        def forward(self, x):
            return self.net(x)


    class Stolen:
        def __init__(self, n, nonlin=nn.LeakyReLU(0.2)):
            self.nonlin = nonlin
            self.n = n

        def build(self):
            return NonlinMLP(self.n, nonlin=self.nonlin)


    def steal(learner, x):
        return learner.nonlin(x)
'''

CASES = {"chained": CHAINED, "additions": ADDITIONS, "kept": KEPT}


@pytest.mark.slow  # starts the CLI
def test_held_out16_forms(tmp_path: Path) -> None:
    found = lint_cases(tmp_path, CASES, "TML201,TML203")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
    from marked_cases import fix_at, marked_fixes

    for name, source in CASES.items():
        for row, fix in marked_fixes(source).items():
            assert fix_at(found[name], row) == fix, (name, row)


@pytest.mark.parametrize(
    "source, built",
    [
        ("nn.LeakyReLU(0.05).to(device=d)", "nn.LeakyReLU(0.05)"),
        ("nn.Linear(2, 2).cuda().float()", "nn.Linear(2, 2)"),
        ("block(c).apply(init).train(False)", "block(c)"),
        ("nn.Linear(2, 2).parameters()", "nn.Linear(2, 2).parameters()"),
        ("nn.Linear(2, 2).state_dict()", "nn.Linear(2, 2).state_dict()"),
        ("x.to(d)", "x.to(d)"),  # (a name's method: what the name holds is another question)
    ],
)
def test_module_methods_returning_the_module(source: str, built: str) -> None:
    node = module_itself(cst.parse_expression(source))
    assert cst.Module([]).code_for_node(node) == built
