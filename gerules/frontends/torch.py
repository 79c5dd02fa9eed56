"""PyTorch input: an ``nn.Module`` (or a saved archive) through torch's own ONNX exporter.

``convert(module, example_inputs)`` exports with ``torch.onnx.export(..., dynamo=False,
training=TrainingMode.PRESERVE)`` on the module in eval mode, into memory, and loads the bytes
with ``gerules.onnx_io.load_model``. A ``torch.export`` module is first traced to TorchScript
on the example inputs (the TorchScript exporter needs it; the program's own shape guards
then check the inputs fit what was exported). PRESERVE on an eval module exports inference semantics
but keeps BatchNormalization as a node, so the optimizer's rules fold it (and the report shows
it).

``load_archive(path)`` reads a saved model without unpickling arbitrary objects:
- a TorchScript archive (``torch.jit.save``) is read by TorchScript's own loader, which only
  builds TorchScript types and runs no Python code;
- a ``torch.export`` archive (``torch.export.save``, ``.pt2``) is accepted only when every
  pickled payload in it (weights, constants, example inputs) loads with ``weights_only=True``
  and it holds no opaque Python objects; it is checked here first, because torch's own loader
  falls back to full unpickling, which we never allow;
- a plain ``torch.save`` pickle of a module (or a state dict, which holds no model) is refused
  with what to do instead.

Invariants: importing this module needs no torch (it is imported lazily, with a one-line
``UsageError`` naming the ``torch`` extra when absent); every problem with the input is a
``GeError`` naming the file.
"""

from __future__ import annotations

import io
import json
import logging
import re
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import GeError, ModelError, UsageError
from ..ir.graph import Graph
from ..onnx_io import load_model
from .isolate import IsolationLimits, run_isolated

log = logging.getLogger(__name__)

OPSET = 17
BATCH = "batch"


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise UsageError("PyTorch input needs the torch extra: pip install 'gerules[torch]'"
                         ) from None
    return torch


def export_onnx(module: Any, example_inputs: Sequence[Any], *,
                input_names: Sequence[str] | None = None,
                output_names: Sequence[str] | None = None,
                dynamic_batch: bool = False, opset: int = OPSET) -> bytes:
    """The ONNX bytes of ``module`` (put in eval mode) traced on ``example_inputs``."""
    torch = _torch()
    args = tuple(example_inputs)
    names = list(input_names or [f"input{k}" for k in range(len(args))])
    axes = {n: {0: BATCH} for n in names} if dynamic_batch else None
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        try:
            if not _eval(module):  # a torch.export module: the exporter needs TorchScript
                module = torch.jit.trace(module, args, check_trace=False)
            torch.onnx.export(module, args, buffer, dynamo=False, opset_version=opset,
                              training=torch.onnx.TrainingMode.PRESERVE,
                              input_names=names, output_names=list(output_names or []) or None,
                              dynamic_axes=axes)
        except Exception as e:  # torch raises many types; all mean "could not export"
            detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ModelError(guard_hint(detail, names, args)
                             or f"torch.onnx.export failed: {detail}") from None
    return buffer.getvalue()


# torch.export's shape guards, as torch words them ("Guard failed: x.size()[0] == 2", and
# "Expected input at *args[0].shape[0] to be equal to 2, but got 1").
_GUARDS = (re.compile(r"Guard failed: (?P<name>\w+)\.size\(\)\[(?P<dim>\d+)\] == (?P<size>\d+)"),
           re.compile(r"input at \*args\[(?P<arg>\d+)\]\.shape\[(?P<dim>\d+)\] to be equal "
                      r"to (?P<size>\d+)"))


def guard_hint(detail: str, names: Sequence[str], args: Sequence[Any]) -> str | None:
    """A torch.export shape guard in words, with the flag that fixes it; None otherwise."""
    for pattern in _GUARDS:
        m = pattern.search(detail)
        if m is None:
            continue
        dim, size = int(m["dim"]), int(m["size"])
        index = int(m["arg"]) if m.groupdict().get("arg") else (
            names.index(m["name"]) if m["name"] in names else 0)
        name = names[index] if index < len(names) else m.groupdict().get("name") or "input"
        shape = list(getattr(args[index], "shape", ())) if index < len(args) else []
        if dim < len(shape):
            shape[dim] = size
        dims = ",".join(str(d) for d in shape) or "..."
        return (f"the torch.export program was exported with input '{name}' dim {dim} fixed to "
                f"{size} and cannot be traced at another size: convert it at that size "
                f"(--input_shape {name}:{dims}, without a dynamic shape flag), or re-export it "
                f"with that dim dynamic (torch.export.export(model, args, dynamic_shapes="
                f"{{'{name}': {{{dim}: torch.export.Dim('batch')}}}}))")
    return None


