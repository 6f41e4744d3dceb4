"""Per-sample gradient norms of every parameter tensor from one batched forward and backward (docs/metrics.md, "One
pass, shared"). The backward computes activation gradients only; hooks keep each module's input and output
gradient, and each parameter's per-sample squared norm is assembled from them: a linear layer's
Σ_{t,s} (a_t·a_s)(g_t·g_s) (the "ghost norm", Goodfellow 2015, Li et al. 2022) or the per-sample matrix where
cheaper; an embedding's the same with one-hot rows (its ``padding_idx`` left out, as its backward leaves that
row); cross terms for a tensor several modules use (a tied head); ``torch.func`` per sample for any other module
with parameters of its own (RMSNorm, LayerNorm).

:class:`Unsupported` is raised for what this cannot read exactly (an embedding with ``max_norm`` or frequency
scaling, a module called with other than one tensor, inputs without a sequence axis or one row per sample, a
parameter shared by a linear or embedding and another kind of module), and where the autograd graph's edges to a
parameter (one per use) differ from the module calls the hooks saw; the caller then runs one backward per sample."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from remnant.models.grads import grad_required

#: loss_fn(logits, offset) -> one loss per row; logits[:, j] predicts the token at position offset + j + 1.
LossFn = Callable[[torch.Tensor, int], torch.Tensor]


class Unsupported(Exception):
    """The batched path cannot compute this model's per-sample norms exactly; use one backward per sample."""


@dataclass(frozen=True)
class _Factor:
    """One module call's share of a 2-D parameter's gradient, Σ_t rows_t ⊗ cols_t: ``rows`` (B, T, n_rows) dense or
    (B, T) token ids standing for one-hot rows, ``cols`` (B, T, n_cols); T is the batch's width or a tail of it (the
    output head sees only the positions whose logits are kept)."""

    rows: torch.Tensor
    cols: torch.Tensor


@dataclass
class _Call:
    """A call of a module that owns parameters: its input and, after the backward, its output gradient (set by
    the output's gradient hook, hence not frozen)."""

    module: torch.nn.Module
    inputs: torch.Tensor
    grad: torch.Tensor | None = None
    #: The graph starts at this call's output (an embedding's): its parameters have no edge in the graph.
    starts: bool = False


def _owners(model: torch.nn.Module) -> dict[int, list[tuple[torch.nn.Module, str]]]:
    """Each parameter (by id) -> the modules that hold it directly, with its attribute name there."""
    owners: dict[int, list[tuple[torch.nn.Module, str]]] = {}
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            owners.setdefault(id(p), []).append((module, name))
    return owners


class _Recorder:
    """Forward hooks that keep what each parameter-owning module saw, and output hooks for its gradient."""

    def __init__(self, modules: list[torch.nn.Module], batch: int) -> None:
        self.batch = batch
        self.calls: list[_Call] = []
        self.leaves: list[torch.Tensor] = []
        self.active = True
        self._handles = [m.register_forward_hook(self._hook, with_kwargs=True) for m in modules]

    def _hook(
        self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any
    ) -> Any:
        if not self.active:
            return None
        if (
            len(args) != 1
            or kwargs
            or not isinstance(args[0], torch.Tensor)
            or not isinstance(output, torch.Tensor)
        ):
            raise Unsupported(f"{type(module).__name__} is called with other than one tensor")
        inputs = args[0].detach()
        if inputs.dim() < (2 if isinstance(module, torch.nn.Embedding) else 3):
            raise Unsupported(f"{type(module).__name__} input has no sequence axis")
        if isinstance(module, torch.nn.Embedding) and inputs.shape[0] == 1 < self.batch:
            # position ids shared by the batch (GPT-2's wpe): one row per sample, so each gets its own gradient
            inputs = inputs.expand(self.batch, *inputs.shape[1:])
            output = output.expand(self.batch, *output.shape[1:])
        if inputs.shape[0] != self.batch:
            raise Unsupported(f"{type(module).__name__} input is not one row per sample")
        call = _Call(module, inputs, starts=not args[0].requires_grad)
        self.calls.append(call)
        if call.starts:  # an embedding: the graph starts at its output
            output = output.detach().clone().requires_grad_(True)
            self.leaves.append(output)

        def keep(grad: torch.Tensor) -> None:
            call.grad = grad.detach()

        output.register_hook(keep)
        return output

    def close(self) -> None:
        for h in self._handles:
            h.remove()


def _grad(call: _Call) -> torch.Tensor:
    if call.grad is None:  # only calls the backward reached are read
        raise Unsupported(f"{type(call.module).__name__} has no output gradient")
    return call.grad


