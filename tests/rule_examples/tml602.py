"""Examples of TML602 (EagerAttnImplementation): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid

TRAIN = "trainer = Trainer(model=model, args=args)\ntrainer.train()\n"

VALID = (
    # inference only: nothing in the file trains
    'import torch\nfrom transformers import AutoModel\n\nmodel = AutoModel.from_pretrained("bert-base-uncased", attn_implementation="eager")\n'
    "outputs = model(**inputs)\n",
    # the weights are asked for: SDPA cannot return them
    'from transformers import AutoModel, Trainer\n\nmodel = AutoModel.from_pretrained("gpt2", attn_implementation="eager", output_attentions=True)\n'
    + TRAIN,
    # other implementations, and a value the file does not spell out
    'from transformers import AutoModel, Trainer\n\nmodel = AutoModel.from_pretrained("gpt2", attn_implementation="sdpa")\n'
    'other = AutoModel.from_pretrained("gpt2", attn_implementation="flash_attention_2")\n'
    "third = AutoModel.from_pretrained(\"gpt2\", attn_implementation=args.attn)\n" + TRAIN,
    # a look-alike attribute and a comparison
    "import torch\n\nfor x in loader:\n    loss = model(x).mean()\n    loss.backward()\n"
    '    if config._attn_implementation == "eager":\n        print("eager")\n'
    '    model.attention_type = "eager"\n',
    # no torch named, nothing trains: an inference script
    'from transformers import pipeline, AutoModel\n\nmodel = AutoModel.from_pretrained("gpt2", attn_implementation="eager")\n'
    "pipe = pipeline(\"text-generation\", model=model)\n",
    # `.step()` of something that is not an optimizer, no backward
    'import torch\nfrom transformers import AutoModel\n\nmodel = AutoModel.from_pretrained("gpt2", attn_implementation="eager")\n'
    "scheduler.step()\nenv.step(action)\n",
)

INVALID = (
    # from_pretrained in a Trainer script; the quote style is kept
    Invalid(
        "import torch\nfrom transformers import AutoModelForCausalLM, Trainer\n\n"
        "model = AutoModelForCausalLM.from_pretrained(name, attn_implementation='eager')\n" + TRAIN,
        fixed="import torch\nfrom transformers import AutoModelForCausalLM, Trainer\n\n"
        "model = AutoModelForCausalLM.from_pretrained(name, attn_implementation='sdpa')\n" + TRAIN,
        line=4,
        column=72,
    ),
    # the config attribute, in a plain loop with backward
    Invalid(
        "import torch\nfrom transformers import AutoConfig, AutoModel\n\n"
        'config = AutoConfig.from_pretrained("bert-base-uncased")\nconfig._attn_implementation = "eager"\n'
        "model = AutoModel.from_config(config)\nfor batch in loader:\n    loss = model(**batch).loss\n"
        "    loss.backward()\n    optimizer.step()\n",
        fixed="import torch\nfrom transformers import AutoConfig, AutoModel\n\n"
        'config = AutoConfig.from_pretrained("bert-base-uncased")\nconfig._attn_implementation = "sdpa"\n'
        "model = AutoModel.from_config(config)\nfor batch in loader:\n    loss = model(**batch).loss\n"
        "    loss.backward()\n    optimizer.step()\n",
        line=5,
    ),
    # a kwargs dict and dict(...) for a Lightning module
    Invalid(
        "import lightning as L\nfrom transformers import AutoModel\n\n"
        'MODEL_KWARGS = {"attn_implementation": "eager", "torch_dtype": "auto"}\n\n\n'
        "class LitModel(L.LightningModule):\n    def __init__(self):\n        super().__init__()\n"
        '        self.model = AutoModel.from_pretrained("gpt2", **MODEL_KWARGS)\n\n'
        "    def training_step(self, batch, batch_idx):\n        return self.model(**batch).loss\n",
        fixed="import lightning as L\nfrom transformers import AutoModel\n\n"
        'MODEL_KWARGS = {"attn_implementation": "sdpa", "torch_dtype": "auto"}\n\n\n'
        "class LitModel(L.LightningModule):\n    def __init__(self):\n        super().__init__()\n"
        '        self.model = AutoModel.from_pretrained("gpt2", **MODEL_KWARGS)\n\n'
        "    def training_step(self, batch, batch_idx):\n        return self.model(**batch).loss\n",
    ),
    # a Trainer script that never names torch (the rule does not need it to)
    Invalid(
        "from transformers import AutoModelForCausalLM, Trainer\n\n"
        'model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="eager")\n' + TRAIN,
        fixed="from transformers import AutoModelForCausalLM, Trainer\n\n"
        'model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="sdpa")\n' + TRAIN,
        line=3,
    ),
    Invalid(
        'import torch\nfrom accelerate import Accelerator\nfrom transformers import GPT2Config, GPT2LMHeadModel\n\n'
        'model = GPT2LMHeadModel(GPT2Config(n_layer=6, attn_implementation="eager"))\n'
        "accelerator = Accelerator()\naccelerator.backward(loss)\n",
        fixed='import torch\nfrom accelerate import Accelerator\nfrom transformers import GPT2Config, GPT2LMHeadModel\n\n'
        'model = GPT2LMHeadModel(GPT2Config(n_layer=6, attn_implementation="sdpa"))\n'
        "accelerator = Accelerator()\naccelerator.backward(loss)\n",
    ),
)
