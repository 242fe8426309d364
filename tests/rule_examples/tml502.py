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
    # a same-file helper that detaches what it selects from the output
    'import torch\n'
    '\n'
    '\n'
    'def select(raw_pred, questions):\n'
    '    pred = raw_pred[: questions.shape[0]].gather(1, questions.view(-1, 1))\n'
    '    return pred.detach().flatten(), questions\n'
    '\n'
    '\n'
    'def evaluate(model, loader):\n'
    '    model.eval()\n'
    '    y_pred = torch.Tensor([])\n'
    '    for batch, questions in loader:\n'
    '        out = model(batch)\n'
    '        pred, _ = select(out, questions)\n'
    '        y_pred = torch.cat([y_pred, pred])\n'
    '    return y_pred.numpy()\n',
    # the helper's other result: indices read off the batch, no graph
    'import torch\n'
    '\n'
    '\n'
    'def process_raw_pred(raw_question_matrix, raw_pred, num_questions):\n'
    '    questions = torch.nonzero(raw_question_matrix)[1:, 1] % num_questions\n'
    '    pred = raw_pred[: questions.shape[0]].gather(1, questions.view(-1, 1)).flatten()\n'
    '    truth = torch.nonzero(raw_question_matrix)[1:, 1] // num_questions\n'
    '    return pred, truth\n'
    '\n'
    '\n'
    'def evaluate(model, loader, num_questions):\n'
    '    model.eval()\n'
    '    y_truth = torch.Tensor([])\n'
    '    for batch in loader:\n'
    '        out = model(batch)\n'
    '        for student in range(batch.shape[0]):\n'
    '            pred, truth = process_raw_pred(batch[student], out[student], num_questions)\n'
    '            y_truth = torch.cat([y_truth, truth])\n'
    '    return y_truth\n',
    # a helper that makes a number of the output (a comparison): no graph
    'import torch\n'
    '\n'
    '\n'
    'def accuracy(out, y):\n'
    '    return (out.argmax(1) == y).float().mean()\n'
    '\n'
    '\n'
    'def evaluate(model, loader):\n'
    '    model.eval()\n'
    '    total = 0\n'
    '    for x, y in loader:\n'
    '        total += accuracy(model(x), y)\n'
    '    return total / len(loader)\n',
    # the helper runs under `torch.no_grad()` at the call
    'import torch\n'
    '\n'
    '\n'
    'def first(raw):\n'
    '    return raw[:, 0]\n'
    '\n'
    '\n'
    'def evaluate(model, loader):\n'
    '    model.eval()\n'
    '    preds = []\n'
    '    for x in loader:\n'
    '        out = model(x)\n'
    '        with torch.no_grad():\n'
    '            preds.append(first(out))\n'
    '    return preds\n',
    # a callable passed in, not a function of this file
    'import torch\n'
    '\n'
    '\n'
    'def first(raw):\n'
    '    return raw[:, 0]\n'
    '\n'
    '\n'
    'def evaluate(model, loader, first):\n'
    '    model.eval()\n'
    '    preds = []\n'
    '    for x in loader:\n'
    '        preds.append(first(model(x)))\n'
    '    return preds\n',
    # the list of one batch's items is made anew for every batch (the outer loop's output is
    # kept only across the inner loop)
    'import torch\n'
    '\n'
    '\n'
    'def evaluate(model, loader):\n'
    '    model.eval()\n'
    '    for x in loader:\n'
    '        out = model(x)\n'
    '        parts = []\n'
    '        for i in range(out.shape[0]):\n'
    '            parts.append(out[i])\n'
    '        print(torch.stack(parts).shape)\n',
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
    # EduKTM's DKT.eval: each student's predictions, sliced from the batch's output by a helper
    # of the file, joined across every batch in an inner loop
    Invalid(
        'import torch\n'
        '\n'
        '\n'
        'def process_raw_pred(raw_question_matrix, raw_pred, num_questions):\n'
        '    questions = torch.nonzero(raw_question_matrix)[1:, 1] % num_questions\n'
        '    length = questions.shape[0]\n'
        '    pred = raw_pred[: length]\n'
        '    pred = pred.gather(1, questions.view(-1, 1)).flatten()\n'
        '    truth = torch.nonzero(raw_question_matrix)[1:, 1] // num_questions\n'
        '    return pred, truth\n'
        '\n'
        '\n'
        'class DKT:\n'
        '    def eval(self, test_data):\n'
        '        self.dkt_model.eval()\n'
        '        y_pred = torch.Tensor([])\n'
        '        y_truth = torch.Tensor([])\n'
        '        for batch in test_data:\n'
        '            integrated_pred = self.dkt_model(batch)\n'
        '            for student in range(batch.shape[0]):\n'
        '                pred, truth = process_raw_pred(batch[student], integrated_pred[student], self.num_questions)\n'
        '                y_pred = torch.cat([y_pred, pred])\n'
        '                y_truth = torch.cat([y_truth, truth])\n'
        '        return y_truth.detach().numpy(), y_pred.detach().numpy()\n',
        line=22,
    ),
    # each row of the batch's output kept, in a loop inside the loop over batches
    Invalid(
        'import torch\n'
        '\n'
        '\n'
        'def predict(model, loader):\n'
        '    model.eval()\n'
        '    rows = []\n'
        '    for x in loader:\n'
        '        out = model(x)\n'
        '        for i in range(out.shape[0]):\n'
        '            rows.append(out[i])\n'
        '    return rows\n',
        line=10,
    ),
    # a method of the class selects from the output
    Invalid(
        'import torch\n'
        '\n'
        '\n'
        'class Evaluator:\n'
        '    def _select(self, logits, index):\n'
        '        return logits.index_select(1, index)\n'
        '\n'
        '    def evaluate(self, loader, index):\n'
        '        self.model.eval()\n'
        '        kept = []\n'
        '        for x in loader:\n'
        '            kept.append(self._select(self.model(x), index))\n'
        '        return kept\n',
        line=12,
    ),
)
