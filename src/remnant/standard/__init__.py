"""The Yuyari Standard v0.3 as code, one module per concern, rule ids in docstrings.

Nothing here imports torch: verdicts and tiers recompute anywhere (the pure core).
"""
