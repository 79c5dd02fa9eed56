"""The Python API behind ``gerules``' public names (see ``gerules/__init__.py``, docs/API.md).

One small module per job: ``handles`` (``Tensor`` and op inputs), ``checks`` (a node's arity
and attribute kinds), ``namespace`` (``g.ops.<Op>`` from the registry), ``builder``
(``GraphBuilder``), ``parse`` (``parse_model``), ``compiling`` (``optimize``, ``compile``) and
``session`` (``Session``). Nothing is imported here, so ``import gerules`` stays cheap.
"""
