"""TML401 (and the checkpoint family) through a local that the function binds to torch's
checkpoint in one arm and to something else in the other, as transkun writes it:

    if self.training:
        checkpoint = torch.utils.checkpoint.checkpoint
    else:
        checkpoint = checkpointByPass
    for l in self.layers:
        z = checkpoint(l, z)

The call checkpoints (in training), so it is reported; without a fix when the other arm binds
something else (the keyword the fix adds may not suit it: another value, a nested ``def`` of the
name, an annotated assignment, a loop target), with one when every binding is torch's checkpoint.
A nested function's bindings are its own. Look-alikes stay quiet: a local bound only to another function, a parameter named
``checkpoint``, a local bound to ``partial(checkpoint, use_reentrant=False)``.

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``
(``fix=...``: the fix's applicability, ``none`` for a finding without one)."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, fix_at, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

HEAD = '''
    from functools import partial

    import torch
    import torch.utils.checkpoint
    from torch import nn


    def checkpointByPass(f, *args):
        return f(*args)


    class PreLayer(nn.Module):
        def __init__(self, n=4):
            super().__init__()
            self.layers = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.GELU()) for _ in range(n)])
'''

CASES: Dict[str, str] = {
    "training_arm": HEAD + '''
        def forward(self, x):
            if self.training:
                checkpoint = torch.utils.checkpoint.checkpoint
            else:
                checkpoint = checkpointByPass
            z = x
            for l in self.layers:
                z = checkpoint(l, z)  # expect: TML401 fix=none
            return z
    ''',
    "sequential_arm": HEAD + '''
        def forward(self, x):
            if self.training:
                run = torch.utils.checkpoint.checkpoint_sequential
            else:
                run = lambda layers, n, h: layers(h)
            return run(nn.Sequential(*self.layers), 2, x)  # expect: TML401 fix=none
    ''',
    "only_torch": HEAD + '''
        def forward(self, x):
            ckpt = torch.utils.checkpoint.checkpoint
            z = x
            for l in self.layers:
                z = ckpt(l, z)  # expect: TML401
            return z
    ''',
    # the bypass as a nested `def`, an annotated assignment or a loop target: other bindings,
    # so no fix (the keyword would break them)
    "bypass_nested_def": HEAD + '''
        def forward(self, x):
            if self.training:
                ckpt = torch.utils.checkpoint.checkpoint
            else:
                def ckpt(f, *args):
                    return f(*args)
            z = x
            for l in self.layers:
                z = ckpt(l, z)  # expect: TML401 fix=none
            return z
    ''',
    "bypass_annotated": HEAD + '''
        def forward(self, x):
            ckpt: object = checkpointByPass
            if self.training:
                ckpt = torch.utils.checkpoint.checkpoint
            z = x
            for l in self.layers:
                z = ckpt(l, z)  # expect: TML401 fix=none
            return z
    ''',
    "bypass_loop_target": HEAD + '''
        def forward(self, x, runners=(checkpointByPass,)):
            ckpt = torch.utils.checkpoint.checkpoint
            z = x
            for ckpt in runners:
                z = ckpt(self.layers[0], z)  # expect: TML401 fix=none
            return z
    ''',
    # a nested function's own `checkpoint` is not the outer function's
    "nested_scope": HEAD + '''
        def forward(self, x):
            def inner(f, y):
                checkpoint = torch.utils.checkpoint.checkpoint
                return checkpoint(f, y)  # expect: TML401

            checkpoint = checkpointByPass
            z = checkpoint(self.layers[0], x)
            return inner(self.layers[1], z)
    ''',
    "only_bypass": HEAD + '''
        def forward(self, x):
            checkpoint = checkpointByPass
            z = x
            for l in self.layers:
                z = checkpoint(l, z)
            return z
    ''',
    "parameter": HEAD + '''
        def forward(self, x, checkpoint=checkpointByPass):
            z = x
            for l in self.layers:
                z = checkpoint(l, z)
            return z
    ''',
    "non_reentrant_partial": HEAD + '''
        def forward(self, x):
            if self.training:
                checkpoint = partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)
            else:
                checkpoint = checkpointByPass
            z = x
            for l in self.layers:
                z = checkpoint(l, z)
            return z
    ''',
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("checkpoint_local_alias"), CASES, "TML401,TML402,TML403,TML404")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixes_are_the_marked_ones(found, name):
    for row, expected in marked_fixes(CASES[name]).items():
        assert fix_at(found[name], row) == expected, (name, row)
