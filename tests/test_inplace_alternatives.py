"""TML201 where the calls of a block disagree on the activation class they pass
(``analysis/factories.py``: ``Factory.alternatives``; ``analysis/activation_sites.py``: ``one_of``).

An encoder passes its default ``nn.LeakyReLU`` to a conv-norm-activation block whose own default
is ``nn.ReLU``, a decoder leaves it: the block's ``activ()`` builds a LeakyReLU for the encoder's
instances, out of place after a BatchNorm, and is reported as the LeakyReLU it is there (its fix,
``activ(inplace=True)``, suits every class the calls pass; unsafe, since which one runs depends on
the caller). Forms: the layer in an ``nn.Sequential``, on ``self``, the block built in a
comprehension, a helper function's parameter.

Look-alikes stay quiet: a call that passes a class without ``inplace`` (``nn.GELU``: the fix would
break it), an ``nn.Identity`` (the activation is then no layer at all), a dropout, an activation
whose input is read again, a class passed as a partial with arguments, and what follows such a
layer (which class ran before it is not known, so its output is no known producer).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "sequential": '''
        import torch.nn as nn


        class Conv2DBNActiv(nn.Module):
            def __init__(self, nin, nout, activ=nn.ReLU):
                super().__init__()
                self.conv = nn.Sequential(
                    nn.Conv2d(nin, nout, 3, bias=False),
                    nn.BatchNorm2d(nout),
                    activ(),  # expect: TML201 fix=unsafe
                )

            def forward(self, x):
                return self.conv(x)


        class Encoder(nn.Module):
            def __init__(self, nin, nout, activ=nn.LeakyReLU):
                super().__init__()
                self.conv1 = Conv2DBNActiv(nin, nout, activ=activ)
                self.conv2 = Conv2DBNActiv(nout, nout, activ=activ)

            def forward(self, x):
                return self.conv2(self.conv1(x))


        class Decoder(nn.Module):
            def __init__(self, nin, nout):
                super().__init__()
                self.conv = Conv2DBNActiv(nin, nout)

            def forward(self, x):
                return self.conv(x)
    ''',
    "attribute_and_comprehension": '''
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, c, act=nn.ReLU):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3, padding=1)
                self.act = act()  # expect: TML201 fix=unsafe

            def forward(self, x):
                return self.act(self.conv(x))


        class Net(nn.Module):
            def __init__(self, widths=(8, 16)):
                super().__init__()
                self.down = nn.ModuleList([Block(w, act=nn.ELU) for w in widths])
                self.up = nn.ModuleList([Block(w) for w in widths])

            def forward(self, x):
                for block in self.down:
                    x = block(x)
                for block in self.up:
                    x = block(x)
                return x
    ''',
    "helper_function": '''
        import torch.nn as nn


        def conv_block(cin, cout, nonlin=nn.ReLU):
            return nn.Sequential(nn.Conv1d(cin, cout, 3), nn.BatchNorm1d(cout), nonlin())  # expect: TML201 fix=unsafe


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = conv_block(1, 8, nonlin=nn.LeakyReLU)
                self.body = conv_block(8, 8)

            def forward(self, x):
                return self.body(self.stem(x))
    ''',
    "look_alike_no_inplace_class": '''
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, c, act=nn.LeakyReLU):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3, padding=1)
                self.act = act()

            def forward(self, x):
                return self.act(self.conv(x))


        a = Block(3, act=nn.GELU)
        b = Block(3)
    ''',
    "look_alike_identity_or_dropout": '''
        import torch.nn as nn


        def block(c, act=nn.LeakyReLU):
            return nn.Sequential(nn.Linear(c, c), act())


        def other(c, act=nn.LeakyReLU):
            return nn.Sequential(nn.Linear(c, c), act())


        head = nn.Sequential(block(4, act=nn.Identity), block(4))
        tail = nn.Sequential(other(4, act=nn.Dropout), other(4))
    ''',
    "look_alike_read_again": '''
        import torch.nn as nn


        class Residual(nn.Module):
            def __init__(self, c, act=nn.ReLU):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3, padding=1)
                self.act = act()

            def forward(self, x):
                y = self.conv(x)
                return self.act(y) + y


        r1 = Residual(4, act=nn.LeakyReLU)
        r2 = Residual(4)
    ''',
    "look_alike_partial": '''
        from functools import partial

        import torch.nn as nn


        def block(c, act=nn.ReLU):
            return nn.Sequential(nn.Linear(c, c), act())


        head = nn.Sequential(block(4, act=partial(nn.LeakyReLU, 0.2)), block(4))
    ''',
    "look_alike_after_the_layer": '''
        import torch.nn as nn


        def block(c, act=nn.ReLU):
            # which class ran before the ELU is not known: after nn.ReLU in place would
            # change the output ReLU keeps for backward
            return nn.Sequential(nn.Linear(c, c), act(), nn.ELU(inplace=True))


        head = nn.Sequential(block(4, act=nn.LeakyReLU), block(4))
    ''',
    # not a case of alternatives: any activation whose result what follows changes in place stays
    # out of place (in place it keeps its result for backward, which the change would spoil:
    # autograd raises; tests/test_inplace_alternatives.py::test_in_place_after_raises_in_torch)
    "look_alike_changed_after": '''
        import torch.nn as nn
        import torch.nn.functional as F


        chain = nn.Sequential(nn.Linear(4, 4), nn.LeakyReLU(), nn.ELU(inplace=True))
        dropped = nn.Sequential(nn.Linear(4, 4), nn.ELU(), nn.Dropout(0.0, inplace=True))


        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
                self.fc2 = nn.Linear(4, 4)
                self.act2 = nn.ReLU(inplace=True)

            def forward(self, x):
                h = F.leaky_relu(self.fc(x))
                h += 1
                g = F.leaky_relu(self.fc(x))
                g = self.act2(g)
                k = F.elu(self.fc(x))
                k.mul_(2)
                m = F.leaky_relu(self.fc(x))
                m = F.relu(m, inplace=True)
                q = F.leaky_relu(self.fc(x))  # expect: TML201 fix=safe
                x2 = self.fc2(q)
                x2 += x
                return h + g + k + m + x2
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_alternatives"), CASES, "TML201,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(name for name in CASES if marked_fixes(CASES[name])))
def test_fixes_are_unsafe_since_the_class_depends_on_the_caller(findings, name):
    for row, applicability in marked_fixes(CASES[name]).items():
        assert [fix for (at, _), fix in findings[name].items() if at == row] == [applicability]


def test_in_place_after_raises_in_torch():
    """What the look-alike stands for: the fixed activation's kept result changed in place."""
    torch = pytest.importorskip("torch")
    for change in ("h += 1", "h.mul_(2)", "torch.relu_(h)"):
        x = torch.randn(3, 4)
        w = torch.randn(4, 4, requires_grad=True)
        h = torch.nn.functional.leaky_relu(x @ w, inplace=True)
        exec(change)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            h.sum().backward()


