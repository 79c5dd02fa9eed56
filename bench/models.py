"""Reference architectures in plain torch (random, seeded weights) and their ONNX exports.

ResNet-18/50/101, MobileNetV2, an EfficientNet-B0-style net (MBConv blocks: depthwise
convolutions, SiLU, squeeze-excite), BERT-base (12 layers, hidden 768, seq 128, attention mask
input; ``bert_L<n>`` the same with n layers, for growth series), GPT-2 small (12 layers, causal
mask, seq 128), ViT-B/16, a Llama-style decoder (RMSNorm, rotary embeddings, SwiGLU MLP,
causal mask; 4 layers, hidden 512) and a small LSTM-free sequence model (a dilated temporal
conv net over token embeddings). No torchvision, no downloads.

``export(name, opset)`` writes ``bench/.cache/<name>-opset<N>.onnx`` (batch dim ``"batch"``
symbolic, everything else static) with
``torch.onnx.export(..., dynamo=False, training=TrainingMode.PRESERVE)`` (PRESERVE keeps
BatchNormalization unfolded, so the optimizer has something to fold) and reuses the file when
it is already there. ``python bench/models.py [NAME ...] [--opset 17 18]`` exports from the
command line.

Invariants: a model is a pure function of its name and seed (``torch.manual_seed``), so two
exports give the same weights; ``example_inputs(name)`` gives the export arguments, and
``input_names``/``output_names`` name the ONNX graph's inputs and outputs.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor, nn

CACHE = Path(__file__).resolve().parent / ".cache"
SEQ = 128


# ---- ResNet-50 --------------------------------------------------------------------------

class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.down: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x: Tensor) -> Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + self.down(x))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU()
        self.down: nn.Module = nn.Identity()
        if stride != 1 or cin != width:
            self.down = nn.Sequential(nn.Conv2d(cin, width, 1, stride, bias=False),
                                      nn.BatchNorm2d(width))

    def forward(self, x: Tensor) -> Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + self.down(x))


class ResNet(nn.Module):
    """ResNet-18 (basic blocks 2-2-2-2), -50 (bottlenecks 3-4-6-3) or -101 (3-4-23-3)."""

    DEPTHS = {18: (BasicBlock, (2, 2, 2, 2)), 50: (Bottleneck, (3, 4, 6, 3)),
              101: (Bottleneck, (3, 4, 23, 3))}

    def __init__(self, depth: int = 50, classes: int = 1000) -> None:
        super().__init__()
        block, counts = self.DEPTHS[depth]
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers: list[nn.Module] = []
        cin = 64
        for width, blocks, stride in zip((64, 128, 256, 512), counts, (1, 2, 2, 2),
                                         strict=True):
            for k in range(blocks):
                layers.append(block(cin, width, stride if k == 0 else 1))
                cin = width * block.expansion
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: Tensor) -> Tensor:
        y = self.pool(self.layers(self.stem(x)))
        return self.fc(torch.flatten(y, 1))


# ---- MobileNetV2 ------------------------------------------------------------------------

def _conv_bn(cin: int, cout: int, k: int, stride: int, groups: int = 1,
             act: Callable[[], nn.Module] | None = nn.ReLU6) -> nn.Sequential:
    mods: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                             nn.BatchNorm2d(cout)]
    if act is not None:
        mods.append(act())
    return nn.Sequential(*mods)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        mods: list[nn.Module] = [] if expand == 1 else [_conv_bn(cin, hidden, 1, 1)]
        mods += [_conv_bn(hidden, hidden, 3, stride, groups=hidden),
                 _conv_bn(hidden, cout, 1, 1, act=None)]
        self.block = nn.Sequential(*mods)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: Tensor) -> Tensor:
        return x + self.block(x) if self.residual else self.block(x)


class MobileNetV2(nn.Module):
    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        mods: list[nn.Module] = [_conv_bn(3, 32, 3, 2)]
        cin = 32
        for expand, cout, repeats, stride in self.SETTINGS:
            for k in range(repeats):
                mods.append(InvertedResidual(cin, cout, stride if k == 0 else 1, expand))
                cin = cout
        mods.append(_conv_bn(cin, 1280, 1, 1))
        self.features = nn.Sequential(*mods)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x: Tensor) -> Tensor:
        y = self.features(x).mean(dim=(2, 3))
        return self.classifier(y)


# ---- EfficientNet-style (B0 layout) ------------------------------------------------------

class SqueezeExcite(nn.Module):
    """x * sigmoid(conv(silu(conv(mean over H, W of x)))): a per-channel scale."""

    def __init__(self, c: int, squeezed: int) -> None:
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(c, squeezed, 1), nn.Conv2d(squeezed, c, 1)

    def forward(self, x: Tensor) -> Tensor:
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.expand(nn.functional.silu(self.reduce(s))))


class MBConv(nn.Module):
    """Expand (1x1), depthwise (k x k), squeeze-excite, project (1x1); residual when the
    shape stays."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        mods: list[nn.Module] = [] if expand == 1 else [_conv_bn(cin, hidden, 1, 1, act=nn.SiLU)]
        mods += [_conv_bn(hidden, hidden, k, stride, groups=hidden, act=nn.SiLU),
                 SqueezeExcite(hidden, max(1, cin // 4)),
                 _conv_bn(hidden, cout, 1, 1, act=None)]
        self.block = nn.Sequential(*mods)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: Tensor) -> Tensor:
        return x + self.block(x) if self.residual else self.block(x)


class EfficientNet(nn.Module):
    SETTINGS = ((1, 16, 1, 1, 3), (6, 24, 2, 2, 3), (6, 40, 2, 2, 5), (6, 80, 3, 2, 3),
                (6, 112, 3, 1, 5), (6, 192, 4, 2, 5), (6, 320, 1, 1, 3))

    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        mods: list[nn.Module] = [_conv_bn(3, 32, 3, 2, act=nn.SiLU)]
        cin = 32
        for expand, cout, repeats, stride, k in self.SETTINGS:
            for r in range(repeats):
                mods.append(MBConv(cin, cout, k, stride if r == 0 else 1, expand))
                cin = cout
        mods.append(_conv_bn(cin, 1280, 1, 1, act=nn.SiLU))
        self.features = nn.Sequential(*mods)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


# ---- transformers -----------------------------------------------------------------------

class SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads, self.dim = heads, hidden // heads
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.out = nn.Linear(hidden, hidden)

    def split(self, x: Tensor) -> Tensor:
        n, s, _ = x.shape
        return x.view(n, s, self.heads, self.dim).transpose(1, 2)

    def forward(self, x: Tensor, bias: Tensor) -> Tensor:
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dim) + bias
        ctx = torch.softmax(scores, dim=-1) @ v
        n, _, s, _ = ctx.shape
        return self.out(ctx.transpose(1, 2).reshape(n, s, self.heads * self.dim))


