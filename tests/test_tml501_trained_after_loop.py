"""TML501 leaves alone a loop whose model calls compute the loss a backward after the loop
trains on (GNNSubNet's explainer: ``self.model.eval()``, a mask optimised over rounds of
``out = self.model(data * mask.sigmoid())``, ``loss.backward()`` and ``optimizer.step()`` past
the loop): its rounds are training, ``torch.no_grad()`` there would leave the backward no graph
(``backward_names.trained_after_its_loop``).

Look-alikes still report: an evaluation loop after a training loop of the same function (its
backward comes first), a validation forward between the epochs of a training loop (its graph
lives, bound to its output, into the next epoch), one before a training loop that binds the same names (the backward's loss
is the training loop's), and an evaluation loop followed by a backward of a loss that is not
made from the loop's outputs.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "mask_optimised_backward_after_the_loop": '''
        import torch


        class Explainer(torch.nn.Module):
            def explain(self, data, epochs=100):
                self.model.eval()
                optimizer = torch.optim.Adam([self.node_feat_mask], lr=0.01)
                for epoch in range(1, epochs + 1):
                    optimizer.zero_grad()
                    h = data * self.node_feat_mask.sigmoid()
                    out = self.model(h)
                    log_logits = torch.log_softmax(out, dim=-1)
                    loss = -log_logits[0, 0]
                loss.backward()
                optimizer.step()
                return self.node_feat_mask.detach()
    ''',
    "evaluation_after_training": '''
        import torch


        def fit(model, train_loader, val_loader, optimizer, criterion):
            model.train()
            for x, y in train_loader:
                optimizer.zero_grad()
                out = model(x)
                loss = criterion(out, y)
                loss.backward()
                optimizer.step()
            model.eval()
            correct = 0
            for x, y in val_loader:
                out = model(x)  # expect: TML501
                correct += (out.argmax(-1) == y).sum().item()
            return correct
    ''',
    # colfi's and intercode's form: a whole validation set's forward between the epochs
    "validation_between_epochs": '''
        import torch


        def train(net, optimizer, loss_func, inputs, target, x_val, y_val, epochs, batches):
            vali_loss = []
            for epoch in range(epochs):
                for step in range(batches):
                    pred = net(inputs[step])
                    loss = loss_func(pred, target[step])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                net.eval()
                pred_vali = net(x_val)  # expect: TML501
                vali_loss.append(loss_func(pred_vali, y_val).item())
                net.train()
            return vali_loss
    ''',
    # GDmicro: one epoch per call, the step, then the validation after ``model.eval()``; a
    # forward after the switch that a later backward trains on is not a validation
    "validation_after_the_step": '''
        import torch
        import torch.nn.functional as F


        def train(epoch, model, optimizer, features, adj, labels, idx_train, idx_val):
            model.train()
            optimizer.zero_grad()
            output = model(features, adj)
            loss_train = F.nll_loss(output[idx_train], labels[idx_train])
            loss_train.backward()
            optimizer.step()
            model.eval()
            output = model(features, adj)  # expect: TML501
            loss_val = F.nll_loss(output[idx_val], labels[idx_val])
            return loss_val.item()


        def train_embedding(model, optimizer, data, epochs):
            for epoch in range(epochs):
                model.train()
                optimizer.zero_grad()
                z, out = model(data.x, data.edge_index)
                loss = F.mse_loss(out, data.x)
                loss.backward()
                optimizer.step()
            model.eval()
            z, out = model(data.x, data.edge_index)  # expect: TML501
            return z.cpu().detach().numpy()


        def adapt(model, optimizer, x, y):
            model.eval()
            out = model(x)
            loss = F.mse_loss(out, y)
            loss.backward()
            optimizer.step()
            return out.detach()
    ''',
    # fairmotion: an evaluation loop before the training loop, both binding ``outputs`` and ``loss``
    "evaluation_before_training_same_names": '''
        import torch


        def train(model, loader, criterion, opt, epochs):
            epoch_loss = 0
            for src, tgt in loader:
                model.eval()
                outputs = model(src)  # expect: TML501
                loss = criterion(outputs, tgt)
                epoch_loss += loss.item()
            for epoch in range(epochs):
                model.train()
                for src, tgt in loader:
                    opt.zero_grad()
                    outputs = model(src)
                    loss = criterion(outputs, tgt)
                    loss.backward()
                    opt.step()
            return epoch_loss
    ''',
    "backward_of_another_loss": '''
        import torch


        def score_then_regularise(model, loader, optimizer):
            model.eval()
            scores = []
            for x in loader:
                out = model(x)  # expect: TML501
                scores.append(out.max().item())
            penalty = sum(p.pow(2).sum() for p in model.parameters())
            penalty.backward()
            optimizer.step()
            return scores
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("tml501_trained_after_loop"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
