"""Examples of TML501 (EvalWithoutNoGrad): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    "import torch\n\n@torch.no_grad()\ndef evaluate(model, loader):\n"
    "    return [model(x).argmax(1) for x in loader]\n",
    "import torch\n\ndef evaluate(model, loader):\n    model.eval()\n"
    "    with torch.inference_mode():\n        for x in loader:\n            model(x)\n",
    # training code: eval() for frozen batch-norm, then backward
    "import torch\n\ndef fit(model, loader, opt):\n    model.eval()\n    for x, y in loader:\n"
    "        loss = torch.nn.functional.mse_loss(model(x), y)\n        loss.backward()\n"
    "        opt.step()\n",
    # put back in training mode before the call
    "import torch\n\nmodel.eval()\nexport(model)\nmodel.train()\nout = model(x)\n",
    # Lightning runs validation_step (and what it calls) without autograd
    "import torch\n\nclass Lit:\n    def validation_step(self, batch, idx):\n"
    "        return self.predict_batch(batch)\n\n    def predict_batch(self, x):\n"
    "        return self.model(x)\n",
    # the caller turns autograd off
    "import torch\n\ndef _predict_batch(model, x):\n    return model(x)\n\n"
    "@torch.no_grad()\ndef run(model, loader):\n"
    "    return [_predict_batch(model, x) for x in loader]\n",
    # pytest tests are not evaluation loops
    "import torch\n\ndef test_shape(model):\n"
    "    assert model(torch.ones(1, 3)).shape == (1, 2)\n",
)

INVALID = (
    Invalid(
        "import torch\n\ndef validate(model, loader):\n    model.eval()\n"
        "    for x in loader:\n        print(model(x))\n",
        fixed="import torch\n\n@torch.no_grad()\ndef validate(model, loader):\n"
        "    model.eval()\n    for x in loader:\n        print(model(x))\n",
        line=6,
        column=15,
    ),
    Invalid(
        "import torch\n\nnet.eval()\ntotal = 0\n# every batch\nfor x, y in loader:\n"
        "    total += (net(x).argmax(1) == y).sum().item()\n",
        fixed="import torch\n\nnet.eval()\ntotal = 0\n# every batch\nwith torch.no_grad():\n"
        "    for x, y in loader:\n        total += (net(x).argmax(1) == y).sum().item()\n",
        line=7,
    ),
    Invalid(
        "import torch\n\nclass Runner:\n    def run(self, batches):\n"
        "        self.model.eval()\n        outs = []\n        for b in batches:\n"
        "            outs.append(self.model(b).softmax(-1).cpu().numpy())\n"
        "        return outs\n",
        fixed="import torch\n\nclass Runner:\n    def run(self, batches):\n"
        "        self.model.eval()\n"
        "        outs = []\n        with torch.no_grad():\n            for b in batches:\n"
        "                outs.append(self.model(b).softmax(-1).cpu().numpy())\n"
        "        return outs\n",
    ),
    # no fix without `import torch`
    Invalid(
        "from torch import nn\n\ndef predict(net, x):\n    return net(x)\n",
        fixed=None,
    ),
)
