"""The built-in components ``remnant list`` shows, by kind: ``{name: version}``.

Listing must work where torch is not installed (the pure-core install), but the packages whose import registers
the attacks, methods and audits import torch (:data:`remnant.registry.KIND_PACKAGES`). So the built-ins are
listed from this static index, and ``tests/unit/registry/test_builtin_index.py`` fails, printing the index to
paste here, whenever it differs from what the registry holds after importing those packages (K4, R23).
"""

from __future__ import annotations

#: ``{kind: {name: version}}`` of every built-in component of the listed kinds.
BUILTIN_INDEX: dict[str, dict[str, str]] = {
    "attack": {
        "actpert": "2",
        "actpert_sweep": "1",
        "aoa": "1",
        "gcg": "1",
        "icl": "2",
        "icl_retain": "1",
        "many_shot": "1",
        "mask": "2",
        "mask_cloze": "1",
        "mask_icl": "1",
        "mask_icl_aoa": "1",
        "prefill": "1",
        "quantize": "1",
        "repeated_sampling": "1",
        "repeated_sampling_analytic": "1",
        "soft_prompt": "1",
    },
    "audit": {
        "direction_survival": "1.0",
        "j_access": "2.0",
        "j_access_refit": "1.0",
        "logit_lens_access": "2.0",
        "logit_lens_uds": "1.0",
        "uds": "1.0",
        "uds_no_retain": "1.0",
    },
    "method": {
        "altpo": "1",
        "ceu": "1",
        "grad_ascent": "1",
        "grad_diff": "1",
        "idk_dpo": "1",
        "idk_nll": "1",
        "npo": "1",
        "pdu": "1",
        "retrain": "1",
        "rmu": "1",
        "satimp": "1",
        "simnpo": "1",
        "task_vector": "1",
        "undial": "1",
        "wga": "1",
    },
    "metric": {
        "exact_memorization": "1",
        "extraction_strength": "1",
        "hm_aggregate": "1",
        "ks_test": "1",
        "mia_gradnorm": "1",
        "mia_loss": "1",
        "mia_min_k": "1",
        "mia_min_k_plus_plus": "1",
        "mia_reference": "1",
        "mia_zlib": "1",
        "privleak": "1",
        "probability": "1",
        "probability_w_options": "1",
        "rel_diff": "1",
        "rouge": "1",
        "truth_ratio": "1",
    },
}

__all__ = ["BUILTIN_INDEX"]
