"""Model frontends other than ONNX: each ends in a verified ``gerules.ir.Graph``.

- ``gerules.frontends.torch``: ``convert(module, example_inputs)`` and ``load_archive(path)``
  (TorchScript or ``torch.export`` archives, never arbitrary pickles), through torch's own
  ONNX exporter; needs the ``torch`` extra and imports it only when called.
"""
