"""TML501 stays quiet in a helper every call of which, in the file, runs with autograd off
through its callers (cnn_framework's model manager: ``predict`` opens ``torch.no_grad()``
around ``self.batch_predict(...)``, its only caller, which runs ``self.model_prediction(...)``
per batch): ``ScopeWalk._close_no_grad_callees``. A look-alike where another method also
calls ``batch_predict`` with autograd on is still reported."""

from __future__ import annotations

from marked_cases import lint_cases, marked

MANAGER = '''
import torch


class Manager:
    def __init__(self, model, loss, metric):
        self.model, self.loss, self.metric = model, loss, metric

    def compute_loss(self, x, y):
        out = self.model(x)
        self.metric.update(out.detach(), y)
        return self.loss(out, y)

    def fit(self, loader, optimizer):
        self.model.train()
        for x, y in loader:
            optimizer.zero_grad()
            self.compute_loss(x, y).backward()
            optimizer.step()

    def model_prediction(self, x, y):
        self.compute_loss(x, y)  {mark}

    def batch_predict(self, loader):
        for x, y in loader:
            self.model_prediction(x, y)

    def predict(self, loader):
        self.model.eval()
        with torch.no_grad():
            self.batch_predict(loader)
'''

CASES = {
    "only_under_no_grad": MANAGER.replace("  {mark}", ""),
    "also_with_grad_on": MANAGER.replace("{mark}", "# expect: TML501") + '''
    def report(self, loader):
        self.batch_predict(loader)
''',
}


def test_helpers_run_only_under_a_callers_no_grad(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML501")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
