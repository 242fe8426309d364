"""Examples of TML201 (MissingInplaceSavesMemory): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    # a factory placed only after a layer that keeps its output (a sigmoid), and one never placed
    "import torch.nn as nn\n\n"
    "def leaky(slope=0.1):\n"
    "    return nn.LeakyReLU(slope)\n\n"
    "def spare():\n"
    "    return nn.LeakyReLU(0.2)\n\n"
    "class Gate(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.gate = nn.Sequential(nn.Linear(8, 8), nn.Sigmoid(), leaky())\n\n"
    "    def forward(self, x):\n"
    "        return self.gate(x)\n",
    # already in place
    "import torch.nn as nn\n"
    "block = nn.Sequential(nn.Conv2d(3, 8, 3), nn.LeakyReLU(0.1, inplace=True))\n",
    # ReLU saves nothing by going in place (TML202, off by default)
    "import torch.nn as nn\nblock = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())\n",
    # the input is used again: in place would corrupt the residual
    "import torch.nn as nn\nimport torch.nn.functional as F\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.conv = nn.Conv2d(8, 8, 3, padding=1)\n\n"
    "    def forward(self, x):\n"
    "        y = self.conv(x)\n"
    "        z = F.elu(y)\n"
    "        return z + y\n",
    # sigmoid keeps its output: in place after it would raise in backward
    "import torch\nimport torch.nn.functional as F\n\n"
    "def gate(x):\n"
    "    return F.leaky_relu(torch.sigmoid(x))\n",
    # a custom block before: what it keeps is unknown
    "import torch.nn as nn\nblock = nn.Sequential(MyBlock(), nn.LeakyReLU())\n",
    # a look-alike class
    "import torch\nclass LeakyReLU:\n    pass\nblock = [torch.nn.Conv2d(3, 8, 3), LeakyReLU()]\n",
    # the attribute is called on forward's own argument
    "import torch.nn as nn\n\n"
    "class Head(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.act = nn.LeakyReLU()\n\n"
    "    def forward(self, x):\n"
    "        return self.act(x)\n",
    # a list built in a loop: the order of its layers is not certain, stays quiet
    "import torch.nn as nn\n\n"
    "def make(n):\n"
    "    layers = []\n"
    "    for _ in range(n):\n"
    "        layers.append(nn.Conv2d(8, 8, 3))\n"
    "    layers.append(nn.LeakyReLU(0.2))\n"
    "    return nn.Sequential(*layers)\n",
    # a list that follows a custom block: what it keeps is unknown
    "import torch.nn as nn\n\n"
    "def make():\n"
    "    layers = [MyBlock()]\n"
    "    layers += [nn.LeakyReLU(0.2)]\n"
    "    return nn.Sequential(*layers)\n",
    # a list passed in from outside: its contents are not known here
    "import torch.nn as nn\n\n"
    "def make(layers):\n"
    "    layers.append(nn.LeakyReLU(0.2))\n"
    "    return nn.Sequential(*layers)\n",
    # a helper defined twice (which one runs is not certain)
    "import torch.nn as nn\n\n"
    "def layers():\n"
    "    return [nn.Conv2d(3, 8, 3), nn.LeakyReLU(0.2)]\n\n"
    "def layers():\n"
    "    return [MyBlock(), nn.LeakyReLU(0.2)]\n\n"
    "net = nn.Sequential(*layers())\n",
    # spliced list already in place
    "import torch.nn as nn\n\n"
    "def make():\n"
    "    layers = [nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.2, inplace=True)]\n"
    "    return nn.Sequential(*layers)\n",
    # factories: a parameter whose calls in the file pass another layer (GELU has no inplace)
    "import torch.nn as nn\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, c, act_layer=nn.LeakyReLU):\n"
    "        super().__init__()\n"
    "        self.block = nn.Sequential(nn.Conv2d(c, c, 3), nn.BatchNorm2d(c), act_layer())\n\n"
    "blocks = [Block(8), Block(8, act_layer=nn.GELU)]\n",
    # a factory parameter rebound through a project helper: what it builds is not known
    "import torch.nn as nn\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, c, act_layer=nn.LeakyReLU):\n"
    "        super().__init__()\n"
    "        act_layer = get_act_layer(act_layer)\n"
    "        self.block = nn.Sequential(nn.Conv2d(c, c, 3), act_layer())\n",
    # a factory parameter without a layer default, never called with one
    "import torch.nn as nn\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, c, act_layer=None):\n"
    "        super().__init__()\n"
    "        self.block = nn.Sequential(nn.Conv2d(c, c, 3), act_layer())\n",
    # a partial of something that is not a torch layer
    "import torch.nn as nn\nfrom functools import partial\n"
    "Act = partial(MyLeakyReLU, 0.1)\n"
    "block = nn.Sequential(nn.Conv2d(3, 8, 3), Act())\n",
    # a partial that already runs in place
    "import torch.nn as nn\nfrom functools import partial\n"
    "block = nn.Sequential(nn.Conv2d(3, 8, 3), partial(nn.LeakyReLU, 0.1, inplace=True)())\n",
    # a subclass may pass another act_layer through super().__init__: not followed
    "import torch.nn as nn\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, c, act_layer=nn.LeakyReLU):\n"
    "        super().__init__()\n"
    "        self.block = nn.Sequential(nn.Conv2d(c, c, 3), act_layer())\n\n"
    "class GeluBlock(Block):\n"
    "    def __init__(self, c):\n"
    "        super().__init__(c, act_layer=nn.GELU)\n",
    # the factory's input is the residual, read again
    "import torch.nn as nn\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, c, act_layer=nn.LeakyReLU):\n"
    "        super().__init__()\n"
    "        self.conv = nn.Conv2d(c, c, 3, padding=1)\n"
    "        self.act = act_layer()\n\n"
    "    def forward(self, x):\n"
    "        y = self.conv(x)\n"
    "        return self.act(y) + y\n",
    # a branch may put a custom block right before the activation
    "import torch.nn as nn\n\n"
    "def make(custom):\n"
    "    layers = [nn.Conv2d(3, 8, 3)]\n"
    "    if custom:\n"
    "        layers.append(MyBlock())\n"
    "    layers.append(nn.LeakyReLU(0.2))\n"
    "    return nn.Sequential(*layers)\n",
    # the list is handed to other code before the splice
    "import torch.nn as nn\n\n"
    "def make():\n"
    "    layers = [nn.Conv2d(3, 8, 3)]\n"
    "    register(layers)\n"
    "    layers.append(nn.LeakyReLU(0.2))\n"
    "    return nn.Sequential(*layers)\n",
    # a loop that may stop early (`break`): not followed
    "import torch.nn as nn\n\n"
    "def make(cfg):\n"
    "    layers = []\n"
    "    for v in cfg:\n"
    "        if v is None:\n"
    "            break\n"
    "        layers += [nn.Conv2d(8, 8, 3), nn.LeakyReLU(0.2)]\n"
    "    return nn.Sequential(*layers)\n",
    # a helper that may return the activation alone, spliced first
    "import torch.nn as nn\n\n"
    "def tail(c, bn):\n"
    "    act = nn.LeakyReLU(0.1)\n"
    "    if bn:\n"
    "        return [nn.BatchNorm2d(c), act]\n"
    "    return [act]\n\n"
    "net = nn.Sequential(*tail(8, False))\n",
    # five `*block()` splices of a helper with an `if`, already in place
    'import torch.nn as nn\n'
    '\n'
    '\n'
    'def block(cin, cout, normalize=True):\n'
    '    layers = [nn.Linear(cin, cout)]\n'
    '    if normalize:\n'
    '        layers.append(nn.BatchNorm1d(cout, 0.8))\n'
    '    layers.append(nn.LeakyReLU(0.2, inplace=True))\n'
    '    return layers\n'
    '\n'
    '\n'
    'class Generator(nn.Module):\n'
    '    def __init__(self, latent, out):\n'
    '        super().__init__()\n'
    '        self.model = nn.Sequential(\n'
    '            *block(latent, 128, normalize=False),\n'
    '            *block(128, 256),\n'
    '            *block(256, 512),\n'
    '            *block(512, 1024),\n'
    '            *block(1024, 2048),\n'
    '            nn.Linear(2048, out),\n'
    '            nn.Tanh(),\n'
    '        )\n'
    '\n'
    '    def forward(self, z):\n'
    '        return self.model(z)\n',
    # the same, but in one of its 2**5 orders the LeakyReLU follows a custom layer: what that keeps is unknown
    'import torch.nn as nn\n'
    '\n'
    '\n'
    'def block(cin, cout, normalize=True):\n'
    '    layers = [nn.Linear(cin, cout)]\n'
    '    if normalize:\n'
    '        layers.append(MinibatchStd())\n'
    '    layers.append(nn.LeakyReLU(0.2))\n'
    '    return layers\n'
    '\n'
    '\n'
    'class Generator(nn.Module):\n'
    '    def __init__(self, latent, out):\n'
    '        super().__init__()\n'
    '        self.model = nn.Sequential(\n'
    '            *block(latent, 128, normalize=False),\n'
    '            *block(128, 256),\n'
    '            *block(256, 512),\n'
    '            *block(512, 1024),\n'
    '            *block(1024, 2048),\n'
    '            nn.Linear(2048, out),\n'
    '            nn.Tanh(),\n'
    '        )\n'
    '\n'
    '    def forward(self, z):\n'
    '        return self.model(z)\n',
    # a helper's list extended in a loop whose `if` may put a custom layer before the ELU
    'import torch.nn as nn\n'
    '\n'
    '\n'
    'def stem(cin, cout, norm=True):\n'
    '    layers = [nn.Conv2d(cin, cout, 3, padding=1)]\n'
    '    if norm:\n'
    '        layers.append(nn.BatchNorm2d(cout))\n'
    '    return layers\n'
    '\n'
    '\n'
    'class Discriminator(nn.Module):\n'
    '    def __init__(self, channels, spectral=False):\n'
    '        super().__init__()\n'
    '        layers = stem(3, channels[0], norm=False)\n'
    '        for i, (cin, cout) in enumerate(zip(channels, channels[1:])):\n'
    '            layers.append(nn.Conv2d(cin, cout, 4, 2, 1))\n'
    '            if i > 0:\n'
    '                layers.append(nn.BatchNorm2d(cout))\n'
    '            if spectral:\n'
    '                layers.append(SpectralGate(cout))\n'
    '            layers.append(nn.ELU())\n'
    '        self.net = nn.Sequential(*layers)\n'
    '\n'
    '    def forward(self, x):\n'
    '        return self.net(x)\n',
    # the same join, but on the way without BatchNorm the convolution's output is also kept in a list
    'import torch.nn as nn\n'
    '\n'
    '\n'
    'class DownSampleConv(nn.Module):\n'
    '    def __init__(self, cin, cout, activation=True, batchnorm=True):\n'
    '        super().__init__()\n'
    '        self.activation = activation\n'
    '        self.batchnorm = batchnorm\n'
    '        self.conv = nn.Conv2d(cin, cout, 4, 2, 1)\n'
    '        if batchnorm:\n'
    '            self.bn = nn.BatchNorm2d(cout)\n'
    '        if activation:\n'
    '            self.act = nn.LeakyReLU(0.2)\n'
    '\n'
    '    def forward(self, x):\n'
    '        feats = []\n'
    '        x = self.conv(x)\n'
    '        if self.batchnorm:\n'
    '            x = self.bn(x)\n'
    '        else:\n'
    '            feats.append(x)\n'
    '        if self.activation:\n'
    '            x = self.act(x)\n'
    '        return x, feats\n',
)


INVALID = (
    Invalid(
        "import torch.nn as nn\n"
        "block = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.1))\n",
        fixed="import torch.nn as nn\n"
        "block = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.1, inplace=True))\n",
        line=2,
        column=62,
    ),
    Invalid(
        "from torch.nn import LeakyReLU as Act, Conv2d, Module\n\n"
        "class Block(Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = Conv2d(8, 8, 3)\n"
        "        self.act = Act()\n\n"
        "    def forward(self, x):\n"
        "        x = self.conv(x)\n"
        "        x = self.act(x)\n"
        "        return x\n",
        fixed="from torch.nn import LeakyReLU as Act, Conv2d, Module\n\n"
        "class Block(Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = Conv2d(8, 8, 3)\n"
        "        self.act = Act(inplace=True)\n\n"
        "    def forward(self, x):\n"
        "        x = self.conv(x)\n"
        "        x = self.act(x)\n"
        "        return x\n",
        line=7,
    ),
    Invalid(
        "import torch\nimport torch.nn.functional as F\n\n"
        "def decode(a, b, conv):\n"
        "    y = torch.cat([a, b], 1)\n"
        "    return conv(F.elu(y, alpha=0.5))\n",
        fixed="import torch\nimport torch.nn.functional as F\n\n"
        "def decode(a, b, conv):\n"
        "    y = torch.cat([a, b], 1)\n"
        "    return conv(F.elu(y, alpha=0.5, inplace=True))\n",
    ),
    # a factory's layer: reported where the factory's call places it (twice here), the edit in
    # the factory, applied once
    Invalid(
        "import torch.nn as nn\n\n"
        "def leaky(slope=0.1):\n"
        "    return nn.LeakyReLU(slope)\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.net = nn.Sequential(nn.Conv2d(3, 8, 3), leaky(), nn.Conv2d(8, 8, 3), leaky(0.2))\n\n"
        "    def forward(self, x):\n"
        "        return self.net(x)\n",
        fixed="import torch.nn as nn\n\n"
        "def leaky(slope=0.1):\n"
        "    return nn.LeakyReLU(slope, inplace=True)\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.net = nn.Sequential(nn.Conv2d(3, 8, 3), leaky(), nn.Conv2d(8, 8, 3), leaky(0.2))\n\n"
        "    def forward(self, x):\n"
        "        return self.net(x)\n",
        line=9,
        column=54,
    ),
    Invalid(
        "import torch.nn as nn\nhead = nn.Sequential(nn.Linear(8, 8), nn.SELU(inplace=False))\n",
        fixed="import torch.nn as nn\nhead = nn.Sequential(nn.Linear(8, 8), nn.SELU(inplace=True))\n",
    ),
    # layers collected in a list, then spliced
    Invalid(
        "import torch.nn as nn\n\n"
        "class Down(nn.Module):\n"
        "    def __init__(self, cin, cout):\n"
        "        super().__init__()\n"
        "        layers = [nn.Conv2d(cin, cout, 4, 2, 1), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2)]\n"
        "        self.model = nn.Sequential(*layers)\n\n"
        "    def forward(self, x):\n"
        "        return self.model(x)\n",
        fixed="import torch.nn as nn\n\n"
        "class Down(nn.Module):\n"
        "    def __init__(self, cin, cout):\n"
        "        super().__init__()\n"
        "        layers = [nn.Conv2d(cin, cout, 4, 2, 1), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2, inplace=True)]\n"
        "        self.model = nn.Sequential(*layers)\n\n"
        "    def forward(self, x):\n"
        "        return self.model(x)\n",
        line=6,
        column=72,
    ),
    # `layers.append(...)` and `layers += [...]`
    Invalid(
        "import torch.nn as nn\n\n"
        "def block(cin, cout, normalize=True):\n"
        "    layers = [nn.Conv2d(cin, cout, 3)]\n"
        "    layers += [nn.BatchNorm2d(cout)]\n"
        "    layers.append(nn.LeakyReLU(0.2))\n"
        "    return nn.Sequential(*layers)\n",
        fixed="import torch.nn as nn\n\n"
        "def block(cin, cout, normalize=True):\n"
        "    layers = [nn.Conv2d(cin, cout, 3)]\n"
        "    layers += [nn.BatchNorm2d(cout)]\n"
        "    layers.append(nn.LeakyReLU(0.2, inplace=True))\n"
        "    return nn.Sequential(*layers)\n",
        line=6,
    ),
    # a helper method returns the list (`layers.extend`), spliced in __init__
    Invalid(
        "import torch.nn as nn\n\n"
        "class Encoder(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.enc = nn.Sequential(*self.make_enc_modules(3, 16))\n\n"
        "    def make_enc_modules(self, cin, cout):\n"
        "        modules = []\n"
        "        modules.extend([nn.Conv2d(cin, cout, 3), nn.BatchNorm2d(cout), nn.ELU()])\n"
        "        return modules\n\n"
        "    def forward(self, x):\n"
        "        return self.enc(x)\n",
        fixed="import torch.nn as nn\n\n"
        "class Encoder(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.enc = nn.Sequential(*self.make_enc_modules(3, 16))\n\n"
        "    def make_enc_modules(self, cin, cout):\n"
        "        modules = []\n"
        "        modules.extend([nn.Conv2d(cin, cout, 3), nn.BatchNorm2d(cout), nn.ELU(inplace=True)])\n"
        "        return modules\n\n"
        "    def forward(self, x):\n"
        "        return self.enc(x)\n",
        line=10,
    ),
    # a list spliced into two Sequentials is reported once
    Invalid(
        "import torch.nn as nn\n\n"
        "def stem():\n"
        "    return [nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.1)]\n\n"
        "a = nn.Sequential(*stem())\n"
        "b = nn.Sequential(*stem(), nn.Conv2d(8, 8, 3))\n",
        fixed="import torch.nn as nn\n\n"
        "def stem():\n"
        "    return [nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.1, inplace=True)]\n\n"
        "a = nn.Sequential(*stem())\n"
        "b = nn.Sequential(*stem(), nn.Conv2d(8, 8, 3))\n",
    ),
    # `act_layer=nn.LeakyReLU` default, never called in the file: the default is taken, the
    # fix is unsafe (a caller elsewhere may pass a layer without `inplace`)
    Invalid(
        "import torch.nn as nn\n\n"
        "class ConvBlock(nn.Module):\n"
        "    def __init__(self, cin, cout, act_layer=nn.LeakyReLU):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(cin, cout, 3)\n"
        "        self.bn = nn.BatchNorm2d(cout)\n"
        "        self.act = act_layer()\n\n"
        "    def forward(self, x):\n"
        "        return self.act(self.bn(self.conv(x)))\n",
        fixed="import torch.nn as nn\n\n"
        "class ConvBlock(nn.Module):\n"
        "    def __init__(self, cin, cout, act_layer=nn.LeakyReLU):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(cin, cout, 3)\n"
        "        self.bn = nn.BatchNorm2d(cout)\n"
        "        self.act = act_layer(inplace=True)\n\n"
        "    def forward(self, x):\n"
        "        return self.act(self.bn(self.conv(x)))\n",
        line=8,
    ),
    # the caller class passes its own act_layer down; every call agrees
    Invalid(
        "import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, c, act_layer=nn.ELU):\n"
        "        super().__init__()\n"
        "        self.block = nn.Sequential(nn.Conv2d(c, c, 3), nn.BatchNorm2d(c), act_layer())\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, act_layer=nn.ELU):\n"
        "        super().__init__()\n"
        "        self.a = Block(8, act_layer=act_layer)\n"
        "        self.b = Block(8)\n",
        fixed="import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, c, act_layer=nn.ELU):\n"
        "        super().__init__()\n"
        "        self.block = nn.Sequential(nn.Conv2d(c, c, 3), nn.BatchNorm2d(c), act_layer(inplace=True))\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self, act_layer=nn.ELU):\n"
        "        super().__init__()\n"
        "        self.a = Block(8, act_layer=act_layer)\n"
        "        self.b = Block(8)\n",
        line=6,
    ),
    # `partial(nn.LeakyReLU, 0.1)()` written in place: safe fix
    Invalid(
        "import torch.nn as nn\nfrom functools import partial\n"
        "block = nn.Sequential(nn.Conv2d(3, 8, 3), partial(nn.LeakyReLU, 0.1)())\n",
        fixed="import torch.nn as nn\nfrom functools import partial\n"
        "block = nn.Sequential(nn.Conv2d(3, 8, 3), partial(nn.LeakyReLU, 0.1)(inplace=True))\n",
    ),
    # a module-level `functools.partial` alias, called in a helper that returns the list
    Invalid(
        "import functools\nimport torch.nn as nn\n\n"
        "Act = functools.partial(nn.LeakyReLU, negative_slope=0.2, inplace=False)\n\n"
        "def make_enc_modules(cin, cout):\n"
        "    return [nn.Conv2d(cin, cout, 3), nn.BatchNorm2d(cout), Act()]\n\n"
        "enc = nn.Sequential(*make_enc_modules(3, 8))\n",
        fixed="import functools\nimport torch.nn as nn\n\n"
        "Act = functools.partial(nn.LeakyReLU, negative_slope=0.2, inplace=False)\n\n"
        "def make_enc_modules(cin, cout):\n"
        "    return [nn.Conv2d(cin, cout, 3), nn.BatchNorm2d(cout), Act(inplace=True)]\n\n"
        "enc = nn.Sequential(*make_enc_modules(3, 8))\n",
    ),
    # a local factory name in a function: `act(0.2)` with `act=nn.LeakyReLU`
    Invalid(
        "import torch.nn as nn\n\n"
        "def block(c, act=nn.LeakyReLU):\n"
        "    return nn.Sequential(nn.Conv2d(c, c, 3), act(0.2))\n",
        fixed="import torch.nn as nn\n\n"
        "def block(c, act=nn.LeakyReLU):\n"
        "    return nn.Sequential(nn.Conv2d(c, c, 3), act(0.2, inplace=True))\n",
    ),
    # torchdistill's Paraphraser: a classmethod splices a staticmethod that returns one of two
    # lists sharing one local LeakyReLU; the helper is spliced twice
    Invalid(
        "import torch.nn as nn\n\n"
        "class Paraphraser(nn.Module):\n"
        "    @staticmethod\n"
        "    def make_tail_modules(c, uses_bn):\n"
        "        leaky_relu = nn.LeakyReLU(0.1)\n"
        "        if uses_bn:\n"
        "            return [nn.BatchNorm2d(c), leaky_relu]\n"
        "        return [leaky_relu]\n\n"
        "    @classmethod\n"
        "    def make_enc_modules(cls, cin, cout, uses_bn):\n"
        "        return [nn.Conv2d(cin, cout, 3, padding=1), *cls.make_tail_modules(cout, uses_bn)]\n\n"
        "    def __init__(self, c, uses_bn=True):\n"
        "        super().__init__()\n"
        "        self.encoder = nn.Sequential(\n"
        "            *self.make_enc_modules(c, c, uses_bn), *self.make_enc_modules(c, c, uses_bn)\n"
        "        )\n",
        fixed="import torch.nn as nn\n\n"
        "class Paraphraser(nn.Module):\n"
        "    @staticmethod\n"
        "    def make_tail_modules(c, uses_bn):\n"
        "        leaky_relu = nn.LeakyReLU(0.1, inplace=True)\n"
        "        if uses_bn:\n"
        "            return [nn.BatchNorm2d(c), leaky_relu]\n"
        "        return [leaky_relu]\n\n"
        "    @classmethod\n"
        "    def make_enc_modules(cls, cin, cout, uses_bn):\n"
        "        return [nn.Conv2d(cin, cout, 3, padding=1), *cls.make_tail_modules(cout, uses_bn)]\n\n"
        "    def __init__(self, c, uses_bn=True):\n"
        "        super().__init__()\n"
        "        self.encoder = nn.Sequential(\n"
        "            *self.make_enc_modules(c, c, uses_bn), *self.make_enc_modules(c, c, uses_bn)\n"
        "        )\n",
        line=6,
    ),
    # VGG-style: layers added in a loop, in both branches of an if
    Invalid(
        "import torch.nn as nn\n\n"
        "def make_layers(cfg, batch_norm=True):\n"
        "    layers = []\n"
        "    cin = 3\n"
        "    for v in cfg:\n"
        "        if v == 'M':\n"
        "            layers += [nn.MaxPool2d(2)]\n"
        "        else:\n"
        "            conv = nn.Conv2d(cin, v, 3, padding=1)\n"
        "            if batch_norm:\n"
        "                layers += [conv, nn.BatchNorm2d(v), nn.ELU()]\n"
        "            else:\n"
        "                layers += [conv, nn.ELU()]\n"
        "            cin = v\n"
        "    return nn.Sequential(*layers)\n",
        fixed="import torch.nn as nn\n\n"
        "def make_layers(cfg, batch_norm=True):\n"
        "    layers = []\n"
        "    cin = 3\n"
        "    for v in cfg:\n"
        "        if v == 'M':\n"
        "            layers += [nn.MaxPool2d(2)]\n"
        "        else:\n"
        "            conv = nn.Conv2d(cin, v, 3, padding=1)\n"
        "            if batch_norm:\n"
        "                layers += [conv, nn.BatchNorm2d(v), nn.ELU(inplace=True)]\n"
        "            else:\n"
        "                layers += [conv, nn.ELU(inplace=True)]\n"
        "            cin = v\n"
        "    return nn.Sequential(*layers)\n",
        line=12,
    ),
    # pix2pix discriminator block: an optional norm, then the activation, then `.extend`
    Invalid(
        "import torch.nn as nn\n\n"
        "def block(cin, cout, normalize=True):\n"
        "    layers = [nn.Conv2d(cin, cout, 4, 2, 1)]\n"
        "    if normalize:\n"
        "        layers.append(nn.InstanceNorm2d(cout))\n"
        "    layers.append(nn.LeakyReLU(0.2))\n"
        "    layers.extend([nn.Conv2d(cout, cout, 3)])\n"
        "    return nn.Sequential(*layers)\n",
        fixed="import torch.nn as nn\n\n"
        "def block(cin, cout, normalize=True):\n"
        "    layers = [nn.Conv2d(cin, cout, 4, 2, 1)]\n"
        "    if normalize:\n"
        "        layers.append(nn.InstanceNorm2d(cout))\n"
        "    layers.append(nn.LeakyReLU(0.2, inplace=True))\n"
        "    layers.extend([nn.Conv2d(cout, cout, 3)])\n"
        "    return nn.Sequential(*layers)\n",
    ),
    # five `*block()` splices of a helper with an `if` (32 orders): every layer that may precede the LeakyReLU is a Linear or a BatchNorm
    Invalid(
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'def block(cin, cout, normalize=True):\n'
        '    layers = [nn.Linear(cin, cout)]\n'
        '    if normalize:\n'
        '        layers.append(nn.BatchNorm1d(cout, 0.8))\n'
        '    layers.append(nn.LeakyReLU(0.2))\n'
        '    return layers\n'
        '\n'
        '\n'
        'class Generator(nn.Module):\n'
        '    def __init__(self, latent, out):\n'
        '        super().__init__()\n'
        '        self.model = nn.Sequential(\n'
        '            *block(latent, 128, normalize=False),\n'
        '            *block(128, 256),\n'
        '            *block(256, 512),\n'
        '            *block(512, 1024),\n'
        '            *block(1024, 2048),\n'
        '            nn.Linear(2048, out),\n'
        '            nn.Tanh(),\n'
        '        )\n'
        '\n'
        '    def forward(self, z):\n'
        '        return self.model(z)\n',
        fixed=(
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'def block(cin, cout, normalize=True):\n'
        '    layers = [nn.Linear(cin, cout)]\n'
        '    if normalize:\n'
        '        layers.append(nn.BatchNorm1d(cout, 0.8))\n'
        '    layers.append(nn.LeakyReLU(0.2, inplace=True))\n'
        '    return layers\n'
        '\n'
        '\n'
        'class Generator(nn.Module):\n'
        '    def __init__(self, latent, out):\n'
        '        super().__init__()\n'
        '        self.model = nn.Sequential(\n'
        '            *block(latent, 128, normalize=False),\n'
        '            *block(128, 256),\n'
        '            *block(256, 512),\n'
        '            *block(512, 1024),\n'
        '            *block(1024, 2048),\n'
        '            nn.Linear(2048, out),\n'
        '            nn.Tanh(),\n'
        '        )\n'
        '\n'
        '    def forward(self, z):\n'
        '        return self.model(z)\n'
        ),
        line=8,
    ),
    # a list built by a helper, bound, then extended in a loop with two `if`s
    Invalid(
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'def stem(cin, cout, norm=True):\n'
        '    layers = [nn.Conv2d(cin, cout, 3, padding=1)]\n'
        '    if norm:\n'
        '        layers.append(nn.BatchNorm2d(cout))\n'
        '    return layers\n'
        '\n'
        '\n'
        'class Discriminator(nn.Module):\n'
        '    def __init__(self, channels, spectral=False):\n'
        '        super().__init__()\n'
        '        layers = stem(3, channels[0], norm=False)\n'
        '        for i, (cin, cout) in enumerate(zip(channels, channels[1:])):\n'
        '            layers.append(nn.Conv2d(cin, cout, 4, 2, 1))\n'
        '            if i > 0:\n'
        '                layers.append(nn.BatchNorm2d(cout))\n'
        '            if spectral:\n'
        '                layers.append(nn.InstanceNorm2d(cout))\n'
        '            layers.append(nn.ELU())\n'
        '        self.net = nn.Sequential(*layers)\n'
        '\n'
        '    def forward(self, x):\n'
        '        return self.net(x)\n',
        fixed=(
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'def stem(cin, cout, norm=True):\n'
        '    layers = [nn.Conv2d(cin, cout, 3, padding=1)]\n'
        '    if norm:\n'
        '        layers.append(nn.BatchNorm2d(cout))\n'
        '    return layers\n'
        '\n'
        '\n'
        'class Discriminator(nn.Module):\n'
        '    def __init__(self, channels, spectral=False):\n'
        '        super().__init__()\n'
        '        layers = stem(3, channels[0], norm=False)\n'
        '        for i, (cin, cout) in enumerate(zip(channels, channels[1:])):\n'
        '            layers.append(nn.Conv2d(cin, cout, 4, 2, 1))\n'
        '            if i > 0:\n'
        '                layers.append(nn.BatchNorm2d(cout))\n'
        '            if spectral:\n'
        '                layers.append(nn.InstanceNorm2d(cout))\n'
        '            layers.append(nn.ELU(inplace=True))\n'
        '        self.net = nn.Sequential(*layers)\n'
        '\n'
        '    def forward(self, x):\n'
        '        return self.net(x)\n'
        ),
        line=21,
    ),
    # branches join before the activation (`x = self.conv(x)`; `if self.batchnorm: x = self.bn(x)`): each value reaches it unread
    Invalid(
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'class DownSampleConv(nn.Module):\n'
        '    def __init__(self, cin, cout, activation=True, batchnorm=True):\n'
        '        super().__init__()\n'
        '        self.activation = activation\n'
        '        self.batchnorm = batchnorm\n'
        '        self.conv = nn.Conv2d(cin, cout, 4, 2, 1)\n'
        '        if batchnorm:\n'
        '            self.bn = nn.BatchNorm2d(cout)\n'
        '        if activation:\n'
        '            self.act = nn.LeakyReLU(0.2)\n'
        '\n'
        '    def forward(self, x):\n'
        '        x = self.conv(x)\n'
        '        if self.batchnorm:\n'
        '            x = self.bn(x)\n'
        '        if self.activation:\n'
        '            x = self.act(x)\n'
        '        return x\n',
        fixed=(
        'import torch.nn as nn\n'
        '\n'
        '\n'
        'class DownSampleConv(nn.Module):\n'
        '    def __init__(self, cin, cout, activation=True, batchnorm=True):\n'
        '        super().__init__()\n'
        '        self.activation = activation\n'
        '        self.batchnorm = batchnorm\n'
        '        self.conv = nn.Conv2d(cin, cout, 4, 2, 1)\n'
        '        if batchnorm:\n'
        '            self.bn = nn.BatchNorm2d(cout)\n'
        '        if activation:\n'
        '            self.act = nn.LeakyReLU(0.2, inplace=True)\n'
        '\n'
        '    def forward(self, x):\n'
        '        x = self.conv(x)\n'
        '        if self.batchnorm:\n'
        '            x = self.bn(x)\n'
        '        if self.activation:\n'
        '            x = self.act(x)\n'
        '        return x\n'
        ),
        line=13,
    ),
)
