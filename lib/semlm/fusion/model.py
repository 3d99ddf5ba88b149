"""Baseline and semantic-fusion language models (semantic-fusion paper, Section 2, Eqs. 2-4).

Fusion injects the semantic vector s_t before the Transformer:

    u_t = W_s s_t                          (semantic projection)
    g_t = sigmoid(W_g [e_t ; s_t])         (Eq. 2, per-dimension gate)
    h_t = e_t + u_t + g_t * u_t            (Eq. 3: the semantic part is scaled by 1 + g_t in (1, 2))

and an auxiliary head reconstructs s_t from the last hidden state:
``s_hat_t = sigmoid(MLP(H_t))`` with MLP d -> max(64, 2F) -> F. The LM head stays
tied to the input embedding because the fused input keeps width d.

``gate=False`` is the ablation h_t = e_t + u_t (no gate), used by the leakage audit.

Both models are transformers ``PreTrainedModel``s (``FusionLMConfig`` / ``BaselineLMConfig``,
registered with ``AutoConfig`` and ``AutoModelForCausalLM``): ``save_pretrained`` /
``from_pretrained`` work, and ``generate()`` works in the causal setting, with a KV cache.
Building one from :func:`lm_config` draws exactly the weights the plain ``nn.Module`` drew
(PyTorch's defaults, then ``Backbone``'s encoder init): ``_init_weights`` touches no
parameter, it only refills the sinusoidal table that ``from_pretrained`` leaves empty.

Generation (``semlm.fusion.decoding.generate``, the book's decoder, runs through ``generate()``): the
fusion model reads a feature matrix computed from the tokens, so ``generate(ids, featurize=f)``
recomputes ``f(ids)`` for the whole prefix each step and feeds the rows of the positions the cache
has not seen. ``feature_controls=(columns, values)`` writes the controls into the newest position's
features only; the next step recomputes that position without them, so with a cache the newest
position is always re-run (two positions a step) and the cache holds exactly the states a decoder
re-reading the whole prefix would compute.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (AutoConfig, AutoModelForCausalLM, DynamicCache, GenerationConfig, GenerationMixin,
                          PreTrainedConfig, PreTrainedModel)
from transformers.utils import ModelOutput

# Relative imports on purpose: ``save_pretrained`` copies this file and the two it imports beside the
# weights (``auto_map``), so ``trust_remote_code=True`` loads a saved model without semlm installed.
from .backbone import Backbone, SinusoidalPositions
from .config import BackboneConfig
from .featurize import TableFeaturizer
from .fuzzy import NUM_FEATURES


@dataclass
class LMOutput(ModelOutput):
    loss: torch.Tensor | None = None                     # next-token CE, only when labels are given
    logits: torch.Tensor | None = None                   # [B, L, V]
    feature_pred: torch.Tensor | None = None             # [B, L, F] in (0, 1), fusion only
    hidden: torch.Tensor | None = None                   # [B, L, d]
    past_key_values: DynamicCache | None = None          # only when a cache was asked for
    aux_loss: torch.Tensor | None = None                 # Eq. 7, fusion only, when labels are given


def next_token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """transformers' causal-LM loss: the cross-entropy of the logits at t against ``labels`` at t + 1,
    averaged over the labels that are not -100. With labels = the input ids (pads set to -100) it is
    the book's LM term, ``label_smoothed_cross_entropy(logits, targets, scored)`` at epsilon 0."""
    return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten(), ignore_index=-100)


KINDS: tuple[str, ...] = ("baseline", "fusion")
#: Where a fusion model's features come from: outside ("") or its own synthetic feature bank ("synthetic").
FEATURIZERS: tuple[str, ...] = ("", "synthetic")


class FusionLMConfig(PreTrainedConfig, BackboneConfig):
    """The one config of paper A's models: the backbone's dimensions (inherited, so config.json stays flat),
    the model ``kind``, the number of features and whether Eq. 2's gate is on. Build it with :func:`lm_config`."""

    model_type = "semlm_fusion"
    attribute_map = {"hidden_size": "d_model", "num_hidden_layers": "n_layers",
                     "num_attention_heads": "n_heads", "max_position_embeddings": "max_positions"}

    kind: str = "fusion"
    n_features: int = NUM_FEATURES
    gate: bool = True
    #: "" (features come from outside: the book's featurizers) or "synthetic": the model holds paper A's synthetic
    #: feature bank (:class:`~semlm.fusion.featurize.TableFeaturizer`) and computes its own features (an export)
    featurizer: str = ""
    use_cache: bool = False      # forward() builds a cache only when asked; generate() asks
    tie_word_embeddings: bool = False  # the head is ``hidden @ embed.weight.T``, no separate weight to tie

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)  # transformers' own set-up; then the kind and the backbone's dimensions
        if self.kind not in KINDS:
            raise ValueError(f"unknown model kind {self.kind!r}; choose one of {', '.join(KINDS)}")
        if self.featurizer not in FEATURIZERS:
            raise ValueError(f"unknown featurizer {self.featurizer!r}; choose one of {FEATURIZERS}")
        self.check_dimensions()

    @property
    def backbone(self) -> BackboneConfig:
        """The dimensions alone (a view; e.g. for FLOP counts)."""
        return BackboneConfig(**{f.name: getattr(self, f.name) for f in fields(BackboneConfig)})


