"""TML501: a parameter bound back to itself moved (``probe = probe.cuda()``, ``scorer =
scorer.to(device)``) and then called is a module (a tensor is not called, a function has no
``.cuda()``): neurox's ``evaluate_probe(probe, X, y)`` runs it over every batch with autograd
on. Look-alikes: a callable parameter never moved, a tensor moved and never called, a name bound
to another value moved."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "moved_probe": """
        import torch
        from torch.autograd import Variable


        def evaluate_probe(probe, X, y, batch_size=32):
            if torch.cuda.is_available():
                probe = probe.cuda()
            y_pred = []
            for inputs, labels in batch_generator(torch.from_numpy(X), torch.from_numpy(y), batch_size=batch_size):
                inputs = Variable(inputs)
                outputs = probe(inputs)  # expect: TML501
                _, predicted = torch.max(outputs.data, 1)
                y_pred.append(predicted.cpu().numpy())
            return y_pred
    """,
    "moved_to_device": """
        import torch


        def evaluate_scorer(scorer, batches, device):
            scorer = scorer.to(device)
            return [scorer(x).detach().cpu().numpy() for x in batches]  # expect: TML501
    """,
    "function_parameter": """
        import torch


        def evaluate_function(score_fn, batches):
            return [score_fn(x).cpu().numpy() for x in batches]
    """,
    "moved_tensor": """
        import torch


        def evaluate_tensor(weights, batches):
            weights = weights.cuda()
            return [(weights * x).sum().item() for x in batches]
    """,
    "other_value_moved": """
        import torch


        def evaluate_moved_elsewhere(probe, other, batches):
            probe = other.cuda()
            return [probe(x).detach().cpu().numpy() for x in batches]
    """,
}


def test_moved_parameters_are_modules(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML501,TML502")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
