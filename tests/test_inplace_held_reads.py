"""TML201 and an activation attribute another class of the file reads through a module it
holds (``self.gnn.activation(lin(a))``). Such a read is another object's attribute: it may be
this class's activation, so where ``self.gnn`` could hold this class, the activation's uses are
not all known and the rule stays quiet. Where the holding class gives ``self.gnn`` only
instances of other classes of the file (``Other(...)``, ``Other.load_from_checkpoint(...)``),
the read is theirs and this class's own uses decide. A read through an object not held on
``self`` (``model.activation``) keeps every class's activation unknown, as before.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "read_through_another_class": '''
        import torch.nn.functional as F
        from torch import nn


        class GraphNet(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.out = nn.Linear(d, 1)
                self.activation = F.elu  # expect: TML201

            def forward(self, a):
                return self.out(self.activation(self.lin(a)))


        class GatedBase(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.activation = F.elu

            def forward(self, a):
                return self.activation(self.lin(a)) * a


        class GraphPred(nn.Module):
            def __init__(self, d, checkpoint=None):
                super().__init__()
                if checkpoint:
                    self.gnn = GatedBase.load_from_checkpoint(checkpoint)
                else:
                    self.gnn = GatedBase(d)
                self.head = nn.Linear(d, d)
                self.out = nn.Linear(d, 1)

            def forward(self, a):
                return self.out(self.gnn.activation(self.head(self.gnn(a))))
    ''',
    "read_through_this_class": '''
        import torch.nn.functional as F
        from torch import nn


        class GraphNet(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.out = nn.Linear(d, 1)
                self.activation = F.elu

            def forward(self, a):
                return self.out(self.activation(self.lin(a)))


        class GraphPred(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.gnn = GraphNet(d)

            def forward(self, a):
                return self.gnn.activation(a) * a
    ''',
    "read_through_a_pretrained_property": '''
        import torch.nn.functional as F
        from torch import nn


        class GraphNet(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.out = nn.Linear(d, 1)
                self.activation = F.elu  # expect: TML201

            def forward(self, a):
                return self.out(self.activation(self.lin(a)))


        class GatedBase(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.activation = F.elu

            def forward(self, a):
                return self.activation(self.lin(a)) * a


        class Pretrain(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.gnn = GatedBase(d)

            @property
            def as_pretrained(self):
                return self.gnn


        class GraphPred(nn.Module):
            def __init__(self, d, checkpoint=None):
                super().__init__()
                if checkpoint:
                    self.gnn = Pretrain.load_from_checkpoint(checkpoint).as_pretrained
                else:
                    self.gnn = GatedBase(d)
                self.head = nn.Linear(d, d)
                self.out = nn.Linear(d, 1)

            def forward(self, a):
                return self.out(self.gnn.activation(self.head(self.gnn(a))))
    ''',
    "pretrained_property_may_hold_this_class": '''
        import torch.nn.functional as F
        from torch import nn


        class GraphNet(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.out = nn.Linear(d, 1)
                self.activation = F.elu

            def forward(self, a):
                return self.out(self.activation(self.lin(a)))


        class Pretrain(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.gnn = GraphNet(d)

            @property
            def as_pretrained(self):
                return self.gnn


        class GraphPred(nn.Module):
            def __init__(self, d, checkpoint):
                super().__init__()
                self.gnn = Pretrain.load_from_checkpoint(checkpoint).as_pretrained

            def forward(self, a):
                return self.gnn.activation(a) * a
    ''',
    "read_through_a_local": '''
        import torch.nn.functional as F
        from torch import nn


        class GraphNet(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.out = nn.Linear(d, 1)
                self.activation = F.elu

            def forward(self, a):
                return self.out(self.activation(self.lin(a)))


        def score(model, a):
            return model.activation(a) * a
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_held_reads"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
