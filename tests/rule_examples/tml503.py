"""Examples of TML503 (RetainGraphWithoutSecondBackward): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    # two backwards through a shared graph (GAN)
    "import torch\n\nfor x in loader:\n    fake = gen(x)\n    d_loss = crit(disc(fake), 0)\n"
    "    d_loss.backward(retain_graph=True)\n    g_loss = crit(disc(fake), 1)\n"
    "    g_loss.backward()\n",
    # the same graph backpropagated once per output
    "import torch\n\nout = model(x)\nfor i in range(out.numel()):\n"
    "    out[i].backward(retain_graph=True)\n",
    "import torch\n\nloss = criterion(model(x), y)\nloss.backward(retain_graph=True)\n",
    "import torch\n\nfor x, y in loader:\n    loss = criterion(model(x), y)\n"
    "    loss.backward(retain_graph=True, create_graph=True)\n",
    # losses the caller made, each one's gradient taken in a loop; the caller backpropagates
    # their total afterwards (loop_items.py): the loop's own target over a dict of them
    "import torch\n\ndef grad_ratios(per_head, h):\n    ratios = {}\n"
    "    for name, loss in per_head.items():\n"
    "        g = torch.autograd.grad(loss, h, retain_graph=True)[0]\n"
    "        ratios[name] = float(g.norm())\n    return ratios\n",
    # ... or an item of it, taken by key
    "import torch\n\ndef adaptive(losses, params, names):\n    norms = []\n"
    "    for name in names:\n        loss = losses[name]\n"
    "        grads = torch.autograd.grad(loss, params, retain_graph=True)\n"
    "        norms.append(sum(float(g.norm()) for g in grads))\n    return norms\n",
)

INVALID = (
    # Issue 12: the functional form.
    Invalid(
        "import torch\n\nfor x, y in loader:\n    loss = criterion(model(x), y)\n"
        "    torch.autograd.backward(loss, retain_graph=True)\n    optimizer.step()\n",
        fixed="import torch\n\nfor x, y in loader:\n    loss = criterion(model(x), y)\n"
        "    torch.autograd.backward(loss)\n    optimizer.step()\n",
        line=5,
    ),
    Invalid(
        "import torch\n\nfor x, y in loader:\n    loss = criterion(model(x), y)\n"
        "    loss.backward(retain_graph=True)\n    optimizer.step()\n",
        fixed="import torch\n\nfor x, y in loader:\n    loss = criterion(model(x), y)\n"
        "    loss.backward()\n    optimizer.step()\n",
        line=5,
        column=5,
    ),
    Invalid(
        "import torch\n\ndef train(model, loader, scaler):\n    for x, y in loader:\n"
        "        loss = model(x).mean()\n"
        "        scaler.scale(loss).backward(inputs=None, retain_graph=True)\n",
        fixed="import torch\n\ndef train(model, loader, scaler):\n    for x, y in loader:\n"
        "        loss = model(x).mean()\n        scaler.scale(loss).backward(inputs=None)\n",
    ),
)
