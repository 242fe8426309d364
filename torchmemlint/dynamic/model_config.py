"""``--model-config``: a Hugging Face model built from its configuration, no download.

Importing this module imports neither torch nor transformers (the CLI checks its
options first).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict

from .errors import DynamicError


@dataclass(frozen=True)
class ModelConfig:
    """``--model-config``: a Hugging Face model built from a configuration, without a
    download: ``NAME`` a model type transformers defines (``gpt2``, ``bert``, ``llama``:
    its configuration class with its defaults), a ``config.json`` file or a directory
    holding one, or a checkpoint name already in the local Hugging Face cache.
    ``overrides`` (``--init-args`` as a JSON object) set configuration attributes."""

    name: str
    overrides: Dict[str, Any] = field(default_factory=dict)

    def load(self) -> Any:
        try:
            import transformers
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING
        except ImportError:
            raise DynamicError("--model-config needs transformers: pip install transformers") from None
        path = self.name
        if os.path.isdir(path) and os.path.isfile(os.path.join(path, "config.json")):
            path = os.path.join(path, "config.json")
        if path.endswith(".json") or os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as handle:
                    data = json.load(handle)
            except (OSError, ValueError) as exc:
                raise DynamicError("--model-config: cannot read %s: %s" % (path, exc)) from None
            if not isinstance(data, dict) or not isinstance(data.get("model_type"), str):
                raise DynamicError("--model-config %s has no \"model_type\" (a Hugging Face config.json has one)"
                                   % path)
            settings = {k: v for k, v in data.items() if k != "model_type"}
            settings.update(self.overrides)
            return self._for_model(transformers, data["model_type"], settings)
        if self.name in CONFIG_MAPPING:
            return self._for_model(transformers, self.name, dict(self.overrides))
        try:
            config = transformers.AutoConfig.from_pretrained(self.name, local_files_only=True)
        except Exception:
            raise DynamicError(
                "--model-config %r is not available offline: it is not a model type transformers defines "
                "(e.g. gpt2, bert, llama), a config.json file, nor in the local Hugging Face cache" % self.name
            ) from None
        for key, value in self.overrides.items():
            setattr(config, key, value)
        return config

    @staticmethod
    def _for_model(transformers: Any, model_type: str, settings: Dict[str, Any]) -> Any:
        try:
            return transformers.AutoConfig.for_model(model_type, **settings)
        except Exception as exc:
            raise DynamicError("--model-config: building the %s configuration failed: %s: %s"
                               % (model_type, type(exc).__name__, _first_line(exc))) from None

    def build(self, obj: Any, spec: str) -> Any:
        """``obj.from_config(config)`` (the Auto classes, any PreTrainedModel), else ``obj(config)``."""
        config = self.load()
        builder = getattr(obj, "from_config", None)
        return builder(config) if callable(builder) else obj(config)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