def _eval(module: Any) -> bool:
    """Put ``module`` in inference mode; False for a torch.export module (it has no modes)."""
    try:
        module.eval()
    except NotImplementedError:
        return False
    except AttributeError:
        pass
    return True


def convert(module: Any, example_inputs: Sequence[Any], *,
            input_names: Sequence[str] | None = None,
            output_names: Sequence[str] | None = None,
            dynamic_batch: bool = False, opset: int = OPSET) -> Graph:
    """A verified ``Graph`` of ``module`` (see the module docstring)."""
    data = export_onnx(module, example_inputs, input_names=input_names,
                       output_names=output_names, dynamic_batch=dynamic_batch, opset=opset)
    return load_model(data)


# ----------------------------------------------------------------------------- archives


def archive_kind(path: str | Path) -> str:
    """``"torchscript"``, ``"export"``, ``"pickle"`` (a torch.save zip) or ``"unknown"``."""
    if not zipfile.is_zipfile(path):
        return "unknown"
    with zipfile.ZipFile(path) as z:
        inner = {_inner(n) for n in z.namelist()}
    if "archive_format" in inner or any(n.startswith("models/") for n in inner):
        return "export"
    if "constants.pkl" in inner and any(n.startswith("code/") for n in inner):
        return "torchscript"
    if "data.pkl" in inner:
        return "pickle"
    return "unknown"


def _inner(name: str) -> str:
    """The entry's path below the archive's top folder (``m/data.pkl`` -> ``data.pkl``)."""
    parts = PurePosixPath(name).parts
    return "/".join(parts[1:]) if len(parts) > 1 else name


def load_archive(path: str | Path) -> Any:
    """The module saved in ``path`` (see the module docstring for what is accepted)."""
    torch = _torch()
    where = str(path)
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise ModelError(f"cannot read: {e.strerror or e}", file=where) from None
    kind = archive_kind(path)
    if kind == "torchscript":
        return _guard(where, lambda: torch.jit.load(str(path), map_location="cpu"))
    if kind == "export":
        check_export_archive(path)
        program = _guard(where, lambda: torch.export.load(str(path)))
        return program.module()
    if kind == "pickle":
        raise ModelError("this is a torch.save pickle; loading it would run arbitrary code. "
                         "Save the model with torch.export.save(torch.export.export(model, "
                         f"(x,))) instead, or {TRUST_HINT}", file=where)
    raise ModelError("not a TorchScript or torch.export archive (a zip written by "
                     "torch.jit.save or torch.export.save)", file=where)


def _guard(where: str | None, load: Any) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load()
    except Exception as e:  # torch's loaders raise RuntimeError and friends
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load the archive: {detail}", file=where) from None


def check_export_archive(path: str | Path) -> None:
    """Refuse a ``torch.export`` archive that torch could only load by full unpickling."""
    torch = _torch()
    where = str(path)
    with zipfile.ZipFile(path) as z:
        entries = {_inner(n): n for n in z.namelist()}
        for inner, name in entries.items():
            if inner.endswith("_config.json") and inner.startswith("data/"):
                _check_config(z, entries, name, where, torch)
            elif inner.startswith("data/") and inner.endswith(".pt"):  # sample inputs, legacy
                _weights_only(z.read(name), inner, where, torch)
        if "archive_format" not in entries:
            raise ModelError("an old torch.export archive format (re-save it with this torch)",
                             file=where)


