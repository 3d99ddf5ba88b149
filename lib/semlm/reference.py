"""Numbers reported in the papers, for side-by-side tables. Never results of this build.

Semantic fusion (arXiv 2509.13357): Table 1 (synthetic, validation), Section 3.2 text
(validation PPL at epochs 1, 3, 4 and 6), Table 6 (focus-token CE, nats).
All of them come from the published, non-causal setting (see chapter 2).
"""

PAPER_A_TABLE1 = {
    "baseline": {"ppl": 2.249, "ppl_seen_only": 1.511},
    "fusion": {"ppl": 2.152, "ppl_seen_only": 1.431, "sem_mse": 0.0087},
}

PAPER_A_VAL_PPL_BY_EPOCH = {
    "baseline": {1: 8.346, 6: 2.249},
    "fusion": {1: 5.474, 3: 2.208, 4: 2.213, 6: 2.152},
}

PAPER_A_FOCUS_CE = {
    "baseline": {"good": 0.00258, "great": 6.86868, "terrible": 7.02154, "slightly": 0.00309,
                 "very": 0.00277, "!": 4.42129, "?": 3.94640, ",": 0.00293},
    "fusion": {"good": 0.00177, "great": 8.94856, "terrible": 6.98764, "slightly": 0.00254,
               "very": 0.00191, "!": 2.88172, "?": 2.91456, ",": 0.00354},
}

#: Tables 2 and 4 (hard control with the fusion generator, N = 200 per setting) and the
#: mixture weight each OOD number was measured with.
PAPER_A_HARD_CONTROL = {"pos": {"adj_acc": 1.0, "punct_acc": 1.0}, "neg": {"adj_acc": 1.0, "punct_acc": 1.0}}
PAPER_A_OOD_HIT = {"pos": 0.62, "neg": 0.43}
PAPER_A_OOD_ALPHA = {"pos": 0.97, "neg": 0.85}


#: Idea-gated Transformers (Fofadiya, arXiv 2512.03343). Two settings, never to be mixed up:
#: (1) the authors' v1 GPT (6 x 384) trained on WikiText-103 (their train.py / evaluate.py at
#: github.com/DarshanFofadiya/idea-gated-transformers): the paper's Table 1 and the repository README's
#: stickiness table; (2) Mistral-7B + LoRA on FineWeb-Edu (their later train.py): the validation
#: perplexities below. Chapters 6-7 rebuild setting (1), chapter 8 setting (2).

#: Setting (2): validation perplexity of Mistral-7B + LoRA on FineWeb-Edu, gated vs baseline.
PAPER_B_VAL_PPL = {"baseline": 8.07, "gated": 7.78}

#: Setting (1), the README of the authors' repository: stickiness (domain hits / content words of prompt
#: + continuation) of the WikiText-103 GPTs in the four domains of their evaluate.py.
PAPER_B_STICKINESS = {"chemistry": {"baseline": 0.082, "gated": 0.103}, "hardware": {"baseline": 0.008, "gated": 0.012},
                      "medicine": {"baseline": 0.039, "gated": 0.048}, "finance": {"baseline": 0.052, "gated": 0.045}}

#: Setting (1), the paper's Table 1 (60 samples per domain): density (distinct domain terms per 100
#: tokens), stickiness and diversity (distinct-2) of baseline and gated WikiText-103 GPTs.
PAPER_B_TABLE1 = {
    "finance": {"baseline": {"density": 3.05, "stickiness": 0.052, "distinct_2": 0.99},
                "gated": {"density": 2.70, "stickiness": 0.045, "distinct_2": 0.99}},
    "war": {"baseline": {"density": 5.10, "stickiness": 0.087, "distinct_2": 0.99},
            "gated": {"density": 4.85, "stickiness": 0.083, "distinct_2": 0.99}},
    "chemistry": {"baseline": {"density": 5.30, "stickiness": 0.082, "distinct_2": 0.99},
                  "gated": {"density": 6.15, "stickiness": 0.103, "distinct_2": 0.99}},
    "hardware": {"baseline": {"density": 0.55, "stickiness": 0.008, "distinct_2": 0.99},
                 "gated": {"density": 0.75, "stickiness": 0.012, "distinct_2": 0.99}},
}

#: Setting (1), the four evaluation domains of the authors' evaluate.py: one prompt and a word list each
#: (their "Tech" domain is the README's "hardware"). Used by semlm.idea.generation.authors_protocol.
PAPER_B_EVAL_DOMAINS = {
    "medicine": {"prompt": "The patient was diagnosed with",
                 "terms": ("symptom disease infection chronic acute syndrome disorder therapy treatment diagnosis "
                           "prognosis clinical physician surgery tumor cancer lesion tissue artery vein pulmonary "
                           "cardiac respiratory vascular intravenous").split()},
    "chemistry": {"prompt": "The chemical reaction of the acid with the solution produced",
                  "terms": ("acid base solution reaction oxide hydrogen carbon oxygen mixture compound temperature "
                            "celsius dissolved synthesis molecule atom bond structure organic liquid gas solid "
                            "experiment laboratory").split()},
    "hardware": {"prompt": "The central processing unit is connected to the",
                 "terms": ("cpu ram memory data processor hardware software system interface bus network digital "
                           "input output device computer chip circuit").split()},
    "finance": {"prompt": "The stock market is",
                "terms": ("money price cost dollar value trade business economy rate percent bank profit loss share "
                          "exchange market revenue sales investment").split()},
}

#: Table 7 (SST-2, validation), published (non-causal) setting.
PAPER_A_TABLE7 = {
    "baseline": {"ppl": 3.885},
    "fusion": {"ppl": 1.111, "sem_mse": 0.0039, "adj_ctrl_acc": 1.00, "punct_ctrl_acc": 1.00},
}


# --- the papers' effects, as ratios or differences of the numbers above (the rules' smallest effects of interest
# are half of these, semlm.book.claims) ----------------------------------------------------------------------

#: Paper A, Table 1: fusion's relative seen-only PPL gain over the baseline, 1 - 1.431 / 1.511 (5.3%).
PAPER_A_SEEN_PPL_GAIN = 1 - PAPER_A_TABLE1["fusion"]["ppl_seen_only"] / PAPER_A_TABLE1["baseline"]["ppl_seen_only"]

#: Paper A, Table 6: the drop of each focus token's cross-entropy from the baseline to fusion, nats.
PAPER_A_FOCUS_CE_DROP = {token: PAPER_A_FOCUS_CE["baseline"][token] - PAPER_A_FOCUS_CE["fusion"][token]
                         for token in ("!", "?")}

#: Paper B, Table 1: the gated - baseline stickiness averaged over its four domains (+0.35 points) over the
#: baseline's domain mean (5.725%): a relative gain of 6.1%.
PAPER_B_STICKINESS_GAIN = (sum(d["gated"]["stickiness"] - d["baseline"]["stickiness"] for d in PAPER_B_TABLE1.values())
                           / sum(d["baseline"]["stickiness"] for d in PAPER_B_TABLE1.values()))

#: Paper B, the LoRA setting: the gated model's relative validation-PPL gain, 1 - 7.78 / 8.07 (3.6%).
PAPER_B_LORA_PPL_GAIN = 1 - PAPER_B_VAL_PPL["gated"] / PAPER_B_VAL_PPL["baseline"]
