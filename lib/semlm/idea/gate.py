"""The gate's X-ray (paper B, Section 5): the tokens whose log-probability the gate raises and lowers the most.

The gate itself is :class:`semlm.idea.model.IdeaGate`, applied by the model; chapter 7's decaying gate is an
``IdeaGate`` with a :class:`~semlm.idea.model.ConcentrationDecay`, passed to ``generate(gate=...)``.
"""

from __future__ import annotations

import torch


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
