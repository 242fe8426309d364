"""TML201 on forms a fifth held-out set showed: the layer before an activation held by a local
name of the function that builds the Sequential (``conv = weight_norm(nn.Conv1d(...))`` ...
``return nn.Sequential(conv, nn.LeakyReLU(0.1))``, the form of audio discriminators' conv
builders). The name counts as the one module it is ever given; a wrapper that returns the
module it is given (``weight_norm``, ``spectral_norm``) counts as that module. Look-alikes
stay quiet: a name given two modules (a branch), a parameter, a name bound by a loop, a local
whose module keeps its output (a sigmoid), a local that is not a module.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    "local_layer": '''
        import torch.nn as nn
        from torch.nn.utils import weight_norm
        from torch.nn.utils.parametrizations import spectral_norm


        def WNConv1d(*args, **kwargs):
            act = kwargs.pop("act", True)
            conv = weight_norm(nn.Conv1d(*args, **kwargs))
            if not act:
                return conv
            return nn.Sequential(conv, nn.LeakyReLU(0.1))  # expect: TML201


        def SNConv2d(cin, cout):
            conv = spectral_norm(nn.Conv2d(cin, cout, 3))
            return nn.Sequential(conv, nn.LeakyReLU(0.2))  # expect: TML201


        def linear_block(cin, cout):
            linear = nn.Linear(cin, cout)
            norm = nn.LayerNorm(cout)
            return nn.Sequential(linear, norm, nn.ELU())  # expect: TML201


        class Disc(nn.Module):
            def __init__(self):
                super().__init__()
                conv = nn.Conv2d(1, 32, 3)
                self.body = nn.Sequential(conv, nn.LeakyReLU(0.2))  # expect: TML201
                self.convs = nn.ModuleList([WNConv1d(1, 32, 5), WNConv1d(32, 32, 5)])

            def forward(self, x, y):
                for c in self.convs:
                    y = c(y)
                return self.body(x), y
    ''',
    "local_look_alikes": '''
        import torch.nn as nn
        from torch.nn.utils import weight_norm


        def branches(cin, cout, wide):
            if wide:
                conv = nn.Conv1d(cin, cout, 7)
            else:
                conv = nn.Sigmoid()
            return nn.Sequential(conv, nn.LeakyReLU(0.1))  # `conv` is given two modules: quiet


        def given(conv):
            return nn.Sequential(conv, nn.LeakyReLU(0.1))  # a parameter: what it is is the caller's


        def looped(convs):
            layers = []
            for conv in convs:
                layers.append(nn.Sequential(conv, nn.LeakyReLU(0.1)))  # bound by the loop: quiet
            conv = nn.Conv1d(1, 1, 3)
            return layers, conv


        def gated(c):
            gate = nn.Sigmoid()
            return nn.Sequential(nn.Conv1d(c, c, 3), gate, nn.ELU())  # after a sigmoid: quiet


        def tanh_after(c):
            squash = weight_norm(nn.Conv1d(c, c, 3))
            squash = nn.Tanh()
            return nn.Sequential(squash, nn.ELU())  # assigned twice: quiet


        def built(make, c):
            block = make(c)
            return nn.Sequential(block, nn.LeakyReLU(0.1))  # not known to be a module: quiet
    ''',
    # a factory that dispatches on a string and returns the layer through a local name
    "dispatching_factory": '''
        import torch.nn as nn
        from torch.nn.utils import weight_norm


        class Snake(nn.Module):
            def forward(self, x):
                return x * 2


        def WNConv1d(*args, **kwargs):
            return weight_norm(nn.Conv1d(*args, **kwargs))


        def get_activation(activation, antialias=False, channels=None):
            if activation == "elu":
                act = nn.ELU()  # reported where a call places it
            elif activation == "snake":
                act = Snake()
            elif activation == "none":
                act = nn.Identity()
            else:
                raise ValueError(activation)
            if antialias:
                act = nn.Sequential(act)
            return act


        def wrapped_always(slope=0.1):
            act = nn.LeakyReLU(slope)
            act = nn.Sequential(nn.Sigmoid(), act)
            return act  # the LeakyReLU never returned alone, and after a sigmoid: quiet


        def two_returns(name):
            act = nn.ELU()
            if name == "tanh":
                return nn.Tanh()
            return act  # not every return returns `act`: quiet


        class ResidualUnit(nn.Module):
            def __init__(self, cin, cout, use_snake=False):
                super().__init__()
                self.layers = nn.Sequential(
                    get_activation("snake" if use_snake else "elu", channels=cout),  # first: its input is kept as `res`
                    WNConv1d(cin, cout, 7),
                    get_activation("snake" if use_snake else "elu", channels=cout),  # expect: TML201
                    WNConv1d(cout, cout, 1),
                )
                self.gate = nn.Sequential(nn.Conv1d(cin, cout, 3), nn.Sigmoid(), get_activation("elu"))
                self.snakes = nn.Sequential(WNConv1d(cin, cout, 7), get_activation("snake"))
                self.more = nn.Sequential(WNConv1d(cin, cout, 7), wrapped_always(), two_returns("elu"))

            def forward(self, x):
                res = x
                x = self.layers(x)
                return x + res + self.gate(x) + self.snakes(x) + self.more(x)


        class ConfiguredUnit(nn.Module):
            # the name passed is a parameter: its default says what the model builds
            def __init__(self, cin, cout, act_fn="snake", out_act="elu"):
                super().__init__()
                self.layers = nn.Sequential(
                    WNConv1d(cin, cout, 7),
                    get_activation(act_fn, channels=cout),  # "snake" by default: quiet
                    WNConv1d(cout, cout, 1),
                    get_activation(out_act, channels=cout),  # expect: TML201
                )

            def forward(self, x):
                return self.layers(x)

    ''',
    # a Sequential built empty and filled by ``add_module`` (DarkNet-style conv modules)
    "add_module": '''
        from torch import nn


        def create_conv_module(cin, cout, kernel_size=3, stride=1):
            seq = nn.Sequential()
            seq.add_module("Conv2d", nn.Conv2d(cin, cout, kernel_size, stride, bias=False))
            seq.add_module("BatchNorm2d", nn.BatchNorm2d(cout))
            seq.add_module("LeakyRelu", nn.LeakyReLU())  # expect: TML201
            return seq


        def first_added(cout):
            seq = nn.Sequential()
            seq.add_module("act", nn.LeakyReLU(0.1))  # first: runs on the caller's input, quiet
            seq.add_module("conv", nn.Conv2d(cout, cout, 3))
            return seq


        def after_sigmoid(cout):
            seq = nn.Sequential()
            seq.add_module("conv", nn.Conv2d(cout, cout, 3))
            seq.add_module("gate", nn.Sigmoid())
            seq.add_module("act", nn.ELU())  # after a sigmoid: quiet
            return seq


        def branched(cout, norm):
            seq = nn.Sequential()
            seq.add_module("conv", nn.Conv2d(cout, cout, 3))
            if norm:
                seq.add_module("gate", nn.Sigmoid())
            seq.add_module("act", nn.ELU())  # a module may be added in between: quiet
            return seq


        def prefilled(cout):
            seq = nn.Sequential(nn.Sigmoid())
            seq.add_module("conv", nn.Conv2d(cout, cout, 3))
            seq.add_module("act", nn.ELU())  # expect: TML201
            return seq


        def prefilled_first(cout):
            seq = nn.Sequential(nn.Sigmoid())
            seq.add_module("act", nn.ELU())  # after what the Sequential was built with: quiet
            return seq
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_held_out5"), CASES, "TML201,TML202,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