# -- two more forms of the twenty-first and twenty-second sets ---------------------------------------
# An activation held on ``self`` and placed as an element of an ``nn.Sequential`` of attributes
# (mne-icalabel's ICLabel network), module lists bound to two attributes in one statement (dhg),
# a list comprehension over a module list (moses), a parameter defaulting to None that the
# function fills in with a layer class (deeptime, zuko),
# and layer classes imported inside ``__init__`` (pro-gan-pth: ``from torch.nn import Conv2d,
# LeakyReLU`` in the constructor).
MORE: Dict[str, str] = {
    "attributes_in_a_sequential": '''
        import torch.nn as nn


        class Img(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = nn.Conv2d(1, 8, 3)
                self.relu1 = nn.LeakyReLU(negative_slope=0.2)  # expect: TML201 fix=safe
                self.conv2 = nn.Conv2d(8, 8, 3)
                self.relu2 = nn.LeakyReLU(negative_slope=0.2)  # expect: TML201 fix=safe
                self.sequential = nn.Sequential(self.conv1, self.relu1, self.conv2, self.relu2)

            def forward(self, x):
                return self.sequential(x)
    ''',
    "attributes_in_a_sequential_look_alikes": '''
        import torch.nn as nn


        class First(nn.Module):
            def __init__(self):
                super().__init__()
                self.act = nn.LeakyReLU(0.2)
                self.conv = nn.Conv2d(8, 8, 3)
                self.body = nn.Sequential(self.act, self.conv)

            def forward(self, x):
                return self.body(x) + x


        class Dropped(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(8, 8, 3)
                self.act = nn.ELU()
                self.body = nn.Sequential(self.conv, self.act, nn.Dropout(0.1))

            def forward(self, x):
                return self.body(x)


        class AlsoCalled(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(8, 8, 3)
                self.act = nn.LeakyReLU(0.2)
                self.body = nn.Sequential(self.conv, self.act)

            def forward(self, x):
                return self.body(x) + self.act(x)


        class HandedOn(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(8, 8, 3)
                self.act = nn.LeakyReLU(0.2)
                self.body = nn.Sequential(self.conv, self.act)
                register(self.act)

            def forward(self, x):
                return self.body(x)


        def register(module):
            return module
    ''',
    # dhg's NGCF: two module lists bound in one statement, filled in a loop, indexed in forward
    "module_lists_bound_together": '''
        import torch.nn as nn
        import torch.nn.functional as F


        class NGCF(nn.Module):
            def __init__(self, d, n=3):
                super().__init__()
                self.W_gc, self.W_bi = nn.ModuleList(), nn.ModuleList()
                for _ in range(n):
                    self.W_gc.append(nn.Linear(d, d))
                    self.W_bi.append(nn.Linear(d, d))

            def forward(self, x):
                for i in range(len(self.W_gc)):
                    s = F.leaky_relu(self.W_gc[i](x), negative_slope=0.2)  # expect: TML201 fix=safe
                    b = F.leaky_relu(self.W_bi[i](x * x), negative_slope=0.2)  # expect: TML201 fix=safe
                    x = s * b  # (a product keeps both factors; a sum would keep neither)
                return x


        class Swapped(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.a, self.b = nn.Identity(), nn.Linear(d, d)

            def forward(self, x):
                # the Linear's output only (column 42): nn.Identity hands on x, read again
                return F.leaky_relu(self.a(x)) * F.leaky_relu(self.b(x)) * x  # expect: TML201
    ''',
    # pyhealth's SparcNet ``DenseLayer``: an ``nn.Sequential`` subclass filled by ``add_module``
    # (with stray trailing commas) whose ``forward`` calls torch's through ``super()``
    "sequential_subclass_calling_super_forward": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class DenseLayer(nn.Sequential):
            def __init__(self, c, batch_norm=True):
                super().__init__()
                self.add_module("conv1", nn.Conv1d(c, c, 1)),
                if batch_norm:
                    self.add_module("norm2", nn.BatchNorm1d(c)),
                self.add_module("elu2", nn.ELU()),  # expect: TML201 fix=unsafe
                self.add_module("conv2", nn.Conv1d(c, c, 3)),

            def forward(self, x):
                new_features = super(DenseLayer, self).forward(x)
                new_features = F.dropout(new_features, p=0.5, training=self.training)
                return torch.cat([x, new_features], 1)


        class Reordered(nn.Sequential):
            def __init__(self, c):
                super().__init__()
                self.add_module("conv1", nn.Conv1d(c, c, 1))
                self.add_module("elu", nn.ELU())

            def forward(self, x):
                return self[1](x) + self[0](x)
    ''',
    # moses' ORGAN discriminator: the activation in a list comprehension over a module list
    "comprehension_over_a_module_list": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Discriminator(nn.Module):
            def __init__(self, convs):
                super().__init__()
                self.conv_layers = nn.ModuleList([nn.Conv2d(1, f, (n, 8)) for f, n in convs])

            def forward(self, x):
                convs = [F.elu(conv_layer(x)).squeeze(3) for conv_layer in self.conv_layers]  # expect: TML201
                return torch.cat([F.max_pool1d(c, c.shape[2]).squeeze(2) for c in convs], dim=1)


        class Given(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)

            def forward(self, xs):
                ys = [F.elu(t) for t in xs]  # the caller's tensors
                return self.proj(torch.cat(ys, 1)), xs
    ''',
    # deeptime's and zuko's MLPs: a parameter defaulting to None, filled in with a class there
    "none_default_filled_in": '''
        import torch.nn as nn


        class MLP(nn.Sequential):
            def __init__(self, units, nonlinearity=None):
                if nonlinearity is None:
                    nonlinearity = nn.ELU
                layers = []
                for i in range(1, len(units)):
                    layers.append(nn.Linear(units[i - 1], units[i]))
                    layers.append(nonlinearity())  # expect: TML201 fix=unsafe
                super().__init__(*layers)


        class Other(nn.Sequential):
            def __init__(self, units, act=None):
                if act is None:
                    act = nn.ELU
                if len(units) > 3:
                    act = nn.GELU
                super().__init__(nn.Linear(units[0], units[1]), act())


        class Given(nn.Sequential):
            def __init__(self, units, act=None):
                if act is None:
                    act = nn.ELU
                super().__init__(nn.Linear(units[0], units[1]), act())


        m = MLP([4, 8, 2], nonlinearity=None)
        o = Other([4, 8])
        g = Given([4, 8], act=make_act)


        def make_act():
            return nn.Tanh()
    ''',
    "imported_in_the_constructor": '''
        import torch as th


        class Block(th.nn.Module):
            def __init__(self, c):
                from torch.nn import Conv2d, LeakyReLU

                super().__init__()
                self.conv_1 = Conv2d(c, c, (3, 3), padding=1)
                self.lrelu = LeakyReLU(0.2)  # expect: TML201 fix=safe

            def forward(self, x):
                return self.lrelu(self.conv_1(x))


        class Local(th.nn.Module):
            def __init__(self, c):
                from mylib import LeakyReLU

                super().__init__()
                self.conv_1 = th.nn.Conv2d(c, c, 3)
                self.lrelu = LeakyReLU(0.2)

            def forward(self, x):
                return self.lrelu(self.conv_1(x))
    ''',
}


@pytest.fixture(scope="module")
def more(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_more"), MORE, "TML201,TML203")


@pytest.mark.parametrize("name", sorted(MORE))
def test_more_forms_report_exactly_the_marked_rows(more, name):
    assert set(more[name]) == marked(MORE[name])
    for row, applicability in marked_fixes(MORE[name]).items():
        assert [fix for (at, _), fix in more[name].items() if at == row] == [applicability]
