"""The term layer: how IR graphs live in the e-graph, below both ``dsl`` and ``opt``.

``terms`` fixes the e-node conventions (ops by qualified name with schema defaults, ``Input``,
``Const``, ``Absent``, ``Proj`` leaves) and the IR analyses (``TermContext``: shapes, constant
folding, symbolic shape values); ``tensor`` the hashable constant (``ConstTensor``); ``lower``
and ``raise_graph`` turn a ``Graph`` into an e-graph and an extraction back into a ``Graph``.

Invariant: this package imports ``gerules.ir`` and ``gerules.engine`` only, so the rule
compiler (``dsl``), the optimizer (``opt``) and the verifier all build on one encoding.
"""
