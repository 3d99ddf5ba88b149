"""An idea head and gate on any frozen causal LM, trained through LoRA (paper B, Sections 3 and 4.2).

Paper B's second setting keeps a pretrained Mistral-7B frozen (in 4-bit NF4), adds rank-8 LoRA adapters to
the attention's query and value projections, and puts the Idea Head on the backbone's last hidden state:

    z_token = W_lm h_t                                  the backbone's own (frozen) logits
    z_idea  = W_2 ReLU(W_1 h_t)                         Idea Head, d -> d -> V
    z_final = z_token + G(log(sigmoid(z_idea) + eps))   gate G of ``semlm.idea.model.IdeaGate``

:class:`LoraIdeaModel` wraps any ``AutoModelForCausalLM``; a forward hook on its output embedding (whose
input *is* the last hidden state) applies the gate in training, evaluation and ``generate()`` alike. The
capacity control (``output_adapter=True``) is the baseline plus a zero-initialised trainable adapter of the
idea head's shape, trained on the token loss alone. ``quantization="nf4"``: bitsandbytes NF4 (on CUDA with
double quantisation and bf16 compute, on CPU float32 compute). The wrapper has the interface of
``IdeaGPTForCausalLM`` that ``semlm.idea.gate.xray`` and the chapters use.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from semlm.idea.profiles import LoraSettings
from semlm.idea.model import IdeaGate, IdeaGPTOutput, check_gate_variant, quiet_transformers

QUANTIZATIONS: tuple[str, ...] = ("none", "nf4")


# bitsandbytes logs, on import, that an optional faster CPU kernel package is not installed; harmless here
logging.getLogger("bitsandbytes.backends.cpu.ops").addFilter(
    lambda record: not str(record.msg).startswith("Failed to load CPU gemm_4bit_forward"))


def head_mlp(d: int, vocab: int, zero_output: bool = False) -> nn.Sequential:
    """The idea head's shape, Linear(d, d) -> ReLU -> Linear(d, V); ``zero_output`` zeroes the last layer
    (the capacity control's output adapter then adds nothing until it trains)."""
    mlp = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, vocab))
    if zero_output:
        nn.init.zeros_(mlp[2].weight)
        nn.init.zeros_(mlp[2].bias)
    return mlp


@dataclass
class LoraIdeaConfig:
    """What the wrapper adds to a backbone."""

    idea_head: bool = True
    gate_variant: str = "scale_then_clamp"   # v2, the paper's equation (the authors' Mistral run)
    alpha: float = 0.5                       # gate strength at inference (training ramps up to it)
    beta: float = -2.0
    eps: float = 1e-8
    n_positions: int = 512                   # longest input the helpers feed (block size)
    quantization: str = "none"
    lora: LoraSettings | None = field(default_factory=LoraSettings)
    output_adapter: bool = False             # the capacity control: d -> d -> V added to the logits, no gate

    def __post_init__(self):
        check_gate_variant(self.gate_variant)
        check_quantization(self.quantization)
        if self.idea_head and self.output_adapter:
            raise ValueError("choose idea_head=True (the gated model) or output_adapter=True (its capacity "
                             "control), not both")
        if self.alpha < 0 or self.beta > 0 or self.n_positions < 1:
            raise ValueError(f"need alpha >= 0, beta <= 0 and n_positions >= 1; got {self.alpha}, {self.beta}, "
                             f"{self.n_positions}")


def check_quantization(quantization: str) -> str:
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {quantization!r}; choose one of: {', '.join(QUANTIZATIONS)}")
    return quantization


def load_backbone(name_or_path: str | Path, quantization: str = "none", device: str | torch.device | None = None):
    """``AutoModelForCausalLM.from_pretrained`` in full precision or 4-bit NF4 (on CUDA the authors' double
    quantisation and bf16 compute, on a CPU float32 compute), every weight frozen. On a CPU the 4-bit layers keep
    dequantise-and-matmul: bitsandbytes' AVX512-BF16 inference kernel has no backward, and LoRA adapters below
    it would silently stop learning after the first validation pass."""
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cuda, config = device.type == "cuda", None
    if check_quantization(quantization) == "nf4":
        config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=cuda,
                                    bnb_4bit_compute_dtype=torch.bfloat16 if cuda else torch.float32)
    with quiet_transformers():
        if config is None:
            model = AutoModelForCausalLM.from_pretrained(str(name_or_path), dtype=torch.float32).to(device)
        elif cuda:
            model = AutoModelForCausalLM.from_pretrained(str(name_or_path), quantization_config=config,
                                                         device_map={"": device.index or 0})
        else:
            model = AutoModelForCausalLM.from_pretrained(str(name_or_path), quantization_config=config).to("cpu")
    if config is not None and not cuda:
        for module in model.modules():
            if hasattr(module, "support_avx512bf16_for_cpu"):
                module.support_avx512bf16_for_cpu = False
    model.requires_grad_(False)
    return model.eval()


