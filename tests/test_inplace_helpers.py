"""TML201/TML203 through functions of the file that build a container of the modules they are
given (``def Sequential(*modules)`` that drops the Nones and returns ``nn.Sequential(*modules)``,
``def Layers(*modules): return nn.ModuleList(modules)``: a call of one is that container of its
arguments, also inside a function that builds a residual unit), and after a module of the file
whose ``forward`` returns a rearrangement of a convolution's output (a modulated convolution,
``rearrange(F.conv3d(...), ...)``, called with a keyword: ``self.conv(x, cond=cond)``), and
after ``checkpoint(layer, z)`` (torch's, or a helper of the file that hands its parameter to
it): what calling the module makes, except an output the module keeps for backward (under
checkpoint the kept one is recomputed, so no in-place finding is claimed about it).
Look-alikes stay quiet: a helper that reorders the modules (``reversed``), adds one of its own,
or takes other positional parameters; an activation after a sigmoid in a helper's Sequential;
a forward that returns ``einops.repeat`` of its output (a broadcast, not a view of it alone),
or a rearrangement of an output it also keeps. An activation that a method or function of the
file applies to its argument and returns (``def actvn(self, x): return F.leaky_relu(x, 0.2)``)
is judged at every call of it; quiet when a call passes a tensor read again, the helper reads
its argument again, the helper is named otherwise than in calls, or a call changes the result
in place after.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    "sequential_helper": '''
        import torch.nn.functional as F
        from torch import nn
        from torch.nn import Module


        def exists(v):
            return v is not None


        def leaky_relu(p=0.1):
            return nn.LeakyReLU(p)


        def Sequential(*modules):
            modules = [*filter(exists, modules)]
            if len(modules) == 0:
                return nn.Identity()
            return nn.Sequential(*modules)


        class Residual(Module):
            def __init__(self, fn):
                super().__init__()
                self.fn = fn

            def forward(self, x):
                return self.fn(x) + x


        class CausalConv3d(Module):
            def __init__(self, cin, cout, kernel):
                super().__init__()
                self.conv = nn.Conv3d(cin, cout, kernel)

            def forward(self, x):
                x = F.pad(x, (1, 1, 1, 1, 2, 0))
                return self.conv(x)


        def ResidualUnit(dim, kernel_size):
            net = Sequential(
                CausalConv3d(dim, dim, kernel_size),
                nn.ELU(),  # expect: TML201
                nn.Conv3d(dim, dim, 1),
                nn.ELU(),  # expect: TML201
                nn.Sigmoid(),
                nn.ELU(),  # after a sigmoid: quiet
                nn.Conv3d(dim, dim, 1),
                nn.Tanh(),
                nn.ReLU(inplace=True),  # expect: TML203
            )
            return Residual(net)


        class Discriminator(Module):
            def __init__(self, dim, latent_dim):
                super().__init__()
                self.unit = ResidualUnit(dim, 3)
                self.to_logits = Sequential(
                    nn.Conv2d(dim, dim, 3, padding=1),
                    leaky_relu(),  # expect: TML201
                    nn.Flatten(),
                    nn.Linear(latent_dim, 1),
                )

            def forward(self, x):
                return self.to_logits(self.unit(x))
    ''',
    "helper_look_alikes": '''
        from torch import nn


        def Reversed(*modules):
            return nn.Sequential(*reversed(modules))


        def Gated(*modules):
            modules = list(modules)
            modules.insert(1, nn.Sigmoid())
            return nn.Sequential(*modules)


        def Block(dim, *modules):
            return nn.Sequential(nn.Conv2d(dim, dim, 1), *modules)


        def Wrapped(*modules):
            return Chain(modules)


        class Chain(nn.Module):
            def __init__(self, modules):
                super().__init__()
                self.mods = list(modules)

            def forward(self, x):
                for m in reversed(self.mods):
                    x = m(x)
                return x


        class Net(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.a = Reversed(nn.Conv2d(dim, dim, 3), nn.ELU(), nn.Sigmoid())  # reordered: quiet
                self.b = Gated(nn.Conv2d(dim, dim, 3), nn.ELU())  # a sigmoid put in between: quiet
                self.c = Block(dim, nn.ELU(), nn.Conv2d(dim, dim, 3))  # another parameter: quiet
                self.d = Wrapped(nn.Conv2d(dim, dim, 3), nn.ELU(), nn.Sigmoid())  # not a Sequential: quiet

            def forward(self, x):
                return self.d(self.c(self.b(self.a(x))))
    ''',
    "module_list_helper": '''
        from torch import nn


        def Layers(*modules):
            return nn.ModuleList(modules)


        def Shuffled(*modules):
            return nn.ModuleList(modules[::-1])


        class Net(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.chain = Layers(nn.Conv2d(dim, dim, 3), nn.LeakyReLU(0.1))  # expect: TML201
                self.other = Shuffled(nn.Conv2d(dim, dim, 3), nn.LeakyReLU(0.1))  # reordered: quiet

            def forward(self, x):
                for layer in self.chain:
                    x = layer(x)
                for layer in self.other:
                    x = layer(x)
                return x
    ''',
    "modulated_conv": '''
        import torch
        import torch.nn.functional as F
        from einops import rearrange, repeat
        from torch import nn


        class Conv3DMod(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.weights = nn.Parameter(torch.randn(dim, dim, 3, 3, 3))

            def forward(self, fmap, cond):
                b = fmap.shape[0]
                weights = self.weights * (cond + 1)
                fmap = rearrange(fmap, "b c t h w -> 1 (b c) t h w")
                fmap = F.conv3d(fmap, weights, groups=b)
                return rearrange(fmap, "1 (b o) ... -> b o ...", b=b)


        class Broadcast(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = nn.Linear(dim, dim)

            def forward(self, x, n):
                x = self.proj(x)
                return repeat(x, "b d -> b n d", n=n)


        class Kept(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.weights = nn.Parameter(torch.randn(dim, dim, 3, 3, 3))

            def forward(self, fmap, cond):
                fmap = F.conv3d(fmap, self.weights * cond)
                self.last = fmap
                return rearrange(fmap, "b c t h w -> b t c h w")


        class ResidualUnitMod(nn.Module):
            def __init__(self, dim, dim_cond):
                super().__init__()
                self.to_cond = nn.Linear(dim_cond, dim)
                self.conv = Conv3DMod(dim)
                self.conv_out = nn.Conv3d(dim, dim, 1)
                self.broadcast = Broadcast(dim)
                self.kept = Kept(dim)

            def forward(self, x, cond, n):
                res = x
                cond = self.to_cond(cond)
                x = self.conv(x, cond=cond)
                x = F.elu(x)  # expect: TML201
                x = self.conv_out(x)
                x = F.elu(x)  # expect: TML201
                y = F.elu(self.broadcast(cond, n))  # a broadcast of the output: quiet
                z = F.elu(self.kept(x, cond))  # the conv output is also kept: quiet
                return x + res + y.sum() + z.sum()
    ''',
    # a discriminator that checkpoints each conv of a module list through a helper of the file
    "checkpointed": '''
        import torch
        import torch.nn.functional as F
        from torch import nn
        from torch.utils.checkpoint import checkpoint as torch_checkpoint


        def checkpoint(function, *args, **kwargs):
            kwargs.setdefault("use_reentrant", False)
            return torch.utils.checkpoint.checkpoint(function, *args, **kwargs)


        class Disc(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.activation = nn.LeakyReLU(0.2)  # expect: TML201
                self.convs = nn.ModuleList([nn.Conv2d(dim, dim, 3) for _ in range(3)])
                self.gates = nn.ModuleList([nn.Sigmoid() for _ in range(3)])
                self.post = nn.Conv2d(dim, 1, 3)

            def forward(self, z):
                fmap = []
                for layer in self.convs:
                    z = checkpoint(layer, z)
                    z = self.activation(z)
                    fmap.append(z)
                z = torch_checkpoint(self.post, z, use_reentrant=False)
                z = F.elu(z)  # expect: TML201
                for gate in self.gates:
                    z = F.elu(checkpoint(gate, z))  # after a sigmoid: quiet
                return z, fmap


        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = nn.Sigmoid()
                self.act = nn.ReLU(inplace=True)  # the sigmoid's kept output is recomputed, not this one: quiet

            def forward(self, z):
                return self.act(checkpoint(self.gate, z))
    ''',
    # an activation a helper applies to its argument and returns (SPADE's `actvn`): judged at
    # every call of the helper, each on what it passes; reported at the helper's call
    "activation_helper_method": '''
        import torch.nn as nn
        import torch.nn.functional as F

        class ResnetBlock(nn.Module):
            def __init__(self, fin, fout):
                super().__init__()
                self.conv_0 = nn.Conv2d(fin, fout, 3, padding=1)
                self.conv_1 = nn.Conv2d(fout, fout, 3, padding=1)
                self.norm_0 = nn.BatchNorm2d(fin)
                self.norm_1 = nn.BatchNorm2d(fout)

            def forward(self, x):
                dx = self.conv_0(self.actvn(self.norm_0(x)))
                dx = self.conv_1(self.actvn(self.norm_1(dx)))
                return x + dx

            def actvn(self, x):
                return F.leaky_relu(x, 2e-1)  # expect: TML201

        class OnItsInput(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.conv = nn.Conv2d(dim, dim, 3, padding=1)

            def forward(self, x):
                return x + self.conv(self.actvn(x))  # the block's input, read again

            def actvn(self, x):
                return F.leaky_relu(x, 2e-1)  # quiet

        class ReadAgain(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.norm = nn.BatchNorm2d(dim)

            def forward(self, x):
                return self.actvn(self.norm(x))

            def actvn(self, x):
                return F.leaky_relu(x, 2e-1) + x  # the helper reads its argument again: quiet

        class HandedOn(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.norm = nn.BatchNorm2d(dim)
                self.act = self.actvn  # called elsewhere, with what is not known

            def forward(self, x):
                return self.actvn(self.norm(x))

            def actvn(self, x):
                return F.leaky_relu(x, 2e-1)  # quiet

        class ChangedAfter(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.norm = nn.BatchNorm2d(dim)

            def forward(self, x):
                h = self.actvn(self.norm(x))
                h += 1  # changes the activation's kept result: in place, backward would raise
                return h

            def actvn(self, x):
                return F.leaky_relu(x, 2e-1)  # quiet
    ''',
    "activation_helper_function": '''
        import torch.nn as nn
        import torch.nn.functional as F

        def actvn(x):
            return F.elu(x)  # expect: TML201

        class Block(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.conv_0 = nn.Conv2d(dim, dim, 3, padding=1)
                self.conv_1 = nn.Conv2d(dim, dim, 3, padding=1)

            def forward(self, x):
                return self.conv_1(actvn(self.conv_0(x)))
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_helpers"), CASES, "TML201,TML202,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