def _factor(call: _Call, name: str) -> _Factor | None:
    """The call's share of ``module.<name>`` as a factor pair, or None for a bias (handled as a vector)."""
    if isinstance(call.module, torch.nn.Embedding):
        grad = _grad(call)
        if call.module.padding_idx is not None:  # the embedding's backward leaves that row's gradient at zero
            grad = grad.masked_fill((call.inputs == call.module.padding_idx)[..., None], 0.0)
        return _Factor(rows=call.inputs, cols=grad)
    if name == "weight":
        return _Factor(rows=_grad(call), cols=call.inputs)
    return None


def _gram(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(B, T_a, T_b) float32 inner products of two dense factors' positions."""
    return torch.bmm(a.float(), b.float().transpose(1, 2))


def _row_gram(ri: torch.Tensor, rj: torch.Tensor) -> torch.Tensor:
    """(B, T_i, T_j) inner products of two row factors, token ids standing for one-hot rows."""
    if ri.dim() == 2 and rj.dim() == 2:
        return (ri[:, :, None] == rj[:, None, :]).to(torch.float32)
    if ri.dim() == 2:  # ⟨e_{id_t}, r_s⟩ = r_s[id_t]
        return torch.gather(rj.float(), 2, ri[:, None, :].expand(-1, rj.shape[1], -1)).transpose(1, 2)
    if rj.dim() == 2:
        return torch.gather(ri.float(), 2, rj[:, None, :].expand(-1, ri.shape[1], -1))
    return _gram(ri, rj)


#: Position grams of module inputs already computed in one batch, by the input's storage: q, k and v (and gate and
#: up) read one tensor, so its gram is made once. The tensor is kept beside its gram, so its storage cannot be
#: freed and reused by another tensor while the key stands.
Grams = dict[tuple[int, tuple[int, ...], tuple[int, ...]], tuple[torch.Tensor, torch.Tensor]]


def _input_gram(cols: torch.Tensor, grams: Grams) -> torch.Tensor:
    key = (cols.data_ptr(), tuple(cols.shape), tuple(cols.stride()))
    if key not in grams:
        grams[key] = (cols, _gram(cols, cols).double())
    return grams[key][1]


def _ghost(factors: list[_Factor], grams: Grams) -> torch.Tensor:
    """(B,) squared norms of Σ over factors of Σ_t rows_t ⊗ cols_t, from inner products of positions only: float32
    position grams (a float64 copy of an output head's B × T × vocabulary gradient would cost more than the rest),
    combined in float64. Padded positions need no mask: their output gradient is zero."""
    acc = torch.zeros(factors[0].cols.shape[0], dtype=torch.float64, device=factors[0].cols.device)
    for i, fi in enumerate(factors):
        for j, fj in enumerate(factors[i:], start=i):
            cols = _input_gram(fi.cols, grams) if i == j else _gram(fi.cols, fj.cols).double()
            term = (_row_gram(fi.rows, fj.rows).double() * cols).sum(dim=(1, 2))
            acc += term if i == j else 2.0 * term  # the (j, i) term is the same sum transposed
    return acc


def _direct(factors: list[_Factor], shape: torch.Size) -> torch.Tensor:
    """The same squared norms from each sample's gradient matrix (cheaper when sequences are long)."""
    batch = factors[0].cols.shape[0]
    device = factors[0].cols.device
    out = torch.zeros(batch, dtype=torch.float64, device=device)
    for b in range(batch):
        total = torch.zeros(tuple(shape), dtype=torch.float64, device=device)
        for f in factors:
            cols = f.cols[b].to(torch.float64)
            if f.rows.dim() == 2:
                total.index_add_(0, f.rows[b], cols)
            else:
                total += f.rows[b].to(torch.float64).T @ cols
        out[b] = (total * total).sum()
    return out


def _matrix_sq_norms(factors: list[_Factor], shape: torch.Size, grams: Grams) -> torch.Tensor:
    """(B,) squared norms of a 2-D parameter's per-sample gradients, whichever way costs less."""
    n_rows, n_cols = int(shape[0]), int(shape[1])
    lengths = [int(f.cols.shape[1]) for f in factors]
    ghost = sum(
        ti * tj * (n_cols + (1 if f.rows.dim() == 2 else n_rows))
        for f, ti in zip(factors, lengths, strict=True)
        for tj in lengths
    )
    direct = n_rows * n_cols + sum(
        t * n_cols * (1 if f.rows.dim() == 2 else n_rows) for f, t in zip(factors, lengths, strict=True)
    )
    return _ghost(factors, grams) if ghost <= direct else _direct(factors, shape)


def _generic_grads(call: _Call) -> dict[str, torch.Tensor]:
    """Per-sample gradients (B, *shape) of a module's own parameters, from its input and output gradient."""
    from torch.func import functional_call, grad, vmap

    own = {name: p.detach() for name, p in call.module.named_parameters(recurse=False)}

    def inner(params: dict[str, torch.Tensor], x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = functional_call(call.module, params, (x[None],))
        return (out * g[None]).sum()

    grads: dict[str, torch.Tensor] = vmap(grad(inner), in_dims=(None, 0, 0))(own, call.inputs, _grad(call))
    return grads


def _param_sq_norms(param: torch.nn.Parameter, uses: list[tuple[_Call, str]], grams: Grams) -> torch.Tensor:
    """(B,) squared norms of one parameter's per-sample gradients, from the calls that used it."""
    linear_like = [isinstance(c.module, torch.nn.Linear | torch.nn.Embedding) for c, _ in uses]
    if any(linear_like) and not all(linear_like):
        raise Unsupported("a parameter is shared by a linear or embedding module and another kind")
    if not all(linear_like):
        total: torch.Tensor | None = None
        for call, name in uses:
            g = _generic_grads(call)[name].to(torch.float64)
            total = g if total is None else total + g
        assert total is not None
        return (total * total).flatten(1).sum(1)
    if param.dim() == 2:
        factors = [f for f in (_factor(c, name) for c, name in uses) if f is not None]
        return _matrix_sq_norms(factors, param.shape, grams)
    # a linear layer's bias: Σ_t g_t (zero at padded positions)
    vec = sum((_grad(c).to(torch.float64).sum(dim=1) for c, _ in uses), torch.zeros((), dtype=torch.float64))
    return (vec * vec).sum(dim=1)


def _parameter_edges(loss: torch.Tensor) -> Counter[int]:
    """How many graph edges lead into each leaf tensor (by id) from the operations that produced ``loss``."""
    edges: Counter[int] = Counter()
    seen: set[int] = set()
    stack = [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for child, _ in node.next_functions:
            variable = getattr(child, "variable", None)  # an AccumulateGrad node: a leaf's use
            if variable is not None:
                edges[id(variable)] += 1
            elif child is not None:
                stack.append(child)
    return edges


def _check_uses(
    params: list[torch.nn.Parameter],
    owners: dict[int, list[tuple[torch.nn.Module, str]]],
    calls_of: dict[int, list[_Call]],
    edges: Counter[int],
) -> None:
    """Every use of a parameter in the graph is one call of a module that holds it, seen by the hooks (one edge
    per call; none for a call where the graph starts). A use elsewhere, a parameter used outside any module
    call or inside a module's call more than once, would be missing from the norms: refused."""
    for p in params:
        seen = sum(1 for m, _ in owners[id(p)] for c in calls_of.get(id(m), []) if not c.starts)
        if edges.get(id(p), 0) != seen:
            raise Unsupported(
                f"a parameter of shape {tuple(p.shape)} is used {edges.get(id(p), 0)} times in the graph, "
                f"{seen} of them through the module calls the hooks saw"
            )


def per_sample_sq_norms(
    model: torch.nn.Module,
    ids: torch.Tensor,
    mask: torch.Tensor,
    loss_fn: LossFn,
    **forward: Any,
) -> list[list[float]]:
    """For each row of the right-padded batch, the squared 2-norm of each used parameter's loss gradient
    (``loss_fn(logits, offset)``: one loss per row); parameters the loss does not reach are left out, as
    ``torch.autograd.grad(..., allow_unused=True)`` leaves them out."""
    params = list(model.parameters())
    owners = _owners(model)
    modules = list({id(m): m for uses in owners.values() for m, _ in uses}.values())
    for m in modules:
        if isinstance(m, torch.nn.Embedding) and (m.max_norm is not None or m.scale_grad_by_freq or m.sparse):
            raise Unsupported(f"embedding {m} renormalises or scales its gradient")
    recorder = _Recorder(modules, int(ids.shape[0]))
    try:
        # The parameters take part in the graph (so it shows every use of them) but the backward computes only
        # the activations' gradients: ``inputs`` names the graph's starts, never a parameter.
        with grad_required(params, True), torch.enable_grad():
            logits = model(input_ids=ids, attention_mask=mask, use_cache=False, **forward).logits
            if not recorder.leaves:
                raise Unsupported("no embedding module starts the graph")
            loss = loss_fn(logits, ids.shape[1] - logits.shape[1]).sum()
            edges = _parameter_edges(loss)
            torch.autograd.backward(loss, inputs=recorder.leaves)
        recorder.active = False
        calls_of: dict[int, list[_Call]] = {}
        for call in recorder.calls:
            if call.grad is not None:
                calls_of.setdefault(id(call.module), []).append(call)
        _check_uses(params, owners, calls_of, edges)
        columns = []
        grams: Grams = {}
        for p in params:
            uses = [(c, name) for m, name in owners[id(p)] for c in calls_of.get(id(m), [])]
            if uses:
                columns.append(_param_sq_norms(p, uses, grams))
    finally:
        recorder.close()
    table = (
        torch.stack(columns, dim=1)
        if columns
        else torch.zeros((ids.shape[0], 0), dtype=torch.float64, device=ids.device)
    )
    return [[float(v) for v in row] for row in table]


__all__ = ["LossFn", "Unsupported", "per_sample_sq_norms"]
