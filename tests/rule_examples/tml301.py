"""Examples of TML301 (DroppedStemPool): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    # the pool is kept
    "import torch.nn as nn\nimport torchvision\n\n"
    "class UNet(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        enc = torchvision.models.resnet34()\n"
    "        self.stem = nn.Sequential(enc.conv1, enc.bn1, enc.relu, enc.maxpool)\n"
    "        self.enc1 = enc.layer1\n\n"
    "    def forward(self, x):\n"
    "        return self.enc1(self.stem(x))\n",
    # a pool of its own between stem and layer1
    "import torch.nn as nn\nimport torch.nn.functional as F\n\n"
    "class UNet(nn.Module):\n"
    "    def __init__(self, enc):\n"
    "        super().__init__()\n"
    "        self.stem = nn.Sequential(enc.conv1, enc.bn1, enc.relu)\n"
    "        self.enc1 = enc.layer1\n\n"
    "    def forward(self, x):\n"
    "        s = self.stem(x)\n"
    "        return self.enc1(F.max_pool2d(s, 2)), s\n",
    # the pool sits in front of layer1 in the next Sequential (smp-style stages)
    "import torch.nn as nn\n\n"
    "class Encoder(nn.Module):\n"
    "    def __init__(self, r):\n"
    "        super().__init__()\n"
    "        self.stages = nn.ModuleList([\n"
    "            nn.Sequential(r.conv1, r.bn1, r.relu),\n"
    "            nn.Sequential(r.maxpool, r.layer1),\n"
    "        ])\n",
    # a CIFAR-style ResNet designed without a stem pool
    "import torch.nn as nn\n\n"
    "class CifarResNet(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)\n"
    "        self.bn1 = nn.BatchNorm2d(16)\n"
    "        self.layer1 = make_stage(16)\n\n"
    "    def forward(self, x):\n"
    "        return self.layer1(self.bn1(self.conv1(x)))\n",
    # Identity for something that is not a ResNet
    "import torch.nn as nn\nmodel = build_vit()\nmodel.maxpool = nn.Identity()\n",
    # SENet stem rebuilt with its pool
    "import torch.nn as nn\nimport pretrainedmodels\n\n"
    "class UNet(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.encoder = pretrainedmodels.se_resnext50_32x4d()\n"
    "        e = self.encoder\n"
    "        self.conv1 = nn.Sequential(e.layer0.conv1, e.layer0.bn1, e.layer0.relu1, e.layer0.pool)\n"
    "        self.conv2 = e.layer1\n\n"
    "    def forward(self, x):\n"
    "        return self.conv2(self.conv1(x))\n",
    # the children up to and with the pool
    "import torch.nn as nn\nimport torchvision\n\n"
    "class Features(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        resnet = torchvision.models.resnet50()\n"
    "        self.stem = nn.Sequential(*list(resnet.children())[:4])\n"
    "        self.body = nn.Sequential(*list(resnet.children())[4:8])\n\n"
    "    def forward(self, x):\n"
    "        return self.body(self.stem(x))\n",
    # children of an object the file does not build: their order is not known
    "import torch.nn as nn\n\n"
    "class Features(nn.Module):\n"
    "    def __init__(self, backbone):\n"
    "        super().__init__()\n"
    "        self.net = nn.Sequential(*list(backbone.children())[:3], *list(backbone.children())[4:8])\n",
    # smp's SENet encoder: layer0.pool swapped out but kept and applied before layer1
    "import torch\nimport torch.nn as nn\n\n"
    "class SENetEncoder(SENet):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.layer0_pool = self.layer0.pool\n"
    "        self.layer0.pool = torch.nn.Identity()\n\n"
    "    def forward(self, x):\n"
    "        x = self.layer0(x)\n"
    "        x = self.layer0_pool(x)\n"
    "        return self.layer1(x)\n",
)

INVALID = (
    Invalid(
        "import torch\nimport torch.nn as nn\nimport torchvision\n\n"
        "class UNetResNet(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.encoder = torchvision.models.resnet101()\n"
        "        self.input_adjust = nn.Sequential(self.encoder.conv1, self.encoder.bn1, self.encoder.relu)\n"
        "        self.conv1 = self.encoder.layer1\n"
        "        self.conv2 = self.encoder.layer2\n\n"
        "    def forward(self, x):\n"
        "        input_adjust = self.input_adjust(x)\n"
        "        conv1 = self.conv1(input_adjust)\n"
        "        return self.conv2(conv1)\n",
        line=9,
        column=29,
    ),
    Invalid(
        "import torch.nn as nn\nimport torchvision.models as models\n\n"
        "model = models.resnet50()\n"
        "model.maxpool = nn.Identity()\n",
        line=5,
        column=17,
    ),
    Invalid(
        "import torch.nn as nn\n\n"
        "class Encoder(nn.Module):\n"
        "    def __init__(self, r):\n"
        "        super().__init__()\n"
        "        self.body = nn.Sequential(r.conv1, r.bn1, r.relu, r.layer1, r.layer2)\n",
    ),
    Invalid(
        "import timm\nimport torch.nn as nn\n\n"
        "enc = timm.create_model('resnet34', features_only=False)\n"
        "enc.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=1, padding=3, bias=False)\n",
    ),
    Invalid(
        "import torch.nn as nn\n\n"
        "class Features(nn.Module):\n"
        "    def __init__(self, backbone):\n"
        "        super().__init__()\n"
        "        self.backbone = backbone\n\n"
        "    def forward(self, x):\n"
        "        b = self.backbone\n"
        "        x = self.backbone.relu(self.backbone.bn1(self.backbone.conv1(x)))\n"
        "        return self.backbone.layer2(self.backbone.layer1(x))\n",
    ),
    # a SENet stem rebuilt from layer0's parts without layer0.pool
    Invalid(
        "import torch.nn as nn\nimport pretrainedmodels\n\n"
        "class UNet(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.encoder = pretrainedmodels.se_resnext50_32x4d()\n"
        "        e = self.encoder\n"
        "        self.conv1 = nn.Sequential(\n"
        "            self.encoder.layer0.conv1, self.encoder.layer0.bn1, self.encoder.layer0.relu1\n"
        "        )\n"
        "        self.conv2 = self.encoder.layer1\n\n"
        "    def forward(self, x):\n"
        "        c1 = self.conv1(x)\n"
        "        return self.conv2(c1)\n",
        line=9,
    ),
    # the first three children of a torchvision resnet, then layer1..layer4
    Invalid(
        "import torch.nn as nn\nimport torchvision\n\n"
        "class Features(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        resnet = torchvision.models.resnet50()\n"
        "        self.stem = nn.Sequential(*list(resnet.children())[:3])\n"
        "        self.body = nn.Sequential(*list(resnet.children())[4:8])\n\n"
        "    def forward(self, x):\n"
        "        return self.body(self.stem(x))\n",
        line=8,
    ),
    # kornia DeFMO: a ResNet class of the file taken apart, its stem conv swapped, put back
    Invalid(
        "import torch.nn as nn\n\n"
        "class ResNet(nn.Module):\n"
        "    def __init__(self, block, layers):\n"
        "        super().__init__()\n"
        "        self.inplanes = 64\n"
        "        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)\n"
        "        self.bn1 = nn.BatchNorm2d(64)\n"
        "        self.relu = nn.ReLU(inplace=True)\n"
        "        self.maxpool = nn.MaxPool2d(3, 2, 1)\n"
        "        self.layer1 = self._make_layer(block, 64, layers[0])\n"
        "        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)\n\n"
        "    def forward(self, x):\n"
        "        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))\n"
        "        return self.layer2(self.layer1(x))\n\n"
        "class Encoder(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        model = ResNet(Bottleneck, [3, 4, 6, 3])\n"
        "        modelc1 = nn.Sequential(*list(model.children())[:3])\n"
        "        modelc2 = nn.Sequential(*list(model.children())[4:8])\n"
        "        modelc1[0] = nn.Conv2d(6, 64, kernel_size=7, stride=2, padding=3, bias=False)\n"
        "        self.net = nn.Sequential(modelc1, modelc2)\n\n"
        "    def forward(self, x):\n"
        "        return self.net(x)\n",
        line=25,
    ),
)
