"""``ContainerHelpers``: which functions of a file build ``nn.Sequential`` / ``nn.ModuleList`` of
the modules they are given (``analysis/container_helpers.py``), in the forms real code writes
(magvit2's ``def Sequential(*modules)`` that drops the Nones), and the look-alikes that reorder,
add, wrap or take other positional parameters."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchmemlint.analysis.container_helpers import ContainerHelpers, MODULE_LIST, SEQUENTIAL
from torchmemlint.analysis.names import Bindings

SOURCE = '''
from torch import nn
import torch.nn as tnn


def exists(v):
    return v is not None


def Sequential(*modules):
    modules = [*filter(exists, modules)]
    if len(modules) == 0:
        return nn.Identity()
    return nn.Sequential(*modules)


def Chain(*layers, checkpointed=False):
    kept = [m for m in layers if m is not None]
    if len(kept) == 1:
        return kept[0]
    return tnn.Sequential(*list(kept))


def Layers(*modules):
    return nn.ModuleList(modules)


def Reversed(*modules):
    return nn.Sequential(*reversed(modules))


def Gated(*modules):
    modules = list(modules)
    modules.insert(1, nn.Sigmoid())
    return nn.Sequential(*modules)


def Replaced(*modules):
    modules = list(modules)
    modules[0] = nn.Sigmoid()
    return nn.Sequential(*modules)


def Block(dim, *modules):
    return nn.Sequential(nn.Conv2d(dim, dim, 1), *modules)


def Wrapped(*modules):
    return Residual(nn.Sequential(*modules))


def Required(*modules, depth):
    return nn.Sequential(*modules)


def Twice(*modules):
    return nn.Sequential(*modules)


def Twice(*modules):
    return nn.ModuleList(modules)


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
'''


def _helpers() -> ContainerHelpers:
    module = cst.parse_module(textwrap.dedent(SOURCE))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    return ContainerHelpers(module, bindings.qualify)


def test_helpers_that_build_a_container_of_their_arguments():
    helpers = _helpers()
    assert helpers.container("Sequential") == SEQUENTIAL  # filtered, nn.Identity when empty
    assert helpers.container("Chain") == SEQUENTIAL  # a comprehension, one of them when alone
    assert helpers.container("Layers") == MODULE_LIST


def test_look_alikes_are_not_containers_of_their_arguments():
    helpers = _helpers()
    for name in ("Reversed", "Gated", "Replaced", "Block", "Wrapped", "Required", "Twice", "exists", "Residual", "missing"):
        assert helpers.container(name) is None, name