def _check_config(z: zipfile.ZipFile, entries: Mapping[str, str], name: str, where: str,
                  torch: Any) -> None:
    try:
        config = json.loads(z.read(name))
    except ValueError:
        raise ModelError(f"{_inner(name)} is not JSON", file=where) from None
    folder = str(PurePosixPath(_inner(name)).parent)
    for key, meta in (config.get("config") or {}).items():
        path = str(meta.get("path_name", ""))
        if path.startswith(("custom_obj", "opaque_obj")):
            raise ModelError(f"'{key}' is a pickled Python object; it cannot be loaded "
                             "safely", file=where)
        if meta.get("use_pickle"):
            inner = f"{folder}/{path}"
            if inner not in entries:
                raise ModelError(f"{inner} is missing", file=where)
            _weights_only(z.read(entries[inner]), inner, where, torch)


def _weights_only(data: bytes, inner: str, where: str, torch: Any) -> None:
    if not data:
        return
    try:
        torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as e:  # any failure: the payload needs more than weights_only allows
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"{inner} does not load with weights_only=True ({detail}); it is "
                         "not loaded unsafely", file=where) from None


TRUST_HINT = ("--trust_archive runs the conversion in a separate, limited process; use it only "
              "for archives from people you trust (docs/SECURITY.md)")


def archive_onnx(path: str | Path, input_shapes: Mapping[str, Sequence[int]], *,
                 batch: int = 1, trust: bool = False,
                 limits: IsolationLimits | None = None) -> bytes:
    """The ONNX bytes of a saved model, exported on random inputs of ``input_shapes``.

    Dims of ``-1`` are the batch: the export uses ``batch`` there and keeps the dim dynamic.
    Every input is float32 (give integer inputs through the Python API, ``convert``). With
    ``trust`` the archive is loaded and exported in a worker process (``isolate``), where it
    may run its own code (TorchScript methods, pickled classes) under ``limits``.
    """
    if not input_shapes:
        raise UsageError("--framework=pytorch needs --input_shape NAME:D0,D1,... for every "
                         "model input (the export traces the model on inputs of that shape)")
    shapes = {name: [int(d) for d in dims] for name, dims in input_shapes.items()}
    if trust:
        request = {"input_shapes": shapes, "batch": batch, "trusted": True}
        try:
            return run_isolated(f"{__name__}:export_archive", request,
                                limits=limits or IsolationLimits(), inputs=[Path(path)])
        except GeError as e:
            raise e.with_place(file=str(path)) from None
    return _export(load_archive(path), shapes, batch, str(path))


def _export(module: Any, shapes: Mapping[str, Sequence[int]], batch: int,
            where: str | None) -> bytes:
    torch = _torch()
    dynamic = any(-1 in dims for dims in shapes.values())
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(*[batch if d == -1 else d for d in dims], generator=gen)
            for dims in shapes.values()]
    try:
        return export_onnx(module, args, input_names=list(shapes), dynamic_batch=dynamic)
    except ModelError as e:
        raise e.with_place(file=where) from None


def export_archive(request: Mapping[str, Any], output: Path) -> None:
    """Worker entry (``isolate.run_isolated``): ``request["inputs"][0]`` exported to ONNX."""
    path = Path(request["inputs"][0])
    module = load_trusted(path) if request.get("trusted") else load_archive(path)
    output.write_bytes(_export(module, request["input_shapes"], int(request["batch"]), None))


def load_trusted(path: Path) -> Any:
    """A module from an archive whose author is trusted: TorchScript, torch.export or a
    ``torch.save`` pickle of a module, loaded the way torch loads them (code may run)."""
    torch = _torch()
    kind = archive_kind(path)
    where = None  # the parent names the file as the user gave it
    if kind == "torchscript":
        return _guard(where, lambda: torch.jit.load(str(path), map_location="cpu"))
    if kind == "export":
        return _guard(where, lambda: torch.export.load(str(path))).module()
    module = _guard(where, lambda: torch.load(str(path), weights_only=False, map_location="cpu"))
    if not isinstance(module, torch.nn.Module):
        raise ModelError(f"holds a Python {type(module).__name__}, not a model (a state dict "
                         "has no graph: save the module with torch.export.save)")
    return module


def convert_archive(path: str | Path, input_shapes: Mapping[str, Sequence[int]], *,
                    batch: int = 1, trust: bool = False,
                    limits: IsolationLimits | None = None) -> Graph:
    """The verified graph of a saved model (see ``archive_onnx``)."""
    data = archive_onnx(path, input_shapes, batch=batch, trust=trust, limits=limits)
    try:
        return load_model(data)
    except ModelError as e:
        raise e.with_place(file=str(path)) from None
