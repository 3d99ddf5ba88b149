# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     notebook_metadata_filter: -jupytext.text_representation
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. The fuzzy feature bank
#
# *Paper A, Section 2 ("Fuzzy semantic features") and Appendix B.*
#
# Semantic fusion gives a small language model a second input stream: for every token,
# a vector of 22 interpretable predicates (is it a verb? is it a positive adjective? how
# strong is the intensifier before it?). Binary predicates are 0 or 1; graded ones are
# *fuzzy memberships*, degrees in (0, 1] of how close a scalar signal is to "low",
# "medium" or "high". This chapter builds that feature bank, draws it, and checks the
# property the rest of the book depends on: **the features at position t use only the
# tokens up to t**, so feeding them to a language model leaks nothing about the future.
#
# Everything here is imported from `semlm`; the notebook only calls it and draws.

# %% tags=["parameters"]
# "smoke" and "cpu" both run this chapter in seconds: it trains nothing
profile = "cpu"
seed = 111

# %% tags=["hide-input"]
import pandas as pd
import torch

from semlm import book, plots
from semlm.data import synthetic
from semlm.data.vocab import Vocabulary
from semlm.fusion import features, fuzzy
from semlm.fusion.features import CAUSAL, PUBLISHED, SyntheticFeatures

chapter = book.open("01_feature_bank", profile=profile, seed=seed)

# %% [markdown]
# ## Memberships
#
# A graded predicate compares a signal $x \in [0, 1]$ with a centre $c$ through a power
# kernel with bandwidth $\tau$:
#
# $$\mu(x; c, \tau) = 0.9^{|x - c| / \tau}, \qquad c \in \{0.2, 0.6, 1.0\}, \quad \tau = 0.35 .$$
#
# The three centres give a low / med / high *triplet*. Because the base is 0.9, the
# kernel decays slowly: even a point at the far end of the scale keeps a membership
# well above one half. The dotted lines mark the strengths the corpus gives its four
# intensifiers.

# %%
fig = plots.plot_memberships(marks=synthetic.INTENSITY)

# %%
strengths = {"(none)": 0.0, **synthetic.INTENSITY}
triplets = pd.DataFrame(
    fuzzy.triangular_memberships(list(strengths.values())),
    index=pd.Index(list(strengths), name="preceding word"),
    columns=["str_low", "str_med", "str_high"],
)
triplets.style.format("{:.3f}").background_gradient(cmap="Blues", axis=None)

# %% tags=["remove-cell"]
chapter.glue(mu_zero_low=float(triplets.loc["(none)", "str_low"]),
             mu_zero_high=float(triplets.loc["(none)", "str_high"]))

# %% [markdown]
# A word with no intensifier before it gets strength 0, yet its triplet is
# ({glue:text}`mu_zero_low:.3f`, ..., {glue:text}`mu_zero_high:.3f`): the channel
# never says "absent", it says "closest to low". The model has to learn what the
# small differences mean, which the auxiliary reconstruction loss of chapter 2 helps with.
#
# ## The 22 predicates
#
# The paper fixes the names and their order. Where it leaves a definition open we
# choose the simplest causal reading and say so (details in `semlm.fusion.features`):

# %%
bank = features.feature_bank_table()  # groups: features.FEATURE_GROUPS
bank

# %% [markdown]
# ## The semantic matrix of a sentence
#
# Stacking the per-token vectors gives the sentence's semantic matrix
# $S \in [0,1]^{L \times 22}$, the thing the fusion model reads next to the token
# embeddings. Below: one sentence from the training corpus and one with a second,
# coreferent clause. Read a row as "what the model is told about this token".

# %%
vocab = Vocabulary.build(synthetic.LEXICON)
featurize = SyntheticFeatures(vocab)


def semantic_matrix(words, featurizer=featurize):
    ids = torch.tensor(vocab.encode(words))
    return featurizer(ids).numpy(), vocab.decode(ids, skip_special=False)


one_clause = "Carol starts the model , extremely pleasant !".split()
two_clauses = (
    "Bob cooks the meal , slightly bad but he trains the task , very good ."
).split()
S, tokens = semantic_matrix(one_clause)
fig = plots.plot_semantic_matrix(S, tokens, title=" ".join(one_clause))

