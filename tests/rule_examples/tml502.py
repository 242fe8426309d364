"""Examples of TML502 (AccumulatedTensor): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    "import torch\n\nrunning = 0.0\nfor x, y in loader:\n    loss = criterion(model(x), y)\n"
    "    loss.backward()\n    running += loss.item()\n",
    "import torch\n\nseen = 0\nfor x, y in loader:\n    out = model(x)\n"
    "    seen += x.size(0)\n    correct = 0\n    correct += (out.argmax(1) == y).sum()\n",
    "import torch\n\nwith torch.no_grad():\n    outs = []\n    for x in loader:\n"
    "        outs.append(model(x))\n",
    "import torch\n\nouts = []\nfor x in loader:\n    outs.append(model(x).detach().cpu())\n",
    # gradient accumulation: the sum is backpropagated
    "import torch\n\nacc = 0\nfor i, (x, y) in enumerate(loader):\n"
    "    acc = acc + criterion(model(x), y)\n    if i % 4 == 3:\n        acc.backward()\n"
    "        acc = 0\n",
    # reset every iteration
    "import torch\n\nfor x, y in loader:\n    total = 0\n    for head in model(x):\n"
    "        total += criterion(head, y)\n    total.backward()\n",
    # Issue 12: a constructor that fills a ModuleList (`self.module` is a block class here).
    "import torch\nfrom torch import nn\n\nclass UNet(nn.Module):\n"
    "    def __init__(self, module, depth):\n        super().__init__()\n"
    "        self.module = module\n        self.down = nn.ModuleList()\n"
    "        for i in range(depth):\n            self.down.append(self.module(2 ** i, 2 ** (i + 1)))\n",
    # a list under a key, of numbers
    "import torch\n\nhistory = {'loss': []}\nfor x, y in loader:\n"
    "    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
    "    history['loss'].append(loss.item())\n",
    # reset unconditionally on every iteration, after a conditional use
    "import torch\n\nfor step, (x, y) in enumerate(loader):\n    running_loss = 0.0\n"
    "    loss = criterion(model(x), y)\n    loss.backward()\n    running_loss += loss\n"
    "    if step % 100 == 99:\n        print(running_loss)\n",
    # Issue 12 false positive: per-image losses of one batch (torchvision SSD `compute_loss`),
    # stacked after the loop: one loss computation, not an accumulation across batches.
    "import torch\nimport torch.nn.functional as F\n\n"
    "def compute_loss(targets, regression, anchors):\n    bbox_loss = []\n"
    "    for target, pred, anchor in zip(targets, regression, anchors):\n"
    "        encoded = encode(target, anchor)\n"
    "        bbox_loss.append(F.smooth_l1_loss(pred, encoded, reduction='sum'))\n"
    "    return torch.stack(bbox_loss).sum()\n",
    # under `@torch.no_grad()`
    'import torch\n'
    '\n'
    '\n'
    '@torch.no_grad()\n'
    'def quiet(model, loader):\n'
    '    model.eval()\n'
    '    preds = torch.empty(0)\n'
    '    for x in loader:\n'
    '        preds = torch.cat((preds, model(x)), 0)\n'
    '    return preds\n',
    # joined after `.detach()`
    'import torch\n'
    '\n'
    '\n'
    'def quiet_detached(model, loader):\n'
    '    model.eval()\n'
    '    preds = torch.empty(0)\n'
    '    for x in loader:\n'
    '        preds = torch.cat((preds, model(x).detach()), 0)\n'
    '    return preds\n',
    # `torch.cat` of two tensors of this iteration, nothing carried to the next
    'import torch\n'
    '\n'
    '\n'
    'def quiet_rebound(model, loader):\n'
    '    for x in loader:\n'
    '        both = torch.cat((x, model(x)), 1)\n'
    '        print(both.shape)\n',
)

INVALID = (
    # Issue 12: a list kept under a key of a dict.
    Invalid(
        "import torch\n\nhistory = {'loss': []}\nfor x, y in loader:\n"
        "    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
        "    history['loss'].append(loss)\n",
        line=8,
    ),
    # Issue 12: a running loss reset every N steps still keeps up to N graphs (PyTorch FAQ).
    Invalid(
        "import torch\n\nrunning_loss = 0.0\nfor step, (x, y) in enumerate(loader):\n"
        "    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    running_loss += loss\n    if step % 100 == 99:\n"
        "        print(running_loss / 100)\n        running_loss = 0.0\n",
        fixed="import torch\n\nrunning_loss = 0.0\nfor step, (x, y) in enumerate(loader):\n"
        "    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n    loss.backward()\n"
        "    optimizer.step()\n    running_loss += loss.item()\n    if step % 100 == 99:\n"
        "        print(running_loss / 100)\n        running_loss = 0.0\n",
        line=9,
    ),
    Invalid(
        "import torch\n\nrunning = 0.0\nfor x, y in loader:\n"
        "    loss = criterion(model(x), y)\n"
        "    loss.backward()\n    optimizer.step()\n    running += loss\n"
        "print(running / len(loader))\n",
        fixed="import torch\n\nrunning = 0.0\nfor x, y in loader:\n"
        "    loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n"
        "    running += loss.item()\nprint(running / len(loader))\n",
        line=8,
        column=5,
    ),
    Invalid(
        "import torch\nimport torch.nn.functional as F\n\nlosses = []\nfor x, y in loader:\n"
        "    loss = F.cross_entropy(model(x), y)\n    losses.append(loss)\n"
        "print(sum(losses) / len(losses))\n",
        fixed="import torch\nimport torch.nn.functional as F\n\nlosses = []\n"
        "for x, y in loader:\n"
        "    loss = F.cross_entropy(model(x), y)\n    losses.append(loss.item())\n"
        "print(sum(losses) / len(losses))\n",
    ),
    # model outputs: no `.item()` fix
    Invalid(
        "import torch\n\ndef collect(model, loader):\n    preds = []\n    for x in loader:\n"
        "        preds.append(model(x).softmax(-1))\n    return torch.cat(preds)\n",
        line=6,
    ),
    # the accumulator is used as a tensor afterwards: no `.item()` fix
    Invalid(
        "import torch\n\ntotal = 0\nfor x, y in loader:\n    loss = loss_fn(model(x), y)\n"
        "    loss.backward()\n    total = total + loss\nprint(total.item())\n",
        line=7,
    ),
    # The same stacked list over a data loader is an accumulation across batches.
    Invalid(
        "import torch\nimport torch.nn.functional as F\n\n"
        "def validation_loss(predict, val_loader):\n    losses = []\n"
        "    for x, y in val_loader:\n"
        "        losses.append(F.cross_entropy(predict(x), y))\n"
        "    return torch.stack(losses).mean()\n",
    ),
    # a model output joined to a loop-carried tensor: `preds = out if preds is None else torch.cat((preds, out), 0)`
    Invalid(
        'import torch\n'
        '\n'
        '\n'
        'def predict_all(model, loader):\n'
        '    model.eval()\n'
        '    preds = None\n'
        '    for x, _ in loader:\n'
        '        out = model(x)\n'
        '        preds = out if preds is None else torch.cat((preds, out), 0)\n'
        '    return preds\n',
        line=9,
    ),
    # `torch.cat([outs, model(x).softmax(1)], dim=0)`: the joined tensor carries every batch's graph
    Invalid(
        'import torch\n'
        '\n'
        '\n'
        'def collect(model, loader):\n'
        '    model.eval()\n'
        '    outs = torch.empty(0)\n'
        '    for x in loader:\n'
        '        outs = torch.cat([outs, model(x).softmax(1)], dim=0)\n'
        '    return outs\n',
        line=8,
    ),
    # a training loop that joins each loss to a tensor of losses
    Invalid(
        'import torch\n'
        '\n'
        '\n'
        'def train(model, loader, opt, criterion):\n'
        '    losses = torch.zeros(0)\n'
        '    for x, y in loader:\n'
        '        loss = criterion(model(x), y)\n'
        '        opt.zero_grad()\n'
        '        loss.backward()\n'
        '        opt.step()\n'
        '        losses = torch.cat((losses, loss.unsqueeze(0)))\n'
        '    return losses\n',
        line=11,
    ),
)
