"""The models the partition tests cut (importable by name from the tests in this folder)."""

from __future__ import annotations

import numpy as np

from gerules.testing.models import tiny_resnet, transformer_encoder


def feeds(name: str, seed: int) -> dict[str, np.ndarray]:
    return MODELS[name][0].feeds(seed)


MODELS = {
    "encoder": (transformer_encoder(layers=4), {"input_ids": (2, 8), "attention_mask": (2, 8)}),
    "resnet": (tiny_resnet(), {"image": (1, 3, 32, 32)}),
}