# %%
S2, tokens2 = semantic_matrix(two_clauses)
fig = plots.plot_semantic_matrix(S2, tokens2, title=" ".join(two_clauses))

# %% [markdown]
# Things to notice: the adjective rows light up `pos_high` or `neg_high`; the strength
# triplet moves on the row *after* an intensifier (the adjective it modifies);
# `coref_subject` fires on "he" because a name came earlier; `is_head` marks only the
# main clause's verb.
#
# ## Are the features causal?
#
# A feature vector is causal if changing any token after position $t$ leaves rows
# $0..t$ unchanged. We take two sentences that agree up to the final punctuation and
# compare their semantic matrices, first with our causal featurizer and then with the
# **published** featurizer, which reproduces the authors' `compute_semantics` in
# SemanticFusion.py: their "+0.2 strength when the sentence ends with '!'" rule, subject,
# head verb and object only at the fixed positions 1, 2 and 4 (the first clause), and their
# `is_noun`, which also counts "the", the conjunctions and the intensifiers. The first rule
# looks at the end of the sentence, so in the published setting every row can change when
# only the last word does.

# %%
sentence_a = "Alice reviews the paper , very good !".split()
sentence_b = "Alice reviews the paper , very good ?".split()
published = SyntheticFeatures(vocab, published=True)
diffs, tokens_ab, changed_at = features.future_change(
    {CAUSAL: featurize, PUBLISHED: published}, vocab, sentence_a, sentence_b
)
fig = plots.plot_future_sensitivity(diffs, tokens_ab, changed_at=changed_at)

# %%
prefix_change = {
    name: float(d[:changed_at].max()) for name, d in diffs.items()
}
pd.Series(
    prefix_change, name="largest change above the dashed line"
).to_frame()

# %% tags=["remove-cell"]
chapter.glue(causal_prefix_change=prefix_change[CAUSAL],
             published_prefix_change=prefix_change[PUBLISHED])

# %% [markdown]
# Above the dashed line (positions before the change) the causal featurizer's rows are
# identical: the largest difference is {glue:text}`causal_prefix_change:.3g`. The
# published featurizer changes the strength triplet of *every* row, by up to
# {glue:text}`published_prefix_change:.3f`, because the final "!" feeds back into all
# positions. A model trained on such features can read the sentence's ending before
# it gets there. Chapter 2 measures what that, together with the missing causal mask,
# does to perplexity.
#
# The same check runs over random sentences and every cut point in the test suite
# (`tests/fusion/test_features.py`), and over the model's logits in
# `tests/core/test_causality.py`.

# %% [markdown]
# ## Key numbers

# %%
pd.Series(
    {
        "features per token": fuzzy.NUM_FEATURES,
        "largest change before the edit, causal featurizer": prefix_change[
            CAUSAL
        ],
        "largest change before the edit, published featurizer": prefix_change[
            PUBLISHED
        ],
    },
    name="value",
).to_frame()

# %%
chapter.close(features.feature_bank_record(
    triplets=triplets, sentence_a=sentence_a, sentence_b=sentence_b,
    changed_at=changed_at, prefix_change=prefix_change))

