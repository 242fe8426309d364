"""TML503 stays quiet where every iteration backpropagates through a graph made before the loop
(monitizer's MDS monitor: the activations of every layer from one forward, then a backward per
layer of them, each through the same graph: the retain is needed), also when the loss reaches
those activations through a list it was appended to. It still reports a loop whose graph is made
in the iteration, a hidden state carried across iterations (rebound in the loop: detaching is
the fix), a loader or a model built before the loop (neither is a graph the loss reads), and a
size read from a parameter before the loop (timm_vis's feature inversion: a shape, no graph)."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "shared_activations": '''
import torch


class Monitor:
    def scores(self, loader):
        for images, labels in loader:
            images.requires_grad = True
            acti = self.model.get_activations(images, grad=True)
            for layer in self.layers:
                class_values = []
                for label in self.labels:
                    centered = acti[layer] - self.means[layer][label]
                    c = torch.matmul(centered[:, None, :], self.stds[layer])
                    class_values.append(c[:, 0, 0])
                class_values = torch.stack(class_values)
                c_hat = torch.argmin(class_values, dim=0)
                class_values[c_hat, range(len(labels))].backward(retain_graph=True, gradient=torch.ones(len(labels)))
                sign = torch.ge(images.grad.detach(), 0)
''',
    "fresh_each_iteration": '''
import torch
from torch import nn


def train(loader, epochs):
    model = nn.Linear(4, 2)
    net = build_model()
    data = make_loader(loader)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for x, y in data:
            optimizer.zero_grad()
            loss = ((net(model(x)) - y) ** 2).mean()
            loss.backward(retain_graph=True)  # expect: TML503
            optimizer.step()
''',
    "shape_read_before": '''
import torch


def invert(model, module, orig_img, epochs, lr):
    acts = [0]

    def hook_fn(self, input, output):
        acts[0] = output

    module.register_forward_hook(hook_fn)
    _ = model(orig_img)
    orig_features = acts[0]
    name, weights = next(model.named_parameters())
    noise = torch.randn([1, weights.size()[1], 224, 224])
    noise.requires_grad = True
    opt = torch.optim.SGD([noise], lr=lr)
    for i in range(epochs):
        opt.zero_grad()
        _ = model(noise)
        loss = ((orig_features - acts[0]) ** 2).sum() + noise.abs().mean()
        loss.backward(retain_graph=True)  # expect: TML503
        opt.step()
''',
    "carried_hidden_state": '''
import torch


def train(rnn, head, batches, optimizer):
    hidden = rnn.init_hidden()
    for x, y in batches:
        optimizer.zero_grad()
        out, hidden = rnn(x, hidden)
        loss = ((head(out) - y) ** 2).mean()
        loss.backward(retain_graph=True)  # expect: TML503
        optimizer.step()
''',
}


def test_retain_graph_over_a_graph_made_before_the_loop(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML503")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
