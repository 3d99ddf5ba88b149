"""A word-level vocabulary with the three special tokens the synthetic task needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
SPECIALS = (PAD, BOS, EOS)


@dataclass(frozen=True)
class Vocabulary:
    tokens: tuple[str, ...]

    @classmethod
    def build(cls, words: Iterable[str]) -> "Vocabulary":
        """Specials first, then the words sorted (deterministic ids whatever the input order)."""
        rest = sorted(set(words) - set(SPECIALS))
        return cls(tokens=SPECIALS + tuple(rest))

    def __post_init__(self):
        object.__setattr__(self, "_index", {t: i for i, t in enumerate(self.tokens)})

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._index

    @property
    def pad_id(self) -> int:
        return self._index[PAD]

    @property
    def bos_id(self) -> int:
        return self._index[BOS]

    @property
    def eos_id(self) -> int:
        return self._index[EOS]

    def id(self, token: str) -> int:
        try:
            return self._index[token]
        except KeyError:
            raise ValueError(f"word {token!r} is not in the vocabulary ({len(self)} tokens)") from None

    def ids(self, tokens: Iterable[str]) -> list[int]:
        return [self.id(t) for t in tokens]

    def encode(self, words: Sequence[str]) -> list[int]:
        """``<bos> words <eos>`` as ids."""
        return [self.bos_id] + self.ids(words) + [self.eos_id]

    def hf_tokenizer(self):
        """This vocabulary as a transformers ``PreTrainedTokenizerFast``: a word-level model (one id per word of
        :attr:`tokens`; a word it does not hold is an error), words split at spaces and punctuation, ``<bos>``
        put first as in training, and ``decode`` attaching punctuation to the word before it."""
        from tokenizers import Tokenizer, models, pre_tokenizers, processors
        from transformers import PreTrainedTokenizerFast

        core = Tokenizer(models.WordLevel(dict(self._index)))
        core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                      pre_tokenizers.Punctuation("isolated")])
        core.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A $B",
                                                            special_tokens=[(BOS, self.bos_id)])
        return PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                       clean_up_tokenization_spaces=True)

    def decode(self, ids: Iterable[int], skip_special: bool = True) -> list[str]:
        out = [self.tokens[int(i)] for i in ids]
        return [t for t in out if t not in SPECIALS] if skip_special else out


def detokenize(words: Sequence[str]) -> str:
    """Join words, attaching punctuation to the previous word: ``Bob cooks the meal, very good.``"""
    out: list[str] = []
    for w in words:
        if w in {".", ",", "!", "?"} and out:
            out[-1] += w
        else:
            out.append(w)
    return " ".join(out)