class BaselineLMConfig(FusionLMConfig):
    model_type = "semlm_baseline"

    kind: str = "baseline"


def lm_config(backbone: BackboneConfig, kind: str = "fusion", n_features: int = NUM_FEATURES,
              gate: bool = True) -> FusionLMConfig:
    """The config of a ``kind`` model ("baseline" or "fusion") on ``backbone``."""
    if kind not in KINDS:
        raise ValueError(f"unknown model kind {kind!r}; choose one of {', '.join(KINDS)}")
    target = BaselineLMConfig if kind == "baseline" else FusionLMConfig
    return target(**asdict(backbone), n_features=n_features, gate=gate)




class _SemanticLM(PreTrainedModel, GenerationMixin):
    """What both models share: the config, the (non-)initialisation, embeddings, the cache, generation."""

    config_class = FusionLMConfig
    base_model_prefix = "backbone"
    main_input_name = "input_ids"
    _no_split_modules = ["Block"]
    _supports_sdpa = True
    # The loss is a mean over the batch's labels: transformers' Trainer must average micro-batches itself
    # under gradient accumulation (it would otherwise expect a sum over num_items_in_batch from **kwargs).
    accepts_loss_kwargs = False
    kind = "fusion"

    def __init__(self, config: FusionLMConfig):
        if config.kind != self.kind:
            raise ValueError(f"{type(self).__name__} needs a config of kind {self.kind!r}, got {config.kind!r}; "
                             f"use build_model(config) to pick the class")
        super().__init__(config)
        self.backbone = Backbone(config)

    def _finish_init(self) -> None:
        self.post_init()
        self.generation_config = GenerationConfig(use_cache=True)

    @torch.no_grad()
    def _init_weights(self, module):
        """Keep PyTorch's and ``Backbone``'s initialisation (the cached runs were trained from it): touch no
        parameter; only refill the sinusoidal table, a non-persistent buffer ``from_pretrained`` leaves empty."""
        if isinstance(module, SinusoidalPositions):
            module.reset_table()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.backbone.embed

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.backbone.embed = value

    def get_output_embeddings(self) -> None:
        return None  # the head is the embedding itself (``Backbone.logits``)

    @staticmethod
    def _cache(past_key_values, use_cache: bool | None):
        use_cache = past_key_values is not None if use_cache is None else use_cache
        if not use_cache:
            return None
        return DynamicCache() if past_key_values is None else past_key_values

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, past_key_values=None,
                                      attention_mask: torch.Tensor | None = None, use_cache: bool | None = None,
                                      featurize=None, feature_controls=None, **kwargs) -> dict:
        """The positions ``forward`` must (re)compute, their features, and the cache.

        ``featurize`` maps ``[B, L]`` ids to ``[B, L, F]`` features (fusion only); ``feature_controls``
        is ``(columns, values)`` written into the newest position's features. Without a cache the whole
        prefix is re-read each step. Rows must share one length (no padding).
        """
        if attention_mask is not None and not bool(attention_mask.all()):
            raise ValueError("padded prompts are not supported by this model's generate(); give rows of one length")
        use_cache = bool(use_cache) and self.config.causal
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache()
        features = self._generation_features(input_ids, featurize, feature_controls)
        start = 0
        if use_cache:
            start = past_key_values.get_seq_length()
            if start and feature_controls is not None and features is not None:
                past_key_values.crop(-1)  # its newest position was computed with the controls: redo it without
                start -= 1
        inputs = {"input_ids": input_ids[:, start:], "use_cache": use_cache}
        if use_cache:
            inputs["past_key_values"] = past_key_values
        if features is not None:
            inputs["features"] = features[:, start:]
        return inputs

    def _generation_features(self, input_ids, featurize, feature_controls) -> torch.Tensor | None:
        if not self.uses_features:
            return None
        featurize = featurize or getattr(self, "featurizer", None)
        if featurize is None:
            raise ValueError("FusionLM.generate needs featurize= (ids [B, L] -> features [B, L, F]), "
                             "e.g. semlm.fusion.features.SyntheticFeatures(vocab)")
        features = featurize(input_ids)
        if feature_controls is not None:
            columns, values = feature_controls
            if len(columns):
                features[:, -1, columns] = values.to(features)
        return features


class BaselineLM(_SemanticLM):
    """The backbone alone: features, if given, are ignored."""

    uses_features = False
    config_class = BaselineLMConfig
    kind = "baseline"

    def __init__(self, config: BaselineLMConfig):
        super().__init__(config)
        self._finish_init()

    def forward(self, input_ids: torch.Tensor, features: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, past_key_values=None, use_cache: bool | None = None,
                return_dict: bool | None = None, labels: torch.Tensor | None = None, **kwargs) -> LMOutput:
        """``labels`` (optional, -100 = ignore) are the input ids, as in transformers' causal LMs: ``loss``
        is then :func:`next_token_loss`, so transformers' ``Trainer`` can train the model."""
        cache = self._cache(past_key_values, use_cache)
        hidden = self.backbone.encode(self.backbone.embed(input_ids), attention_mask, cache)
        logits = self.backbone.logits(hidden)
        loss = next_token_loss(logits, labels) if labels is not None else None
        return LMOutput(loss=loss, logits=logits, feature_pred=None, hidden=hidden, past_key_values=cache)


