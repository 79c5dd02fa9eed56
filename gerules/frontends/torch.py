"""PyTorch input: an ``nn.Module`` (or a saved archive) through torch's own ONNX exporter.

``convert(module, example_inputs)`` exports with ``torch.onnx.export(..., dynamo=False,
training=TrainingMode.PRESERVE)`` on the module in eval mode, into memory, and loads the bytes
with ``gerules.onnx_io.load_model``. A ``torch.export`` module is first traced to TorchScript
on the example inputs (the TorchScript exporter needs it; the program's own shape guards
then check the inputs fit what was exported). PRESERVE on an eval module exports inference
semantics but keeps BatchNormalization as a node, so the optimizer's rules fold it (and the
report shows it). ``convert`` runs the caller's own module: it is trusted code.

``archive_onnx(path, input_shapes)`` / ``convert_archive`` convert a saved model, never in
this process: the archive is first checked without torch (``archive.check_archive``: zip
structure, budgets, and without ``--trust_archive`` only what loads without running code:
``torch.export`` archives whose pickles are weights only and whose expressions are shape
arithmetic), then loaded, traced and exported in the isolated worker (``isolate``), which
checks its own copy again; only ONNX bytes come back. With ``trust`` the worker also loads
TorchScript archives and ``torch.save`` pickles of modules, whose code then runs there.

Invariants: importing this module needs no torch (it is imported lazily, with a one-line
``UsageError`` naming the ``torch`` extra when absent; archives need it only in the worker);
every problem with the input is a ``GeError`` naming the file.
"""

from __future__ import annotations

import io
import logging
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..budgets import DEFAULT, FLAGS, Budgets
from ..errors import GeError, ModelError, UsageError
from ..fileio import open_input, read_fd
from ..ir.graph import Graph
from ..onnx_io import load_model
from .archive import check_archive
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


def archive_onnx(path: str | Path, input_shapes: Mapping[str, Sequence[int]], *,
                 batch: int = 1, trust: bool = False, budgets: Budgets = DEFAULT) -> bytes:
    """The ONNX bytes of a saved model, exported on random inputs of ``input_shapes``.

    Dims of ``-1`` are the batch: the export uses ``batch`` there and keeps the dim dynamic.
    Every input is float32 (give integer inputs through the Python API, ``convert``). The
    archive is checked here (``archive.check_archive``, no torch needed) and then loaded and
    exported in the isolated worker (``isolate``); with ``trust`` it may run its own code
    there (TorchScript methods, pickled classes). This process never loads it.
    """
    if not input_shapes:
        raise UsageError("--framework=pytorch needs --input_shape NAME:D0,D1,... for every "
                         "model input (the export traces the model on inputs of that shape)")
    where = str(path)
    fd = open_input(path, what="a PyTorch archive")
    try:
        budgets.check("archive_bytes", os.fstat(fd).st_size, "the archive", file=where)
        data = read_fd(fd, budgets.archive_bytes, where=where, what="a PyTorch archive")
    finally:
        os.close(fd)
    check_archive(data, where=where, budgets=budgets, trust=trust)
    shapes = {name: [int(d) for d in dims] for name, dims in input_shapes.items()}
    request = {"input_shapes": shapes, "batch": batch, "trusted": trust,
               "archive_bytes": budgets.archive_bytes}
    try:
        return run_isolated(f"{__name__}:export_archive", request,
                            limits=worker_limits(budgets), inputs=[Path(path)])
    except GeError as e:
        raise e.with_place(file=where) from None


def worker_limits(budgets: Budgets) -> IsolationLimits:
    """The worker's limits: its inputs within the archive budget, its memory within the
    run-time one, its time within the command's ``--timeout``."""
    flags = {"input_bytes": FLAGS["archive_bytes"], "memory_bytes": FLAGS["live_bytes"],
             "seconds": FLAGS["seconds"], "cpu_seconds": FLAGS["seconds"]}
    seconds = budgets.seconds or IsolationLimits().seconds
    return IsolationLimits(seconds=seconds, memory_bytes=max(budgets.live_bytes, 4 << 30),
                           input_bytes=budgets.archive_bytes, flags=flags)


def export_archive(request: Mapping[str, Any], output: Path) -> None:
    """Worker entry (``isolate.run_isolated``): ``request["inputs"][0]`` exported to ONNX.

    Untrusted, the copy is checked again here (these are the bytes torch will read)."""
    path = Path(request["inputs"][0])
    trusted = bool(request.get("trusted"))
    budgets = Budgets(archive_bytes=int(request["archive_bytes"]))
    kind = check_archive(path.read_bytes(), where=path.name, budgets=budgets, trust=trusted)
    module = _load(path, kind)
    output.write_bytes(_export(module, request["input_shapes"], int(request["batch"]), None))


def _load(path: Path, kind: str) -> Any:
    """The module in a checked archive of ``kind``, loaded the way torch loads it."""
    torch = _torch()
    if kind == "torchscript":
        return _guard(lambda: torch.jit.load(str(path), map_location="cpu"))
    if kind == "export":
        return _guard(lambda: torch.export.load(str(path))).module()
    module = _guard(lambda: torch.load(str(path), weights_only=False, map_location="cpu"))
    if not isinstance(module, torch.nn.Module):
        raise ModelError(f"holds a Python {type(module).__name__}, not a model (save the "
                         "module with torch.export.save)")
    return module


def _guard(load: Any) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load()
    except Exception as e:  # torch's loaders raise RuntimeError and friends
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load the archive: {detail}") from None


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


def convert_archive(path: str | Path, input_shapes: Mapping[str, Sequence[int]], *,
                    batch: int = 1, trust: bool = False, budgets: Budgets = DEFAULT) -> Graph:
    """The verified graph of a saved model (see ``archive_onnx``)."""
    data = archive_onnx(path, input_shapes, batch=batch, trust=trust, budgets=budgets)
    try:
        return load_model(data, budgets=budgets)
    except ModelError as e:
        raise e.with_place(file=str(path)) from None
