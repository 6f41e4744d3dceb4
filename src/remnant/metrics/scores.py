"""What one teacher-forced pass reads off one sequence's labelled tokens (no torch: metrics are numpy math).

Every log-probability here was computed as a float32 log-softmax over the vocabulary (whatever the model's dtype)
and is stored as float64, so bf16 models give finite, comparable numbers (docs/metrics.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class TokenScores:
    """Per labelled token t of one sequence: its id, log p(y_t | y_<t), the argmax prediction at that position,
    and (only when the pass was asked for vocabulary statistics, for min-k++) μ_t = Σ_v p_v log p_v and
    σ²_t = Σ_v p_v (log p_v)² − μ_t² over the whole vocabulary."""

    labels: IntArray
    logprobs: FloatArray
    argmax: IntArray
    mu: FloatArray | None = None
    var: FloatArray | None = None

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def avg_loss(self) -> float:
        """Mean negative log-likelihood over *every* labelled token, EOS included (their ``evaluate_probability``);
        NaN when nothing is labelled (their 0/0)."""
        if len(self) == 0:
            return float("nan")
        return float(-self.logprobs.sum() / len(self))

    def drop_last(self) -> TokenScores:
        """The same readings without the last labelled token: their ``tokenwise_(vocab_)logprobs`` drop it (meant
        to drop the appended EOS), which extraction strength, exact memorization, min-k, min-k++ and the gradient
        norm read."""
        return TokenScores(
            labels=self.labels[:-1],
            logprobs=self.logprobs[:-1],
            argmax=self.argmax[:-1],
            mu=None if self.mu is None else self.mu[:-1],
            var=None if self.var is None else self.var[:-1],
        )


__all__ = ["FloatArray", "IntArray", "TokenScores"]
