"""The idea gate as a ``LogitsProcessor``, its X-ray, and a loop mitigation (paper B, Sections 3.3, 5, 6.3).

``IdeaGateLogitsProcessor`` adds ``idea_gate(z_idea)`` of an idea-gated model to the scores of any
``generate()`` call; while attached it *is* that model's gate (the model's own gate is off, so it applies
once), reusing the idea logits of the decoded model's forward pass where it can. ``ConcentrationDecay``
(chapter 7) shrinks each sequence's gate strength as the idea head's top-k tokens already appear in the last
``window`` tokens; it touches no token's score, so it is not a repetition penalty. ``xray`` lists the tokens
whose log-probability the gate raises and lowers the most for a prompt (paper B's "X-Ray").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import LogitsProcessor

from semlm.idea.model import idea_gate


@dataclass(frozen=True)
class ConcentrationDecay:
    """alpha_t = alpha * (1 - c_t)^power, c_t = share of the top-``k`` idea tokens among the last ``window`` tokens."""

    top_k: int = 20
    window: int = 32
    power: float = 1.0

    def __post_init__(self):
        if self.top_k < 1 or self.window < 1 or self.power <= 0:
            raise ValueError(f"top_k and window must be >= 1 and power > 0, got {self.top_k}, {self.window}, "
                             f"{self.power}")

    def concentration(self, input_ids: torch.Tensor, idea_logits: torch.Tensor) -> torch.Tensor:
        """[B] in [0, 1]: how much of the current plan is made of tokens just generated."""
        B, V = idea_logits.shape
        recent = torch.zeros(B, V, dtype=torch.bool, device=idea_logits.device)
        recent.scatter_(1, input_ids[:, -self.window:], True)
        top = idea_logits.topk(min(self.top_k, V), dim=-1).indices
        return recent.gather(1, top).float().mean(-1)

    def strength(self, alpha: float, input_ids: torch.Tensor, idea_logits: torch.Tensor) -> torch.Tensor:
        return alpha * (1.0 - self.concentration(input_ids, idea_logits)).pow(self.power)


class IdeaGateLogitsProcessor(LogitsProcessor):
    """``(input_ids, scores) -> scores + gate``; stacks in a ``LogitsProcessorList`` like any processor."""

    def __init__(self, idea_model, alpha: float, decay: ConcentrationDecay | None = None):
        """The gate of ``idea_model`` (its ``beta``, variant and ``eps``) at strength ``alpha``."""
        if getattr(idea_model, "idea_head", None) is None:
            raise ValueError("IdeaGateLogitsProcessor needs a model with an idea head (config.idea_head=True)")
        self.model, self.alpha, self.decay = idea_model, float(alpha), decay
        self._captured: torch.Tensor | None = None
        self._hooks = (idea_model.idea_head.register_forward_hook(self._capture),
                       idea_model.register_forward_pre_hook(self._builtin_gate_off, with_kwargs=True))
        self.alphas: list[torch.Tensor] = []  # per-step strengths actually used (for the loop study)

    def _capture(self, module, inputs, output) -> None:
        self._captured = output[:, -1].detach()

    @staticmethod
    def _builtin_gate_off(module, args, kwargs):
        return args, {**kwargs, "alpha": 0.0}  # the processor applies the gate: the model's forward must not

    def remove(self) -> None:
        """Detach the hooks: the model gates its own logits again (call when done if the model lives on)."""
        for hook in self._hooks:
            hook.remove()

    def __enter__(self) -> "IdeaGateLogitsProcessor":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    @torch.no_grad()
    def idea_logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        captured, self._captured = self._captured, None
        if captured is not None and captured.shape[0] == input_ids.shape[0]:
            return captured
        window = self.model.config.n_positions
        out = self.model(input_ids[:, -window:].to(self.model.device))
        self._captured = None
        return out.idea_logits[:, -1]

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        idea = self.idea_logits(input_ids).to(scores.device)
        alpha = self.alpha
        if self.decay is not None:  # one strength per row
            alpha = self.decay.strength(self.alpha, input_ids, idea)
            self.alphas.append(alpha.detach().cpu())
            alpha, idea = alpha[:, None], idea.float()
        c = self.model.config
        return scores + idea_gate(idea, alpha, c.beta, c.gate_variant, c.eps).to(scores.dtype)


@torch.no_grad()
def xray(model, tokenizer, prompt: str, alpha: float | None = None, top: int = 10, candidates: int = 50) -> dict:
    """Tokens the gate boosts and suppresses most after ``prompt``: among the ``candidates`` likeliest next tokens
    of the gated (boosted) and ungated head (suppressed), ranked by log p_gated - log p_ungated (nats), with the
    raw gate; ``ideas``: the tokens of highest idea probability."""
    if model.idea_head is None:
        raise ValueError("xray needs an idea-gated model")
    model.eval()
    ids = tokenizer(prompt, return_tensors="pt").input_ids[:, -model.config.n_positions:].to(model.device)
    out = model(ids, alpha=alpha)
    token, gated, idea = out.token_logits[0, -1].float(), out.logits[0, -1].float(), out.idea_logits[0, -1].float()
    delta = torch.log_softmax(gated, -1) - torch.log_softmax(token, -1)
    gate = gated - token

    def rows(index):
        return [{"token": tokenizer.decode([i]), "id": int(i), "delta_logprob": float(delta[i]), "gate": float(gate[i]),
                 "p_idea": float(torch.sigmoid(idea[i])), "p_gated": float(torch.softmax(gated, -1)[i]),
                 "p_ungated": float(torch.softmax(token, -1)[i])} for i in index.tolist()]

    pool_up = gated.topk(candidates).indices
    pool_down = token.topk(candidates).indices
    boosted = pool_up[delta[pool_up].argsort(descending=True, stable=True)[:top]]
    suppressed = pool_down[delta[pool_down].argsort(stable=True)[:top]]
    return {"prompt": prompt, "boosted": rows(boosted), "suppressed": rows(suppressed),
            "ideas": rows(idea.topk(top).indices)}
