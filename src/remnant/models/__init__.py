"""Model edge: safe loading, identity, the zoo, prompts, architecture parts and hooks (torch lives here).

The package's public names resolve lazily, so importing ``remnant.models.commands`` (to build the CLI parser)
does not import torch.
"""

from remnant.lazy import lazy_exports

__all__ = ["ModelState", "load_model", "save_model"]

__getattr__ = lazy_exports(__name__, dict.fromkeys(__all__, "load"))
