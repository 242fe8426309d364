"""Examples of TML203 (UnsafeInplace): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    # an in-place ReLU spliced first into a block whose input is fresh and not reused
    'import torch.nn as nn\n\nclass Quiet(nn.Module):\n    def __init__(self, c):\n        super().__init__()\n        self.relu = nn.ReLU(inplace=True)\n        self.conv0 = nn.Conv2d(c, c, 3, padding=1)\n        rep = []\n        rep.append(self.relu)\n        rep.append(nn.Conv2d(c, c, 3, padding=1))\n        self.rep = nn.Sequential(*rep)\n\n    def forward(self, inp):\n        y = self.conv0(inp)\n        x = self.rep(y)\n        return x + inp\n',
    # torchvision's BasicBlock: every call of the shared ReLU is safe
    "import torch.nn as nn\n\n"
    "class BasicBlock(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.conv1 = nn.Conv2d(8, 8, 3, padding=1)\n"
    "        self.bn1 = nn.BatchNorm2d(8)\n"
    "        self.relu = nn.ReLU(inplace=True)\n"
    "        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)\n"
    "        self.bn2 = nn.BatchNorm2d(8)\n"
    "        self.downsample = None\n\n"
    "    def forward(self, x):\n"
    "        identity = x\n"
    "        out = self.conv1(x)\n"
    "        out = self.bn1(out)\n"
    "        out = self.relu(out)\n"
    "        out = self.conv2(out)\n"
    "        out = self.bn2(out)\n"
    "        if self.downsample is not None:\n"
    "            identity = self.downsample(x)\n"
    "        out += identity\n"
    "        out = self.relu(out)\n"
    "        return out\n",
    "import torch.nn as nn\nblock = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(inplace=True))\n",
    "import torch.nn.functional as F\n\n"
    "def f(conv, x):\n"
    "    y = conv(x)\n"
    "    y = F.relu(y, inplace=True)\n"
    "    return y\n",
    # mutually exclusive branches: the other branch's read never follows
    "import torch.nn.functional as F\n\n"
    "def f(conv, x, flag):\n"
    "    y = conv(x)\n"
    "    if flag:\n"
    "        out = F.relu(y, inplace=True)\n"
    "    else:\n"
    "        out = y * 2\n"
    "    return out\n",
    # a look-alike: a local function named relu_
    "import torch\n\ndef relu_(t):\n    return t\n\ndef f(x):\n    y = torch.sigmoid(x)\n    return relu_(y)\n",
    # `p.sigmoid_()` as a statement of its own: later reads of `p` want the activated value
    "import torch.nn as nn\n\n"
    "class Gate(nn.Module):\n"
    "    def __init__(self, c):\n"
    "        super().__init__()\n"
    "        self.linear_g = nn.Linear(c, c)\n"
    "        self.linear_p = nn.Linear(c, c)\n\n"
    "    def forward(self, pair, mask):\n"
    "        p = self.linear_g(pair)\n"
    "        p.sigmoid_()\n"
    "        p *= self.linear_p(pair)\n"
    "        p *= mask\n"
    "        return p\n",
    # a factory whose default runs out of place on the residual's input
    "import torch.nn as nn\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, c, act_layer=nn.ReLU):\n"
    "        super().__init__()\n"
    "        self.conv = nn.Conv2d(c, c, 3, padding=1)\n"
    "        self.act = act_layer()\n\n"
    "    def forward(self, x):\n"
    "        y = self.conv(x)\n"
    "        return self.act(y) + y\n",
    # the same block where self.relu only follows a BatchNorm, in every order
    (
    'import torch.nn as nn\n'
    '\n'
    '\n'
    'class Block(nn.Module):\n'
    '    def __init__(self, cin, cout, reps, grow_first=True):\n'
    '        super().__init__()\n'
    '        self.skip = nn.Conv2d(cin, cout, 1)\n'
    '        self.relu = nn.ReLU(inplace=True)\n'
    '        rep = []\n'
    '        filters = cin\n'
    '        if grow_first:\n'
    '            rep.append(nn.Conv2d(cin, cout, 3, padding=1))\n'
    '            rep.append(nn.BatchNorm2d(cout))\n'
    '            rep.append(self.relu)\n'
    '            filters = cout\n'
    '        for i in range(reps - 1):\n'
    '            rep.append(nn.Conv2d(filters, filters, 3, padding=1))\n'
    '            rep.append(nn.BatchNorm2d(filters))\n'
    '            rep.append(self.relu)\n'
    '        self.rep = nn.Sequential(*rep)\n'
    '\n'
    '    def forward(self, inp):\n'
    '        x = self.rep(inp)\n'
    '        skip = self.skip(inp)\n'
    '        return x + skip\n'
    ),
    # Xception as timm writes it: `rep[0] = nn.ReLU(inplace=False)` when the block starts with a ReLU; the in-place ones follow a BatchNorm
    'import torch.nn as nn\n'
    '\n'
    '\n'
    'class Block(nn.Module):\n'
    '    def __init__(self, cin, cout, reps, strides=1, start_with_relu=True, grow_first=True, dropout=False):\n'
    '        super().__init__()\n'
    '        self.skip = nn.Conv2d(cin, cout, 1, stride=strides, bias=False)\n'
    '        rep = []\n'
    '        filters = cin\n'
    '        if grow_first:\n'
    '            rep.append(nn.ReLU(inplace=True))\n'
    '            rep.append(nn.Conv2d(cin, cout, 3, padding=1, bias=False))\n'
    '            rep.append(nn.BatchNorm2d(cout))\n'
    '            filters = cout\n'
    '        for i in range(reps - 1):\n'
    '            rep.append(nn.ReLU(inplace=True))\n'
    '            rep.append(nn.Conv2d(filters, filters, 3, padding=1, bias=False))\n'
    '            rep.append(nn.BatchNorm2d(filters))\n'
    '        if not grow_first:\n'
    '            rep.append(nn.ReLU(inplace=True))\n'
    '            rep.append(nn.Conv2d(cin, cout, 3, padding=1, bias=False))\n'
    '            rep.append(nn.BatchNorm2d(cout))\n'
    '        if dropout:\n'
    '            rep.append(nn.Dropout2d(0.1))\n'
    '        if not start_with_relu:\n'
    '            rep = rep[1:]\n'
    '        else:\n'
    '            rep[0] = nn.ReLU(inplace=False)\n'
    '        if strides != 1:\n'
    '            rep.append(nn.MaxPool2d(3, strides, 1))\n'
    '        self.rep = nn.Sequential(*rep)\n'
    '\n'
    '    def forward(self, inp):\n'
    '        x = self.rep(inp)\n'
    '        skip = self.skip(inp)\n'
    '        return x + skip\n',
)

INVALID = (
    Invalid(
        "import torch\nimport torch.nn.functional as F\n\n"
        "def gate(x):\n"
        "    return F.relu(torch.sigmoid(x), inplace=True)\n",
        fixed="import torch\nimport torch.nn.functional as F\n\n"
        "def gate(x):\n"
        "    return F.relu(torch.sigmoid(x))\n",
        line=5,
        column=12,
    ),
    Invalid(
        "import torch.nn as nn\n\n"
        "class PreAct(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.act = nn.ReLU(inplace=True)\n"
        "        self.conv = nn.Conv2d(8, 8, 3, padding=1)\n\n"
        "    def forward(self, x):\n"
        "        y = self.conv(x)\n"
        "        out = self.act(y)\n"
        "        return self.conv(out) + y\n",
        fixed="import torch.nn as nn\n\n"
        "class PreAct(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.act = nn.ReLU()\n"
        "        self.conv = nn.Conv2d(8, 8, 3, padding=1)\n\n"
        "    def forward(self, x):\n"
        "        y = self.conv(x)\n"
        "        out = self.act(y)\n"
        "        return self.conv(out) + y\n",
        line=11,
        column=15,
    ),
    Invalid(
        "import torch.nn as nn\n\n"
        "class Head(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.body = nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(8, 8, 1))\n\n"
        "    def forward(self, x):\n"
        "        return self.body(x)\n",
        fixed="import torch.nn as nn\n\n"
        "class Head(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.body = nn.Sequential(nn.ReLU(), nn.Conv2d(8, 8, 1))\n\n"
        "    def forward(self, x):\n"
        "        return self.body(x)\n",
    ),
    Invalid(
        "import torch\n\ndef f(x):\n    y = torch.tanh(x)\n    return y.relu_()\n",
        fixed="import torch\n\ndef f(x):\n    y = torch.tanh(x)\n    return y.relu()\n",
    ),
    Invalid(
        "import torch.nn as nn\nblock = nn.Sequential(nn.Softmax(dim=1), nn.ELU(inplace=True))\n",
        fixed="import torch.nn as nn\nblock = nn.Sequential(nn.Softmax(dim=1), nn.ELU())\n",
    ),
    # `rep.append(self.relu)` first in a block whose input is reused as the shortcut
    Invalid(
        'import torch.nn as nn\n\nclass Block(nn.Module):\n    def __init__(self, c):\n        super().__init__()\n        self.relu = nn.ReLU(inplace=True)\n        rep = []\n        rep.append(self.relu)\n        rep.append(nn.Conv2d(c, c, 3, padding=1))\n        rep.append(nn.BatchNorm2d(c))\n        self.rep = nn.Sequential(*rep)\n\n    def forward(self, inp):\n        x = self.rep(inp)\n        skip = inp\n        x += skip\n        return x\n',
        fixed='import torch.nn as nn\n\nclass Block(nn.Module):\n    def __init__(self, c):\n        super().__init__()\n        self.relu = nn.ReLU()\n        rep = []\n        rep.append(self.relu)\n        rep.append(nn.Conv2d(c, c, 3, padding=1))\n        rep.append(nn.BatchNorm2d(c))\n        self.rep = nn.Sequential(*rep)\n\n    def forward(self, inp):\n        x = self.rep(inp)\n        skip = inp\n        x += skip\n        return x\n',
        line=14,
    ),
    # the bare `x.relu_()` statement, but another name still holds the pre-activation tensor
    Invalid(
        "import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def forward(self, inp):\n"
        "        x = self.conv(inp)\n"
        "        skip = x\n"
        "        x.relu_()\n"
        "        return self.conv(x) + skip\n",
        fixed="import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def forward(self, inp):\n"
        "        x = self.conv(inp)\n"
        "        skip = x\n"
        "        x.relu()\n"
        "        return self.conv(x) + skip\n",
        line=7,
    ),
    # `act_layer(inplace=True)` with `act_layer=nn.ReLU` runs on a tensor read again
    Invalid(
        "import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, c, act_layer=nn.ReLU):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(c, c, 3, padding=1)\n"
        "        self.act = act_layer(inplace=True)\n\n"
        "    def forward(self, x):\n"
        "        y = self.conv(x)\n"
        "        return self.act(y) + y\n",
        fixed="import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, c, act_layer=nn.ReLU):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(c, c, 3, padding=1)\n"
        "        self.act = act_layer()\n\n"
        "    def forward(self, x):\n"
        "        y = self.conv(x)\n"
        "        return self.act(y) + y\n",
        line=11,
    ),
    # Xception-style: `rep.append(self.relu)` first in a branch, again in a loop; the block's
    # input is reused by the shortcut
    Invalid(
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'class Block(nn.Module):\n'
        '    def __init__(self, cin, cout, reps, grow_first=True):\n'
        '        super().__init__()\n'
        '        self.skip = nn.Conv2d(cin, cout, 1)\n'
        '        self.relu = nn.ReLU(inplace=True)\n'
        '        rep = []\n'
        '        filters = cin\n'
        '        if grow_first:\n'
        '            rep.append(self.relu)\n'
        '            rep.append(nn.Conv2d(cin, cout, 3, padding=1))\n'
        '            rep.append(nn.BatchNorm2d(cout))\n'
        '            filters = cout\n'
        '        for i in range(reps - 1):\n'
        '            rep.append(self.relu)\n'
        '            rep.append(nn.Conv2d(filters, filters, 3, padding=1))\n'
        '            rep.append(nn.BatchNorm2d(filters))\n'
        '        self.rep = nn.Sequential(*rep)\n'
        '\n'
        '    def forward(self, inp):\n'
        '        x = self.rep(inp)\n'
        '        skip = self.skip(inp)\n'
        '        return x + skip\n',
        fixed=(
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'class Block(nn.Module):\n'
        '    def __init__(self, cin, cout, reps, grow_first=True):\n'
        '        super().__init__()\n'
        '        self.skip = nn.Conv2d(cin, cout, 1)\n'
        '        self.relu = nn.ReLU()\n'
        '        rep = []\n'
        '        filters = cin\n'
        '        if grow_first:\n'
        '            rep.append(self.relu)\n'
        '            rep.append(nn.Conv2d(cin, cout, 3, padding=1))\n'
        '            rep.append(nn.BatchNorm2d(cout))\n'
        '            filters = cout\n'
        '        for i in range(reps - 1):\n'
        '            rep.append(self.relu)\n'
        '            rep.append(nn.Conv2d(filters, filters, 3, padding=1))\n'
        '            rep.append(nn.BatchNorm2d(filters))\n'
        '        self.rep = nn.Sequential(*rep)\n'
        '\n'
        '    def forward(self, inp):\n'
        '        x = self.rep(inp)\n'
        '        skip = self.skip(inp)\n'
        '        return x + skip\n'
        ),
        line=23,
    ),
    # Xception-style block with five `if`s/loops and `rep = rep[1:]`: without `rep[0] = ...` an in-place ReLU may be first and overwrite `inp`, which the shortcut reads
    Invalid(
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'class Block(nn.Module):\n'
        '    def __init__(self, cin, cout, reps, strides=1, start_with_relu=True, grow_first=True, dropout=False):\n'
        '        super().__init__()\n'
        '        self.skip = nn.Conv2d(cin, cout, 1, stride=strides, bias=False)\n'
        '        rep = []\n'
        '        filters = cin\n'
        '        if grow_first:\n'
        '            rep.append(nn.ReLU(inplace=True))\n'
        '            rep.append(nn.Conv2d(cin, cout, 3, padding=1, bias=False))\n'
        '            rep.append(nn.BatchNorm2d(cout))\n'
        '            filters = cout\n'
        '        for i in range(reps - 1):\n'
        '            rep.append(nn.ReLU(inplace=True))\n'
        '            rep.append(nn.Conv2d(filters, filters, 3, padding=1, bias=False))\n'
        '            rep.append(nn.BatchNorm2d(filters))\n'
        '        if not grow_first:\n'
        '            rep.append(nn.ReLU(inplace=True))\n'
        '            rep.append(nn.Conv2d(cin, cout, 3, padding=1, bias=False))\n'
        '            rep.append(nn.BatchNorm2d(cout))\n'
        '        if dropout:\n'
        '            rep.append(nn.Dropout2d(0.1))\n'
        '        if not start_with_relu:\n'
        '            rep = rep[1:]\n'
        '        if strides != 1:\n'
        '            rep.append(nn.MaxPool2d(3, strides, 1))\n'
        '        self.rep = nn.Sequential(*rep)\n'
        '\n'
        '    def forward(self, inp):\n'
        '        x = self.rep(inp)\n'
        '        skip = self.skip(inp)\n'
        '        return x + skip\n',
        fixed=(
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'class Block(nn.Module):\n'
        '    def __init__(self, cin, cout, reps, strides=1, start_with_relu=True, grow_first=True, dropout=False):\n'
        '        super().__init__()\n'
        '        self.skip = nn.Conv2d(cin, cout, 1, stride=strides, bias=False)\n'
        '        rep = []\n'
        '        filters = cin\n'
        '        if grow_first:\n'
        '            rep.append(nn.ReLU())\n'
        '            rep.append(nn.Conv2d(cin, cout, 3, padding=1, bias=False))\n'
        '            rep.append(nn.BatchNorm2d(cout))\n'
        '            filters = cout\n'
        '        for i in range(reps - 1):\n'
        '            rep.append(nn.ReLU())\n'
        '            rep.append(nn.Conv2d(filters, filters, 3, padding=1, bias=False))\n'
        '            rep.append(nn.BatchNorm2d(filters))\n'
        '        if not grow_first:\n'
        '            rep.append(nn.ReLU())\n'
        '            rep.append(nn.Conv2d(cin, cout, 3, padding=1, bias=False))\n'
        '            rep.append(nn.BatchNorm2d(cout))\n'
        '        if dropout:\n'
        '            rep.append(nn.Dropout2d(0.1))\n'
        '        if not start_with_relu:\n'
        '            rep = rep[1:]\n'
        '        if strides != 1:\n'
        '            rep.append(nn.MaxPool2d(3, strides, 1))\n'
        '        self.rep = nn.Sequential(*rep)\n'
        '\n'
        '    def forward(self, inp):\n'
        '        x = self.rep(inp)\n'
        '        skip = self.skip(inp)\n'
        '        return x + skip\n'
        ),
        line=32,
    ),
)
