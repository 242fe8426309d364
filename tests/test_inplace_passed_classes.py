"""TML201 on an activation class a file hands to a builder of another file of the project
(``build_mlp(obs_dim, n, hidden, activation=nn.ELU)`` with ``from ..networks.mlp import
build_mlp``, which builds ``activation()`` after each Linear of the ``nn.Sequential`` it
returns; its own default is ``nn.Tanh``): reported at the argument, where the caller chose the
class, also when a class of another file hands it on to the builder (``VNetwork(n, sizes,
nn.ELU)``). A builder of the file itself whose every call passes the class (its ``nn.Tanh``
default never built) is reported at the builder, as before.

Look-alikes stay quiet: a class the builder puts first, one it also keeps (``self.act_cls =
activation``), one it rebinds, a class that cannot run in place (``nn.Tanh``), and a builder of
the file whose default another file still builds (a call there leaves it)."""

from __future__ import annotations

from marked_cases import project_findings

MLP = """from typing import Sequence, Type

import numpy as np
import torch.nn as nn


def layer_init(layer, gain=np.sqrt(2)):
    nn.init.orthogonal_(layer.weight, gain)
    return layer


def build_mlp(input_dim: int, output_dim: int, hidden_sizes: Sequence[int] = (64, 64),
              activation: Type[nn.Module] = nn.Tanh, layer_norm: bool = False) -> nn.Sequential:
    layers: list = []
    last = int(input_dim)
    for h in hidden_sizes:
        layers.append(layer_init(nn.Linear(last, h)))
        if layer_norm:
            layers.append(nn.LayerNorm(h))
        layers.append(activation())
        last = h
    layers.append(layer_init(nn.Linear(last, output_dim)))
    return nn.Sequential(*layers)


def act_first(dim, activation=nn.Tanh):
    return nn.Sequential(activation(), nn.Linear(dim, dim))


def rebinding(dim, activation=nn.Tanh):
    if activation is nn.ELU:
        activation = nn.SELU
    return nn.Sequential(nn.Linear(dim, dim), activation(), nn.Linear(dim, dim))


class Keeping(nn.Module):
    def __init__(self, dim, activation=nn.Tanh):
        super().__init__()
        self.act_cls = activation
        self.net = nn.Sequential(nn.Linear(dim, dim), activation(), nn.Linear(dim, dim))

    def forward(self, x):
        return self.net(x)


class VNetwork(nn.Module):
    def __init__(self, obs_dim, hidden_sizes=(64, 64), activation=nn.Tanh):
        super().__init__()
        self.net = build_mlp(obs_dim, 1, hidden_sizes, activation)

    def forward(self, obs):
        return self.net(obs).squeeze(-1)


def local_mlp(dim, activation=nn.Tanh):
    return nn.Sequential(nn.Linear(dim, dim), activation(), nn.Linear(dim, dim))
"""

WORLD = """import torch
import torch.nn as nn

from ..networks.mlp import VNetwork, Keeping, act_first, build_mlp, local_mlp, rebinding


class WorldModel(nn.Module):
    def __init__(self, obs_dim, act_dim, latent_dim, hidden):
        super().__init__()
        self.encoder = build_mlp(obs_dim, latent_dim, hidden, activation=nn.ELU)  # expect
        self.transition = build_mlp(latent_dim + act_dim, latent_dim, hidden, nn.LeakyReLU)  # expect
        self.critic = VNetwork(latent_dim, hidden, nn.ELU)  # expect
        self.squash = build_mlp(latent_dim, latent_dim, hidden, activation=nn.Tanh)
        self.first = act_first(latent_dim, nn.ELU)
        self.rebound = rebinding(latent_dim, nn.ELU)
        self.kept = Keeping(latent_dim, nn.ELU)
        self.local = local_mlp(latent_dim)

    def forward(self, obs, action):
        latent = self.encoder(obs)
        nxt = self.transition(torch.cat([latent, action], dim=-1))
        return nxt + self.squash(latent) + self.first(latent) + self.rebound(latent) + self.kept(latent) + self.local(latent), self.critic(latent)
"""

SAME_FILE = """import torch.nn as nn


def mlp(dim, activation=nn.Tanh):
    return nn.Sequential(nn.Linear(dim, dim), activation(), nn.Linear(dim, dim))  # expect


class Heads(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.a = mlp(dim, activation=nn.ELU)
        self.b = mlp(dim, nn.ELU)

    def forward(self, x):
        return self.a(x) + self.b(x)
"""

SHARED = """import torch.nn as nn


def shared_mlp(dim, activation=nn.Tanh):
    return nn.Sequential(nn.Linear(dim, dim), activation(), nn.Linear(dim, dim))


class Head(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.a = shared_mlp(dim, activation=nn.ELU)

    def forward(self, x):
        return self.a(x)
"""

USER = """import torch.nn as nn

from .shared import shared_mlp


class Other(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.net = shared_mlp(dim)

    def forward(self, x):
        return self.net(x)
"""


def test_an_activation_class_handed_to_another_files_builder(tmp_path):
    files = {"networks/mlp.py": MLP, "algorithms/world.py": WORLD, "same.py": SAME_FILE, "shared.py": SHARED, "user.py": USER}
    root = tmp_path / "pkg"
    for folder in ("", "networks", "algorithms"):
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    for name, text in files.items():
        (root / name).write_text(text)
    expected = {(name.rsplit("/", 1)[-1], n) for name, text in files.items()
                for n, line in enumerate(text.splitlines(), 1) if line.endswith("# expect")}
    assert len(expected) == 4
    assert project_findings(tmp_path, "TML201") == expected
