"""Share the IR graph builders of tests/memory (``memgraphs``) with these tests."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "memory"))
