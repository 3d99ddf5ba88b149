"""Paper B, idea-gated Transformers (arXiv 2512.03343): the idea GPT (:mod:`~semlm.idea.model`), its
targets and loss (:mod:`~semlm.idea.targets`), the gate as a logits processor (:mod:`~semlm.idea.gate`),
the LoRA variant (:mod:`~semlm.idea.lora_model`) and the experiments (``*_experiment``).
"""
