"""The ``.om`` offline model: our own open container (see docs/OM_FORMAT.md).

Public API: ``write_om(path, contents, report)``, ``read_om(path) -> OmFile`` (checked and
memory-mapped), ``OmContents`` and ``Variant`` (what a file holds).
"""

from __future__ import annotations

from .contents import OmContents, Variant
from .format import MAGIC, VERSION, Kind
from .reader import OmFile, read_om
from .writer import write_om

__all__ = ["MAGIC", "VERSION", "Kind", "OmContents", "OmFile", "Variant", "read_om", "write_om"]
