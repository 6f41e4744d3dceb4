"""remnant: tells whether a model's unlearning removed a target or only hid it.

Built on the Yuyari Standard v0.3. The pure core (``stats``, ``standard``, ``statement``, ``records``,
``prereg``, ``config``, ``packs``) imports no torch; model work sits in ``models``, ``train``, ``score``,
``attacks``, ``classd`` and ``latent``.
"""

from __future__ import annotations

__version__ = "0.1.0"

#: The three versions an assessment records together (Z1).
STANDARD_VERSION = "0.3"
HARNESS_VERSION = __version__

__all__ = ["HARNESS_VERSION", "STANDARD_VERSION", "__version__"]
