"""The field's data formats in and out: TOFU and MUSE folders read strictly (typed rows with provenance), mapped
to sealed target packs (R2, R16, C-W6, D4), and packs written back as TOFU folders (docs/formats.md).

Pure core: importing this package never imports torch; Parquet needs ``pyarrow``, imported only to read it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from remnant.lazy import lazy_exports

if TYPE_CHECKING:
    from remnant.formats.export import TofuExport, pack_to_tofu
    from remnant.formats.files import SourceFile, SplitSource
    from remnant.formats.muse import MUSE_LAYOUT, KnowmemRow, MuseFolder, TextRow, VerbmemRow, read_muse
    from remnant.formats.muse_pack import muse_to_pack
    from remnant.formats.tofu import TOFU_SPLITS, TofuFolder, TofuRow, read_tofu
    from remnant.formats.tofu_pack import tofu_to_pack

#: Imported on first use: the package's command module and its small helpers load without the rest (a light start).
__getattr__ = lazy_exports(
    __name__,
    {
        "TofuExport": "export",
        "pack_to_tofu": "export",
        "SourceFile": "files",
        "SplitSource": "files",
        "MUSE_LAYOUT": "muse",
        "KnowmemRow": "muse",
        "MuseFolder": "muse",
        "TextRow": "muse",
        "VerbmemRow": "muse",
        "read_muse": "muse",
        "muse_to_pack": "muse_pack",
        "TOFU_SPLITS": "tofu",
        "TofuFolder": "tofu",
        "TofuRow": "tofu",
        "read_tofu": "tofu",
        "tofu_to_pack": "tofu_pack",
    },
)

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
