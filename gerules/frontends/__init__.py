"""Model frontends other than ONNX: each ends in a verified ``gerules.ir.Graph``.

- ``formats``: atc's ``--framework`` values, the format a path implies, ``load`` for the
  formats below (used by the CLI and ``gerules.parse_model``).
- ``torch``: ``convert(module, example_inputs)`` and ``convert_archive(path, input_shapes,
  trust=False)`` (archives checked by ``archive``, converted in the isolated worker), through
  torch's own ONNX exporter; needs the ``torch`` extra, imported only when called (for
  archives: only in the worker).
- ``archive``: the strict structural check of PyTorch archives (no torch); ``pickles``:
  whether a pickle is weights only, from its opcodes.
- ``caffe`` (+ ``caffe_layers``, ``caffe.proto``): ``.prototxt`` + ``.caffemodel``, read
  natively with protobuf.
- ``mindir`` (+ ``mindir_values``, ``mindir_ops``, ``mindir.proto``): MindSpore ``.mindir``,
  read natively with protobuf.
- ``tensorflow`` (+ ``tf_worker``): frozen ``.pb`` or SavedModel through tf2onnx, run in a
  separate limited process by ``isolate.run_isolated``; needs the ``tensorflow`` extra.
- ``protodef`` (message classes from a ``.proto`` text), ``files`` (the capped reader).
- ``isolate`` + ``worker`` + ``landlock``: the limited worker process where code from a model
  may run.
"""