class Block(nn.Module):
    """A transformer layer: post-LN (BERT) or pre-LN (GPT-2, ViT)."""

    def __init__(self, hidden: int, heads: int, pre_ln: bool, gelu: str = "none") -> None:
        super().__init__()
        self.attn = SelfAttention(hidden, heads)
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(approximate=gelu),
                                 nn.Linear(4 * hidden, hidden))
        self.pre_ln = pre_ln

    def forward(self, x: Tensor, bias: Tensor) -> Tensor:
        if self.pre_ln:
            x = x + self.attn(self.ln1(x), bias)
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x, bias))
        return self.ln2(x + self.mlp(x))


class Bert(nn.Module):
    def __init__(self, layers: int = 12, hidden: int = 768, heads: int = 12,
                 vocab: int = 30522, max_len: int = 512) -> None:
        super().__init__()
        self.words = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(max_len, hidden)
        self.types = nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(Block(hidden, heads, pre_ln=False) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.words(input_ids) + self.positions(positions) + self.types.weight[0]
        x = self.ln(x)
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pooler(x[:, 0]))


class Gpt2(nn.Module):
    def __init__(self, layers: int = 12, hidden: int = 768, heads: int = 12,
                 vocab: int = 50257, max_len: int = 1024) -> None:
        super().__init__()
        self.words = nn.Embedding(vocab, hidden)
        self.positions = nn.Embedding(max_len, hidden)
        self.layers = nn.ModuleList(Block(hidden, heads, pre_ln=True, gelu="tanh")
                                    for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)

    def forward(self, input_ids: Tensor) -> Tensor:
        s = input_ids.shape[1]
        positions = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.words(input_ids) + self.positions(positions)
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        bias = torch.zeros(s, s, dtype=x.dtype).masked_fill(~causal, torch.finfo(x.dtype).min)
        for layer in self.layers:
            x = layer(x, bias)
        return self.ln(x) @ self.words.weight.t()  # tied output embedding


