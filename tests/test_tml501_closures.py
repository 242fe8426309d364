"""TML501 in a nested function that runs a model of the function around it (a closure):
counterfactual and explanation searches wrap the model in ``def model_predict(data): return
detach_to_numpy(model(to_tensor(data)))`` inside ``def search(sample, model, ...)`` and call it
for every candidate. The closure reads ``model`` from the enclosing function, where it is a
parameter named like a model or a receiver of ``.eval()``; its output only becomes numbers.

Look-alikes stay quiet: the closure called under ``torch.no_grad()`` or defined in a function
decorated so, an optimizer closure that backpropagates, a closure that returns the output (its
caller decides), a closure that binds ``model`` itself from something not named like a model.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "genetic_search": '''
        import numpy as np
        import torch


        def detach_to_numpy(data):
            return data.cpu().detach().numpy()


        def wachter_genetic_cf(sample, model, target_class=None, max_steps=1000):
            device = next(model.parameters()).device

            def model_predict(data):
                if isinstance(data, np.ndarray):
                    data_tensor = torch.tensor(data, dtype=torch.float32, device=device)
                else:
                    data_tensor = data
                if len(data_tensor.shape) == 1:
                    data_tensor = data_tensor.reshape(1, 1, -1)
                return detach_to_numpy(model(data_tensor))  # expect: TML501

            y_cf = model_predict(sample)[0]
            for _ in range(max_steps):
                candidate = sample + np.random.randn(*sample.shape)
                if np.argmax(model_predict(candidate)) == target_class:
                    return candidate
            return None
    ''',
    "switched_to_eval_around": '''
        import torch


        def explain(net, samples, explainer):
            net.eval()

            def score(batch):
                out = net(torch.as_tensor(batch))  # expect: TML501
                return out.softmax(-1).detach().cpu().numpy()

            return explainer(score, samples)
    ''',
    "look_alikes": '''
        import numpy as np
        import torch


        def detach_to_numpy(data):
            return data.cpu().detach().numpy()


        def called_under_no_grad(sample, model):
            def model_predict(data):
                return detach_to_numpy(model(torch.as_tensor(data)))

            with torch.no_grad():
                return model_predict(sample)


        @torch.no_grad()
        def outer_no_grad(sample, model):
            def model_predict(data):
                return detach_to_numpy(model(torch.as_tensor(data)))

            return model_predict(sample)


        def lbfgs(model, x, y, optimizer, criterion):
            def closure():
                optimizer.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                return loss

            optimizer.step(closure)


        def returns_output(model):
            def forward_fn(data):
                return model(data)

            return forward_fn


        def rebinds(models, sample):
            def predict_one(data):
                model = models[0]
                return model(data).detach().cpu().numpy()

            return predict_one(sample)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("tml501_closures"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
