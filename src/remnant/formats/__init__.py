"""The field's data formats in and out: TOFU and MUSE folders read strictly, mapped to target packs, and packs
written back as TOFU folders (docs/formats.md).

- :func:`read_tofu`, :func:`read_muse`: typed rows of each split, with provenance (file sha256, rows, layout);
- :func:`tofu_to_pack`, :func:`muse_to_pack`: a folder as a sealed target pack (R2, R16, C-W6, D4);
- :func:`pack_to_tofu`: a pack as a TOFU folder of JSON lines.

Pure core: importing this package never imports torch; Parquet needs ``pyarrow``, imported only to read it.
"""

from __future__ import annotations

from remnant.formats.export import TofuExport, pack_to_tofu
from remnant.formats.files import SourceFile, SplitSource
from remnant.formats.muse import MUSE_LAYOUT, KnowmemRow, MuseFolder, TextRow, VerbmemRow, read_muse
from remnant.formats.muse_pack import muse_to_pack
from remnant.formats.tofu import TOFU_SPLITS, TofuFolder, TofuRow, read_tofu
from remnant.formats.tofu_pack import tofu_to_pack

__all__ = [
    "KnowmemRow",
    "MUSE_LAYOUT",
    "MuseFolder",
    "SourceFile",
    "SplitSource",
    "TOFU_SPLITS",
    "TextRow",
    "TofuExport",
    "TofuFolder",
    "TofuRow",
    "VerbmemRow",
    "muse_to_pack",
    "pack_to_tofu",
    "read_muse",
    "read_tofu",
    "tofu_to_pack",
]
