"""Model frontends other than ONNX: each ends in a verified ``gerules.ir.Graph``.

- ``gerules.frontends.torch``: ``convert(module, example_inputs)`` and ``convert_archive(path,
  input_shapes, trust=False)`` (archives checked by ``archive``, converted in the isolated
  worker), through torch's own ONNX exporter; needs the ``torch`` extra, imported only when
  called (for archives: only in the worker).
- ``gerules.frontends.archive``: the strict structural check of PyTorch archives (no torch);
  ``pickles``: whether a pickle is weights only, from its opcodes.
- ``gerules.frontends.isolate``: ``run_isolated`` (the limited worker process) and
  ``IsolationLimits``; ``worker`` and ``landlock`` are its worker side.
"""
