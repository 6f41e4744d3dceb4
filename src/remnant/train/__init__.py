"""Training: one loop, installation (R2), removal methods, Annex B control states, and relearning (§4.2)."""