class FusionLM(_SemanticLM):
    """Backbone + gated semantic channel + auxiliary feature-reconstruction head."""

    uses_features = True

    def __init__(self, config: FusionLMConfig):
        super().__init__(config)
        config = self.config
        d, F = config.d_model, config.n_features
        self.semantic_projection = nn.Linear(F, d)             # W_s
        self.gate = nn.Linear(d + F, d) if config.gate else None  # W_g
        hidden = max(64, 2 * F)
        self.aux_head = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, F))
        # an exported synthetic model computes its own features (its tables are loaded with the weights)
        self.featurizer = (TableFeaturizer(config.vocab_size, config.pad_token_id or 0, F)
                           if config.featurizer == "synthetic" else None)
        self._finish_init()

    def attach_featurizer(self, tables, pad_id: int) -> "FusionLM":
        """Carry paper A's synthetic feature bank: ``tables`` (a book featurizer's word tables, e.g.
        ``SyntheticFeatures(vocab).tables``) become buffers saved with the weights, and ``forward`` and ``generate``
        compute the features themselves when none are given. Only the causal bank: it reads no future token."""
        self.config.featurizer, self.config.pad_token_id = "synthetic", pad_id
        self.featurizer = TableFeaturizer(self.config.vocab_size, pad_id, self.config.n_features).fill(tables)
        return self

    def fuse(self, embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        u = self.semantic_projection(features)
        if self.gate is None:
            return embeddings + u
        g = torch.sigmoid(self.gate(torch.cat([embeddings, features], dim=-1)))
        return embeddings + u + g * u

    def forward(self, input_ids: torch.Tensor, features: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, past_key_values=None, use_cache: bool | None = None,
                return_dict: bool | None = None, labels: torch.Tensor | None = None, **kwargs) -> LMOutput:
        """``features`` [B, L, F] are those of ``input_ids`` (the new positions when a cache holds the past).

        ``labels`` (optional, -100 = ignore) are the input ids, as in transformers' causal LMs: ``loss`` is
        then the next-token cross-entropy (:func:`next_token_loss`, the LM term of Eq. 5 without label
        smoothing), so transformers' ``Trainer`` can train the model. ``aux_loss`` is then Eq. 7, the
        feature reconstruction averaged over the non-pad positions of ``attention_mask``; it is not
        added to ``loss``, because its weight (and the smoothing and Eq. 8) are training settings:
        :class:`semlm.fusion.losses.FusionLoss` is the book's full objective.
        """
        if features is None and self.featurizer is not None:
            if past_key_values is not None and past_key_values.get_seq_length():
                raise ValueError("with a cache the new positions' features depend on the whole prefix: pass "
                                 "features= or use generate(), which computes them")
            features = self.featurizer(input_ids)
        if features is None:
            raise ValueError("FusionLM needs the semantic features of the inputs (features=[B, L, F])")
        if features.shape[:2] != input_ids.shape or features.shape[-1] != self.config.n_features:
            raise ValueError(
                f"features must have shape {tuple(input_ids.shape) + (self.config.n_features,)}, got {tuple(features.shape)}"
            )
        cache = self._cache(past_key_values, use_cache)
        hidden = self.backbone.encode(self.fuse(self.backbone.embed(input_ids), features), attention_mask, cache)
        logits, feature_pred = self.backbone.logits(hidden), torch.sigmoid(self.aux_head(hidden))
        loss = aux_loss = None
        if labels is not None:
            loss = next_token_loss(logits, labels)
            real = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).to(feature_pred.dtype)
            per_position = F.binary_cross_entropy(feature_pred, features.to(feature_pred.dtype),
                                                  reduction="none").mean(-1)
            aux_loss = (per_position * real).sum() / real.sum().clamp_min(1.0)
        return LMOutput(loss=loss, logits=logits, feature_pred=feature_pred, hidden=hidden, past_key_values=cache,
                        aux_loss=aux_loss)


def build_model(config: FusionLMConfig) -> _SemanticLM:
    return FusionLM(config) if config.kind == "fusion" else BaselineLM(config)


# ``import semlm`` imports this module on the first Auto lookup of "semlm_fusion" / "semlm_baseline".
AutoConfig.register(FusionLMConfig.model_type, FusionLMConfig, exist_ok=True)
AutoConfig.register(BaselineLMConfig.model_type, BaselineLMConfig, exist_ok=True)
AutoModelForCausalLM.register(FusionLMConfig, FusionLM, exist_ok=True)
AutoModelForCausalLM.register(BaselineLMConfig, BaselineLM, exist_ok=True)
for _config_class, _model_class in ((FusionLMConfig, FusionLM), (BaselineLMConfig, BaselineLM)):
    _config_class.register_for_auto_class()
    _model_class.register_for_auto_class("AutoModelForCausalLM")
