"""TML201 on modules kept in attributes named at run time: scGLUE's encoders build
``setattr(self, f"linear_{layer}", nn.Linear(...))``, ``setattr(self, f"act_{layer}",
nn.LeakyReLU(negative_slope=0.2))``, ... in a loop of ``__init__`` and run
``ptr = getattr(self, f"act_{layer}")(ptr)`` in a loop of ``forward``; every attribute one
template names is one attribute (``act_{}``, ``analysis/named_attributes.py``). Also through a
subclass that only inherits ``forward`` (a subclass that never reads the attribute leaves the
base's uses as they are).

Look-alikes stay quiet: the activation's input read again (a residual), an attribute of the
template also read by its own name (``self.act_0``), an activation after a sigmoid.
"""

from __future__ import annotations

from marked_cases import fix_at, lint_in_process, marked, marked_fixes

SOURCE = '''
import torch


class DataEncoder(torch.nn.Module):
    def __init__(self, in_features, out_features, h_depth=2, h_dim=256, dropout=0.2):
        super().__init__()
        self.h_depth = h_depth
        ptr_dim = in_features
        for layer in range(self.h_depth):
            setattr(self, f"linear_{layer}", torch.nn.Linear(ptr_dim, h_dim))
            setattr(self, f"act_{layer}", torch.nn.LeakyReLU(negative_slope=0.2))  # expect: TML201 fix=safe
            setattr(self, f"bn_{layer}", torch.nn.BatchNorm1d(h_dim))
            setattr(self, f"dropout_{layer}", torch.nn.Dropout(p=dropout))
            ptr_dim = h_dim
        self.loc = torch.nn.Linear(ptr_dim, out_features)

    def forward(self, x):
        ptr = x
        for layer in range(self.h_depth):
            ptr = getattr(self, f"linear_{layer}")(ptr)
            ptr = getattr(self, f"act_{layer}")(ptr)
            ptr = getattr(self, f"bn_{layer}")(ptr)
            ptr = getattr(self, f"dropout_{layer}")(ptr)
        return self.loc(ptr)


class VanillaDataEncoder(DataEncoder):
    def compute_l(self, x):
        return None


class Residual(torch.nn.Module):
    def __init__(self, dim, depth=2):
        super().__init__()
        self.depth = depth
        for i in range(depth):
            setattr(self, f"fc{i}", torch.nn.Linear(dim, dim))
            setattr(self, f"act{i}", torch.nn.ELU())

    def forward(self, x):
        for i in range(self.depth):
            h = getattr(self, f"fc{i}")(x)
            x = x + getattr(self, f"act{i}")(h) + h
        return x


class Named(torch.nn.Module):
    def __init__(self, dim, depth=2):
        super().__init__()
        self.depth = depth
        for i in range(depth):
            setattr(self, f"fc_{i}", torch.nn.Linear(dim, dim))
            setattr(self, f"act_{i}", torch.nn.ELU())

    def forward(self, x):
        for i in range(self.depth):
            x = getattr(self, f"act_{i}")(getattr(self, f"fc_{i}")(x))
        return self.act_0(x) + x


class Gated(torch.nn.Module):
    def __init__(self, dim, depth=2):
        super().__init__()
        self.depth = depth
        for i in range(depth):
            setattr(self, f"gate_{i}", torch.nn.Sigmoid())
            setattr(self, f"act_{i}", torch.nn.ELU())

    def forward(self, x):
        for i in range(self.depth):
            x = getattr(self, f"act_{i}")(getattr(self, f"gate_{i}")(x))
        return x
'''


def test_modules_kept_in_attributes_named_at_run_time():
    found = lint_in_process(SOURCE, ("TML201",))
    assert set(found) == marked(SOURCE)
    assert {row: fix_at(found, row) for row in marked_fixes(SOURCE)} == marked_fixes(SOURCE)


# deepnog's DeepFam ablations: the base class adds `conv{i + 1}` modules in a loop of
# `__init__`, a subclass that never assigns them runs `getattr(self, f'conv{i + 1}')(x)` in its
# own `forward`: the inherited attribute is its template (`conv{}`, not an identifier), which
# the rule reads without failing (it raised an internal error, TML900, and lost the file)
INHERITED_TEMPLATE = '''
import torch
import torch.nn as nn


class Base(nn.Module):
    def __init__(self, sizes, activation="selu"):
        super().__init__()
        self.sizes = sizes
        if activation == "selu":
            for i, kernel in enumerate(sizes):
                self.add_module(f"conv{i + 1}", nn.Conv1d(4, 8, kernel))
            self.activation1 = nn.SELU()
        self.linear1 = nn.Linear(8, 2)


class Ablation(Base):
    def __init__(self, sizes):
        super().__init__(sizes, activation="selu")

    def forward(self, x):
        outs = []
        for i in range(len(self.sizes)):
            x_conv = getattr(self, f"conv{i + 1}")(x)
            x_conv = self.activation1(x_conv)
            outs.append(x_conv)
        return self.linear1(torch.cat(outs, 1).mean(-1))
'''


def test_an_inherited_attribute_named_at_run_time_is_read_without_an_internal_error():
    found = lint_in_process(INHERITED_TEMPLATE, ("TML201", "TML203"))
    assert not any(code == "TML900" for _, code in found), found