class ViT(nn.Module):
    def __init__(self, layers: int = 12, hidden: int = 768, heads: int = 12, patch: int = 16,
                 size: int = 224, classes: int = 1000) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, hidden, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, hidden) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2 + 1, hidden) * 0.02)
        self.layers = nn.ModuleList(Block(hidden, heads, pre_ln=True) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: Tensor) -> Tensor:
        y = self.patch(x).flatten(2).transpose(1, 2)
        y = torch.cat([self.cls.expand(y.shape[0], -1, -1), y], dim=1) + self.pos
        bias = torch.zeros(1, dtype=y.dtype)
        for layer in self.layers:
            y = layer(y, bias)
        return self.head(self.ln(y)[:, 0])


class TemporalConvNet(nn.Module):
    """A small LSTM-free sequence classifier: embeddings, dilated 1-D convs, pooled head."""

    def __init__(self, vocab: int = 1000, hidden: int = 128, levels: int = 4,
                 classes: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.convs = nn.ModuleList(nn.Conv1d(hidden, hidden, 3, padding=2 ** k, dilation=2 ** k)
                                   for k in range(levels))
        self.norms = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(levels))
        self.head = nn.Linear(hidden, classes)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.embed(tokens).transpose(1, 2)
        for conv, norm in zip(self.convs, self.norms, strict=True):
            x = x + torch.relu(norm(conv(x)))
        return torch.log_softmax(self.head(x.mean(dim=2)), dim=-1)


class RmsNorm(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + turned * sin


class LlamaLayer(nn.Module):
    """Pre-RMSNorm attention with rotary embeddings (no biases) and a SwiGLU MLP."""

    def __init__(self, hidden: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads, self.dim = heads, hidden // heads
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden, bias=False)
                                          for _ in range(4))
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)
        self.norm1, self.norm2 = RmsNorm(hidden), RmsNorm(hidden)

    def split(self, x: Tensor) -> Tensor:
        n, s, _ = x.shape
        return x.view(n, s, self.heads, self.dim).transpose(1, 2)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, bias: Tensor) -> Tensor:
        h = self.norm1(x)
        q = _rotate(self.split(self.q(h)), cos, sin)
        k = _rotate(self.split(self.k(h)), cos, sin)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dim) + bias
        ctx = torch.softmax(scores, dim=-1) @ self.split(self.v(h))
        n, _, s, _ = ctx.shape
        x = x + self.o(ctx.transpose(1, 2).reshape(n, s, self.heads * self.dim))
        h = self.norm2(x)
        return x + self.down(nn.functional.silu(self.gate(h)) * self.up(h))


class Llama(nn.Module):
    def __init__(self, layers: int = 4, hidden: int = 512, heads: int = 8, ffn: int = 1376,
                 vocab: int = 32000) -> None:
        super().__init__()
        self.words = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(LlamaLayer(hidden, heads, ffn) for _ in range(layers))
        self.norm = RmsNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        dim = hidden // heads
        inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        angles = torch.outer(torch.arange(SEQ).float(), inv)
        self.register_buffer("cos", torch.cat([angles.cos()] * 2, dim=-1), persistent=False)
        self.register_buffer("sin", torch.cat([angles.sin()] * 2, dim=-1), persistent=False)

    def forward(self, input_ids: Tensor) -> Tensor:
        s = input_ids.shape[1]
        x = self.words(input_ids)
        causal = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        bias = torch.zeros(s, s, dtype=x.dtype).masked_fill(~causal, torch.finfo(x.dtype).min)
        cos, sin = self.cos[:s], self.sin[:s]
        for layer in self.layers:
            x = layer(x, cos, sin, bias)
        return self.head(self.norm(x))


