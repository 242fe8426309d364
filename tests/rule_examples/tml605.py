"""Examples of TML605 (TrainingWithoutAutocast, off by default): VALID code gives no finding, INVALID code gives one."""

from torchmemlint.rules.base import Invalid

LOOP = (
    "import torch\n\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n"
    "    optimizer.step()\n    optimizer.zero_grad()\n"
)

VALID = (
    # autocast around the forward
    "import torch\n\nfor x, y in loader:\n    with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n"
    "        loss = criterion(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
    # a GradScaler (fp16)
    "import torch\n\nscaler = torch.cuda.amp.GradScaler()\nfor x, y in loader:\n"
    "    loss = criterion(model(x), y)\n    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n",
    # the model is cast to bf16
    "import torch\n\nmodel = model.to(torch.bfloat16)\n" + LOOP.replace("import torch\n\n", ""),
    # a precision argument (Lightning, accelerate) decides elsewhere
    "import torch\n\nrun(precision=cfg.precision)\n" + LOOP.replace("import torch\n\n", ""),
    # backward outside any loop (a single step, a test)
    "import torch\n\nloss = model(x).sum()\nloss.backward()\n",
)

INVALID = (
    Invalid(LOOP, line=5, column=5),
    # inside a function, nested epoch/batch loops: one finding for the one backward
    Invalid(
        "import torch\n\n\ndef train(model, loader, optimizer, epochs):\n    for epoch in range(epochs):\n"
        "        for batch in loader:\n            optimizer.zero_grad()\n"
        "            loss = model(**batch).loss\n            loss.backward()\n            optimizer.step()\n",
        line=9,
    ),
)