class LoraIdeaModel(nn.Module):
    """Frozen backbone + LoRA adapters (peft) + optional Idea Head and gate."""

    def __init__(self, backbone, config: LoraIdeaConfig | None = None):
        super().__init__()
        self.config = config or LoraIdeaConfig()
        backbone.requires_grad_(False)
        if self.config.lora is not None:
            from peft import get_peft_model

            with warnings.catch_warnings():  # peft reads a deprecated transformers attribute on 4-bit models
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
                backbone = get_peft_model(backbone, self.config.lora.peft_config())
        self.backbone = backbone
        token_head = backbone.get_output_embeddings()
        if token_head is None or not isinstance(token_head, nn.Linear):
            raise ValueError(f"{type(backbone).__name__} has no linear output embedding (token head) to gate")
        d, vocab = token_head.in_features, token_head.out_features
        device = token_head.weight.device
        self.idea_head = head_mlp(d, vocab).to(device) if self.config.idea_head else None
        self.output_adapter = head_mlp(d, vocab, zero_output=True).to(device) if self.config.output_adapter else None
        self._gate = self.gate  # the gate of the call under way (the hook applies it inside the backbone's forward)
        self._captured: dict = {}
        hooked = self.idea_head is not None or self.output_adapter is not None
        self._hook = token_head.register_forward_hook(self._gate_token_head) if hooked else None

    # -- the gate (or the control's adapter), applied where the token head runs -------------
    def _gate_token_head(self, module, inputs, token_logits):
        hidden = inputs[0]
        if self.output_adapter is not None:
            adapter = self.output_adapter(hidden.to(self.output_adapter[0].weight.dtype))
            return token_logits + adapter.to(token_logits.dtype)
        idea_logits = self.idea_head(hidden.to(self.idea_head[0].weight.dtype))
        self._captured = {"token_logits": token_logits, "idea_logits": idea_logits}
        if self._gate.off:
            return token_logits
        return token_logits + self._gate.apply(idea_logits).to(token_logits.dtype)

    @property
    def gate(self) -> IdeaGate:
        """The wrapper's own gate, from its config."""
        return IdeaGate.of(self.config)

    def _call_gate(self, gate: IdeaGate | None, alpha: float | None) -> IdeaGate:
        gate = self.gate if gate is None else gate
        return gate if alpha is None else gate.with_alpha(alpha)

    @property
    def device(self) -> torch.device:
        return self.backbone.get_output_embeddings().weight.device

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                alpha: float | None = None, gate: IdeaGate | None = None, **kwargs) -> IdeaGPTOutput:
        """Gated logits (``logits``), the backbone's ``token_logits`` and ``idea_logits``; ``gate`` replaces the
        wrapper's own, ``alpha`` its strength (training ramps it; 0 gives the ungated logits)."""
        self._gate = self._call_gate(gate, alpha)
        self._captured = {}
        try:
            out = self.backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **kwargs)
        finally:
            self._gate = self.gate
        captured, self._captured = self._captured, {}
        return IdeaGPTOutput(logits=out.logits, token_logits=captured.get("token_logits", out.logits),
                             idea_logits=captured.get("idea_logits"))

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, alpha: float | None = None, gate: IdeaGate | None = None,
                 **kwargs) -> torch.Tensor:
        """The backbone's ``generate()`` with the gate in its logits (``gate``, or the wrapper's at ``alpha``)."""
        self._gate = self._call_gate(gate, alpha)
        if self._gate.decay is not None:
            raise ValueError("a decaying gate needs the idea-gated GPT's generate(); the LoRA wrapper gates at one "
                             "strength")
        try:
            return self.backbone.generate(input_ids=input_ids, **kwargs)
        finally:
            self._gate = self.gate
            self._captured = {}

    # -- what trains ---------------------------------------------------------------------------
    def trainable_parameters(self) -> dict[str, nn.Parameter]:
        return {name: p for name, p in self.named_parameters() if p.requires_grad}

    def trainable_parameter_counts(self) -> dict[str, int]:
        """Trainable parameters by group: ``lora``, ``idea_head``, ``output_adapter`` (the capacity control's)
        and ``other`` (0 by construction)."""
        counts = {"lora": 0, "idea_head": 0, "output_adapter": 0, "other": 0}
        for name, p in self.trainable_parameters().items():
            head = name.split(".")[0]
            group = head if head in ("idea_head", "output_adapter") else "lora" if ".lora_" in name else "other"
            counts[group] += p.numel()
        return counts

    def frozen_parameter_count(self) -> int:
        """Backbone parameters (a 4-bit weight counts its packed elements, two weights per byte)."""
        return sum(p.numel() for p in self.parameters() if not p.requires_grad)
