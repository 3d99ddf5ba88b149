"""The one-clause finite-state grammar of semantic-fusion decoding (paper A, Section 2).

    SUBJ -> VERB -> "the" -> OBJ -> "," -> INTENS -> ADJ -> PUNCT -> (end)

Every state consumes exactly one word, so the state of a sequence is its length: a
sequence of ``<bos>`` plus n words is in state n. That keeps the grammar mask a pure,
batched function of ``input_ids``, in the ``(input_ids, scores) -> scores`` shape of
transformers' ``LogitsProcessor``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from transformers import LogitsProcessor

from semlm.data import synthetic as syn
from semlm.data.vocab import Vocabulary

STATES: tuple[str, ...] = ("SUBJ", "VERB", "THE", "OBJ", "COMMA", "INTENS", "ADJ", "PUNCT", "END")
SUBJ, VERB, THE, OBJ, COMMA, INTENS, ADJ, PUNCT, END = range(len(STATES))

_WORDS_FOR_STATE = {
    SUBJ: syn.SUBJECTS, VERB: syn.VERBS, THE: ("the",), OBJ: syn.OBJECTS, COMMA: (",",),
    INTENS: syn.INTENSIFIERS, ADJ: syn.POSITIVE_ADJECTIVES + syn.NEGATIVE_ADJECTIVES, PUNCT: syn.END_PUNCTUATION,
}
_PROMPT_TOKEN = re.compile(r"[A-Za-z]+|[.,!?]|\S")


@dataclass(frozen=True)
class ParsedPrefix:
    words: tuple[str, ...]
    state: int


class ClauseGrammar:
    """Allowed words per state, as a boolean table ``[n_states, V]`` (END allows only <eos>).

    ``offset`` is the number of tokens between ``<bos>`` and the clause: the control codes
    of a CTRL-style model (``<bos> <pos> <!> Alice ...``) shift every state by it.
    """

    def __init__(self, vocab: Vocabulary, offset: int = 0):
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self.vocab = vocab
        self.offset = offset
        allowed = torch.zeros(len(STATES), len(vocab), dtype=torch.bool)
        for state, words in _WORDS_FOR_STATE.items():
            allowed[state, vocab.ids(words)] = True
        allowed[END, vocab.eos_id] = True
        self.allowed = allowed

    def words(self, state: int) -> tuple[str, ...]:
        return tuple(_WORDS_FOR_STATE.get(state, ("<eos>",)))

    def state_of(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[B] state of each row: words after <bos> (and the codes), capped at END (all rows share one length)."""
        n_words = max(input_ids.shape[-1] - 1 - self.offset, 0)
        return torch.full(input_ids.shape[:-1], min(n_words, END), dtype=torch.long, device=input_ids.device)

    def parse_prefix(self, text: str) -> ParsedPrefix:
        """Validate a prompt such as ``"Carol starts the model,"``; return its words and the next state.

        Raises one ``ValueError`` naming the first offending word and what the grammar expected there.
        """
        tokens = _PROMPT_TOKEN.findall(text)
        words: list[str] = []
        for position, raw in enumerate(tokens, start=1):
            word = raw if raw in syn.SUBJECTS else raw.lower()
            state = len(words)
            if state >= END:
                raise ValueError(f"prompt {text!r} goes past the end of the clause at word {position} ({raw!r}); "
                                 f"a prompt can cover at most one clause ending in . ! or ?")
            expected = self.words(state)
            if word not in self.vocab:
                raise ValueError(f"prompt word {position} {raw!r} is not in the vocabulary; "
                                 f"the grammar expects {STATES[state]} here: one of {', '.join(expected)}")
            if word not in expected:
                raise ValueError(f"prompt word {position} {raw!r} does not fit the grammar; "
                                 f"expected {STATES[state]}: one of {', '.join(expected)}")
            words.append(word)
        return ParsedPrefix(tuple(words), len(words))

    def parses(self, words) -> bool:
        """Whether ``words`` is a complete clause of the grammar."""
        words = list(words)
        return len(words) == END and all(w in self.words(state) for state, w in enumerate(words))


class GrammarMask(LogitsProcessor):
    """LogitsProcessor: -inf for every word the grammar does not allow in the row's state."""

    def __init__(self, grammar: ClauseGrammar):
        self.grammar = grammar

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        allowed = self.grammar.allowed.to(scores.device)[self.grammar.state_of(input_ids)]
        return scores.masked_fill(~allowed, float("-inf"))