# %% [markdown]
# ## Exercises
#
# Each exercise has a hint and a worked solution; open them only after trying.
#
# 1. **Bandwidth** (★ warm-up). In the memberships cell, pass `tau=0.1` and then
#    `tau=1.0` to `fuzzy.triangular_memberships` (the default is `fuzzy.TAU`,
#    0.35). How much does an unmodified adjective, the `(none)` row, still belong
#    to `str_high`? Which value makes the triplet close to one-hot?
#
#    <details><summary>Hint</summary>
#
#    The membership is $0.9^{|x - c| / \tau}$. For the `(none)` row $x = 0$ and
#    the `str_high` centre is $c = 1$, so its membership is $0.9^{1/\tau}$: a
#    smaller $\tau$ means a larger exponent.
#
#    </details>
#
#    <details><summary>Solution</summary>
#
#    ```python
#    for tau in (0.1, fuzzy.TAU, 1.0):
#        print(tau, fuzzy.triangular_memberships([0.0, 1.0], tau=tau).round(3))
#    ```
#    The first row of each array is the `(none)` word (strength 0), the second a
#    word after the strongest intensifier. With `tau=1.0` the `(none)` word
#    belongs to `str_high` with $0.9^1 = 0.9$ and all three memberships are
#    within about 0.1 of each other: the channel barely distinguishes strengths.
#    With `tau=0.1` it drops to $0.9^{10} \approx 0.35$ while `str_low` stays at
#    $0.9^2 = 0.81$, so the triplet is the closest of the three to one-hot, but
#    never one-hot: with base 0.9 no membership reaches 0. The paper's 0.35 sits
#    in between ($0.9^{1/0.35} \approx 0.74$).
#
#    </details>
#
# 2. **Your own sentence** (★★ explore). Call `semantic_matrix(words)` on a
#    two-clause sentence of your own, with words from `synthetic.LEXICON`, e.g.
#    `"Eve reviews the paper , very poor and she starts the task .".split()`.
#    At which token do `is_pronoun` and `coref_subject` switch on, and does any
#    row depend on a word that comes later?
#
#    <details><summary>Hint</summary>
#
#    `semantic_matrix` returns the matrix and the token labels (with `<bos>` and
#    `<eos>`); `fuzzy.FEATURE_NAMES` names the 22 columns. To test "depends on
#    a later word", featurize every prefix of the sentence and compare its rows
#    with the same rows of the full sentence.
#
#    </details>
#
#    <details><summary>Solution</summary>
#
#    ```python
#    import numpy as np
#
#    words = "Eve reviews the paper , very poor and she starts the task .".split()
#    S3, tokens3 = semantic_matrix(words)
#    frame = pd.DataFrame(S3, index=tokens3, columns=fuzzy.FEATURE_NAMES)
#    print(frame[["is_pronoun", "coref_subject"]])
#    # rows 0..k (<bos> and k words) of a prefix must equal the full sentence's
#    print(all(
#        np.array_equal(semantic_matrix(words[:k])[0][: k + 1], S3[: k + 1])
#        for k in range(1, len(words) + 1)
#    ))
#    ```
#    Both columns are 0 everywhere except on "she": the pronoun is flagged, and
#    because a name ("Eve") came earlier it is marked as referring to the
#    subject. The check prints `True`: every row of every prefix equals the row
#    of the full sentence, so no row depends on a later word. (The `<eos>` row of
#    a prefix is left out of the comparison: it is not a word of the sentence.)
#
#    </details>
#
# 3. **Break causality on purpose** (★★ explore). Change `sentence_b` so that it
#    differs from `sentence_a` in an earlier word. The causal featurizer's
#    difference must stay exactly 0 before the edit; count the columns and tokens
#    where the published featurizer (`SyntheticFeatures(vocab, published=True)`)
#    changes.
#
#    <details><summary>Hint</summary>
#
#    `features.future_change` returns the per-featurizer differences, the token
#    labels and `changed_at`, the first changed row. Look at the rows *before*
#    `changed_at`, and try an edit that keeps the final "!" as well as one that
#    changes it.
#
#    </details>
#
#    <details><summary>Solution</summary>
#
#    ```python
#    import numpy as np
#
#    for b in ("Bob reviews the paper , very good !",
#              "Alice reviews the paper , very bad !",
#              "Alice reviews the paper , very good ."):
#        diffs_b, _, at = features.future_change(
#            {CAUSAL: featurize, PUBLISHED: published},
#            vocab, sentence_a, b.split(),
#        )
#        moved = diffs_b[PUBLISHED][:at] > 0
#        print(b, "| causal:", diffs_b[CAUSAL][:at].max(),
#              "| published rows:", moved.any(1).sum(), "columns:",
#              [fuzzy.FEATURE_NAMES[j] for j in np.flatnonzero(moved.any(0))])
#    ```
#    The causal featurizer's difference before the edit is 0 for every edit. The
#    published one is also unchanged before an edit that keeps the final "!":
#    its fixed positions and its `is_noun` read no later word. Only the edit of
#    the final punctuation moves earlier rows, and then it moves every row, in
#    the three strength columns `str_low`, `str_med`, `str_high`: the
#    sentence-final "!" rule is the one place where the published features read
#    ahead.
#
#    </details>
