"""Is a pickle weights only? Decided by reading its opcodes, never by unpickling it.

``pickletools.genops`` parses a pickle without executing any of it. A pickle can only run
code through the callables it imports (``GLOBAL``, ``STACK_GLOBAL``, ``INST``) or the
extension registry (``EXT1/2/4``); so a pickle whose imports are all in ``WEIGHTS`` (what
``torch.save`` writes for tensors, parameters, dicts and sizes) and that uses no extension
codes can only build tensors and containers, whoever wrote it.

Invariants:
- ``imports(data)`` returns every ``module.name`` the pickle would import, or raises
  ``NotWeights`` for what cannot be read statically (a ``STACK_GLOBAL`` whose module or name
  is not a string pushed by the pickle itself, an extension code, a parse error).
- ``check_weights_only(data, what)`` raises ``NotWeights`` naming the first import outside
  ``WEIGHTS``; it reads at most ``MAX_OPS`` opcodes.
"""

from __future__ import annotations

import io
import pickletools

_STORAGES = ("Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte",
             "Bool", "ComplexFloat", "ComplexDouble")
WEIGHTS = frozenset({
    "collections.OrderedDict", "torch.Size", "torch.device", "_codecs.encode",
    "torch._utils._rebuild_tensor_v2", "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    *(f"torch.{kind}Storage" for kind in _STORAGES),
})
MAX_OPS = 10_000_000
_STRINGS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE",
                      "SHORT_BINSTRING", "BINSTRING", "STRING"})
_MEMO_PUT = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_MEMO_GET = frozenset({"GET", "BINGET", "LONG_BINGET"})


class NotWeights(Exception):
    """The pickle could run code (or cannot be read): never give it to an unpickler."""


def imports(data: bytes) -> set[str]:
    """Every ``module.name`` the pickle imports (see the module docstring)."""
    found: set[str] = set()
    recent: list[object] = []  # values pushed lately (strings for STACK_GLOBAL)
    memo: dict[object, object] = {}
    memo_count = 0
    try:
        for count, (op, arg, _) in enumerate(pickletools.genops(io.BytesIO(data))):
            if count > MAX_OPS:
                raise NotWeights(f"more than {MAX_OPS} pickle opcodes")
            name = op.name
            if name in ("GLOBAL", "INST"):
                module, _, attr = str(arg).partition(" ")
                found.add(f"{module}.{attr}")
            elif name == "STACK_GLOBAL":
                if len(recent) < 2 or not all(isinstance(v, str) for v in recent[-2:]):
                    raise NotWeights("an import whose name is computed at load time")
                found.add(f"{recent[-2]}.{recent[-1]}")
            elif name.startswith("EXT"):
                raise NotWeights("an extension-registry import (EXT opcode)")
            if name in _STRINGS:
                recent.append(arg)
            elif name in _MEMO_GET:
                recent.append(memo.get(arg))
            elif name == "MEMOIZE":
                memo[memo_count] = recent[-1] if recent else None
                memo_count += 1
            elif name in _MEMO_PUT:
                memo[arg] = recent[-1] if recent else None
            elif name not in ("MARK", "FRAME", "PROTO"):
                recent.append(None)
            del recent[:-2]
    except NotWeights:
        raise
    except Exception as e:  # genops raises ValueError and friends on malformed input
        raise NotWeights(f"not a readable pickle ({type(e).__name__}: {e})") from None
    return found


def check_weights_only(data: bytes) -> None:
    """``NotWeights`` unless the pickle imports only what ``torch.save`` needs for weights."""
    for name in sorted(imports(data)):
        if name not in WEIGHTS:
            raise NotWeights(f"it imports {name}, which is not part of saved weights")
