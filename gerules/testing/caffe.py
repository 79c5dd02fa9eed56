"""Caffe nets built in code: a ``.prototxt`` and its ``.caffemodel``, for tests and examples.

``CaffeNet`` collects layers (parameters as plain dicts, in Caffe's field names, enums by
name) and their weight blobs; ``write(folder)`` writes the text net and the binary weights
the way Caffe does (weights in a separate NetParameter, matched by layer name). Weights are
drawn from a seeded generator, so a net is the same every time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf import json_format, text_format

from ..frontends.caffe import proto


class CaffeNet:
    """A Caffe net under construction (see the module docstring)."""

    def __init__(self, name: str = "net", seed: int = 0) -> None:
        net_type = proto()["NetParameter"]
        self.net = net_type(name=name)
        self.weights = net_type(name=name)
        self.blobs: dict[str, list[np.ndarray]] = {}
        self.rng = np.random.default_rng(seed)

    def input(self, name: str, shape: Sequence[int]) -> CaffeNet:
        """An Input layer with one top."""
        return self.layer(name, "Input", (), (name,),
                          input_param={"shape": [{"dim": list(shape)}]})

    def layer(self, name: str, kind: str, bottom: Sequence[str], top: Sequence[str],
              blobs: Sequence[np.ndarray] = (), **params: Mapping[str, Any]) -> CaffeNet:
        """A layer; ``params`` are its ``*_param`` messages as dicts."""
        layer = self.net.layer.add(name=name, type=kind)
        layer.bottom.extend(bottom)
        layer.top.extend(top)
        for key, fields in params.items():
            json_format.ParseDict(dict(fields), getattr(layer, key))
        if blobs:
            arrays = [np.asarray(b, np.float32) for b in blobs]
            self.blobs[name] = arrays
            stored = self.weights.layer.add(name=name, type=kind)
            for array in arrays:
                blob = stored.blobs.add()
                blob.shape.dim.extend(array.shape)
                blob.data.extend(array.ravel())
        return self

    def normal(self, *shape: int, scale: float = 1.0) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(np.float32)

    def positive(self, *shape: int) -> np.ndarray:
        return self.rng.uniform(0.5, 1.5, shape).astype(np.float32)

    def text(self) -> str:
        return text_format.MessageToString(self.net)

    def write(self, folder: str | Path, stem: str | None = None) -> tuple[Path, Path]:
        """Write ``<stem>.prototxt`` and ``<stem>.caffemodel``; returns both paths."""
        stem = stem or self.net.name
        net_path = Path(folder) / f"{stem}.prototxt"
        weight_path = Path(folder) / f"{stem}.caffemodel"
        net_path.write_text(self.text(), encoding="utf-8")
        weight_path.write_bytes(self.weights.SerializeToString())
        return net_path, weight_path
