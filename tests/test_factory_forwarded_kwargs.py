"""TML201 for an activation chosen by a parameter of a module that another module of the file
builds through its own ``**kwargs`` (speechtokenizer's ``MultiScaleSTFTDiscriminator`` builds
``DiscriminatorSTFT(filters, n_fft=n, **kwargs)``; ``DiscriminatorSTFT`` builds
``getattr(torch.nn, activation)(**activation_params)`` with ``activation='LeakyReLU'``): the
name is what every call of the outer module passes under that keyword, else the default (not
certain where the outer module is never called in the file). Look-alikes
stay quiet: an outer call that passes another activation through its ``**kwargs``, an outer
module that rebinds its ``**kwargs``, one that also spreads ``*args``.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

INNER = '''
    import torch
    import torch.nn as nn


    class DiscriminatorSTFT(nn.Module):
        def __init__(self, filters, n_fft=1024, activation: str = 'LeakyReLU', activation_params: dict = {'negative_slope': 0.2}):
            super().__init__()
            self.activation = getattr(torch.nn, activation)(**activation_params){mark}
            self.convs = nn.ModuleList([nn.Conv2d(2, filters, 3), nn.Conv2d(filters, filters, 3)])

        def forward(self, z):
            fmap = []
            for layer in self.convs:
                z = layer(z)
                z = self.activation(z)
                fmap.append(z)
            return z, fmap
'''
FLAGGED = "  # expect: TML201"

CASES: Dict[str, str] = {
    "outer_never_called": INNER.replace("{mark}", FLAGGED) + '''

    class MultiScaleSTFTDiscriminator(nn.Module):
        def __init__(self, filters, n_ffts=[1024, 2048], **kwargs):
            super().__init__()
            self.discriminators = nn.ModuleList([DiscriminatorSTFT(filters, n_fft=n, **kwargs) for n in n_ffts])
    ''',
    "outer_called_without_it": INNER.replace("{mark}", FLAGGED) + '''

    class MultiScaleSTFTDiscriminator(nn.Module):
        def __init__(self, filters, n_ffts=[1024, 2048], **kwargs):
            super().__init__()
            self.discriminators = nn.ModuleList([DiscriminatorSTFT(filters, n_fft=n, **kwargs) for n in n_ffts])


    def build(filters):
        return MultiScaleSTFTDiscriminator(filters, n_ffts=[512])
    ''',
    "outer_passes_another": INNER.replace("{mark}", "") + '''

    class MultiScaleSTFTDiscriminator(nn.Module):
        def __init__(self, filters, n_ffts=[1024, 2048], **kwargs):
            super().__init__()
            self.discriminators = nn.ModuleList([DiscriminatorSTFT(filters, n_fft=n, **kwargs) for n in n_ffts])


    def build(filters):
        return MultiScaleSTFTDiscriminator(filters, activation='Tanh', activation_params={})
    ''',
    "outer_rebinds_kwargs": INNER.replace("{mark}", "") + '''

    class MultiScaleSTFTDiscriminator(nn.Module):
        def __init__(self, filters, n_ffts=[1024, 2048], **kwargs):
            super().__init__()
            kwargs = dict(kwargs, activation='Tanh', activation_params={})
            self.discriminators = nn.ModuleList([DiscriminatorSTFT(filters, n_fft=n, **kwargs) for n in n_ffts])
    ''',
    "outer_spreads_args": INNER.replace("{mark}", "") + '''

    class MultiScaleSTFTDiscriminator(nn.Module):
        def __init__(self, filters, *args, **kwargs):
            super().__init__()
            self.discriminators = nn.ModuleList([DiscriminatorSTFT(filters, *args, **kwargs)])
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("forwarded_kwargs"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])