# ---- registry and export ----------------------------------------------------------------

def _image() -> tuple[Tensor, ...]:
    return (torch.randn(1, 3, 224, 224),)


def _tokens(vocab: int, seq: int = SEQ) -> Callable[[], tuple[Tensor, ...]]:
    return lambda: (torch.randint(0, vocab, (1, seq)),)


def _bert_inputs() -> tuple[Tensor, ...]:
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    mask[:, SEQ - 16:] = 0
    return (torch.randint(0, 30522, (1, SEQ)), mask)


# name -> (constructor, example inputs, input names, output names)
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[], tuple[Tensor, ...]],
                        list[str], list[str]]] = {
    "resnet18": (lambda: ResNet(18), _image, ["input"], ["logits"]),
    "resnet50": (ResNet, _image, ["input"], ["logits"]),
    "resnet101": (lambda: ResNet(101), _image, ["input"], ["logits"]),
    "mobilenetv2": (MobileNetV2, _image, ["input"], ["logits"]),
    "efficientnet": (EfficientNet, _image, ["input"], ["logits"]),
    "bert_base": (Bert, _bert_inputs, ["input_ids", "attention_mask"],
                  ["last_hidden_state", "pooler_output"]),
    "gpt2_small": (Gpt2, _tokens(50257), ["input_ids"], ["logits"]),
    "vit_b16": (ViT, _image, ["input"], ["logits"]),
    "llama_small": (Llama, _tokens(32000), ["input_ids"], ["logits"]),
    "tcn_small": (TemporalConvNet, _tokens(1000, 64), ["tokens"], ["log_probs"]),
}
for _layers in (2, 6, 24):  # BERT-base with other depths, for compile-time growth series
    MODELS[f"bert_L{_layers}"] = (lambda n=_layers: Bert(layers=n), _bert_inputs,
                                  ["input_ids", "attention_mask"],
                                  ["last_hidden_state", "pooler_output"])


def build(name: str, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    model = MODELS[name][0]()
    _randomize_norms(model, seed)
    return model.eval()


def _randomize_norms(model: nn.Module, seed: int) -> None:
    """Non-trivial BatchNorm statistics, so folding BN is not a no-op."""
    g = torch.Generator().manual_seed(seed + 1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm1d | nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            m.weight.data.copy_(1 + torch.randn(c, generator=g) * 0.1)
            m.bias.data.copy_(torch.randn(c, generator=g) * 0.1)


def example_inputs(name: str, seed: int = 0) -> tuple[Tensor, ...]:
    torch.manual_seed(seed)
    return MODELS[name][1]()


def export(name: str, opset: int = 17, cache: Path = CACHE) -> Path:
    """The ONNX file for ``name`` at ``opset`` (exported once, then reused)."""
    path = cache / f"{name}-opset{opset}.onnx"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    _, _, inputs, outputs = MODELS[name]
    tmp = path.with_suffix(".onnx.tmp")
    batch = {n: {0: "batch"} for n in (*inputs, *outputs)}
    with torch.no_grad():
        torch.onnx.export(build(name), example_inputs(name), str(tmp), dynamo=False,
                          opset_version=opset, training=torch.onnx.TrainingMode.PRESERVE,
                          input_names=inputs, output_names=outputs, dynamic_axes=batch)
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"models to export (default: all of {', '.join(MODELS)})")
    parser.add_argument("--opset", type=int, nargs="+", default=[17])
    args = parser.parse_args(argv)
    unknown = set(args.names) - set(MODELS)
    if unknown:
        parser.error(f"unknown model(s): {', '.join(sorted(unknown))}")
    for name in args.names or MODELS:
        for opset in args.opset:
            print(export(name, opset))
    return 0


if __name__ == "__main__":
    sys.exit(main())
