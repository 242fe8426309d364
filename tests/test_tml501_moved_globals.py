"""TML501 on a model bound at a script's top level and rebound to itself moved
(``model = GNN()``, then ``model = model.to(device)``): the second binding is the same module
(``callers._moved_itself``), so a function that runs it with autograd on, never
backpropagates and only turns its output into numbers, numpy or prints is reported, as when
the model is bound once.

Look-alikes stay quiet: a top-level name rebound to something else than itself moved
(``model = wrap(model)``: what ``wrap`` returns is not known), a name first bound to a value
that is not a module (``table = load_table(); table = table.to(device)``), the output
returned to the caller by a function not named for evaluation, and a function that trains.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

_SCRIPT = '''
    import pandas as pd
    import torch
    import torch.nn.functional as F
    from torch.nn import Linear

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


    class GNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = Linear(8, 1)

        def forward(self, x):
            return self.lin(F.leaky_relu(x))


    model = GNN()
    {rebind}
    optimizer = torch.optim.Adam(model.parameters())
    x = torch.randn(4, 8)


    def train():
        model.train()
        optimizer.zero_grad()
        loss = model(x).mean()
        loss.backward()
        optimizer.step()
        return loss


    def predict():
        df = pd.DataFrame()
        out = torch.sigmoid(model(x)){expect}
        df["prob"] = out.cpu().detach().numpy().squeeze().round(2)
        print(df.head())
'''

CASES: Dict[str, str] = {
    "moved_to_the_device": _SCRIPT.format(rebind="model = model.to(device)", expect="  # expect: TML501"),
    "moved_and_switched": _SCRIPT.format(rebind="model = model.cuda().float()", expect="  # expect: TML501"),
    "bound_once": _SCRIPT.format(rebind="", expect="  # expect: TML501"),
    "rebound_to_what_a_helper_returns_stays_quiet": _SCRIPT.format(rebind="model = wrap(model)", expect=""),
    "a_table_moved_stays_quiet": '''
        import torch

        table = load_table()
        table = table.to("cpu")


        def predict(x):
            out = table(x)
            print(out.detach().cpu().numpy())
    ''',
    "output_returned_stays_quiet": '''
        import torch
        from torch import nn

        model = nn.Linear(8, 1)
        model = model.to("cpu")


        def scores(x):
            return model(x)
    ''',
    "a_training_function_stays_quiet": '''
        import torch
        from torch import nn

        model = nn.Linear(8, 1)
        model = model.to("cpu")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


        def step(x):
            out = model(x)
            print(out.detach().cpu().numpy())
            out.sum().backward()
            optimizer.step()
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("tml501_moved_globals"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
