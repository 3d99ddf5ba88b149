"""The book's transformers models in one import.

``import semlm.models`` registers paper B's idea GPT (``model_type="idea_gpt"``) and paper A's fusion
and baseline models (``"semlm_fusion"``, ``"semlm_baseline"``) with ``AutoConfig`` and
``AutoModelForCausalLM``. ``import semlm`` alone is enough in practice: it arranges for this module to
be imported the first time transformers looks one of these model types up (see
:mod:`semlm._auto_registration`), so ``AutoModelForCausalLM.from_pretrained(folder)`` works after
``import semlm`` without loading torch at ``import semlm``. A saved folder also carries ``auto_map`` and
the model's source, so ``trust_remote_code=True`` loads it in a process without semlm.
"""

from semlm.fusion.model import BaselineLM, BaselineLMConfig, FusionLM, FusionLMConfig
from semlm.idea.model import IdeaGPTConfig, IdeaGPTForCausalLM

__all__ = ["BaselineLM", "BaselineLMConfig", "FusionLM", "FusionLMConfig", "IdeaGPTConfig", "IdeaGPTForCausalLM"]
