"""Stickiness prompts chosen by a rule, not written by hand (issue 45, item 1).

For each of the book's stickiness domains (``semlm/data/domains``), walk WikiText-2's *test* split in order, cut
every paragraph into sentences at `` . ``, and keep the first ``per_domain`` sentences in which a domain term
appears after ``min_words`` to ``max_words`` words (words: tokens holding a letter or digit), with no ``<unk>``
before it and no term of any stickiness domain before it; the prompt is the sentence cut just before that term.
The models never trained on the test split, and the prompt stops where the domain's own word would come, so a
model keeps the domain only if its continuation goes there.

The prompts are not committed (they are text of the dataset, which stays outside the repository): they are
rebuilt from the pinned data file at every run, and :func:`prompts_digest` (a SHA-256 of the chosen prompts) is
what a registration freezes and every recorded seed carries.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence

from semlm.data.paths import dataset_file

#: the rule's settings, frozen with the registration that uses them
PER_DOMAIN = 12
MIN_WORDS, MAX_WORDS = 5, 8

_WORD = re.compile(r"[A-Za-z0-9]")


def rule_prompts(lines: Iterable[str], terms: Mapping[str, Sequence[str]], per_domain: int = PER_DOMAIN,
                 min_words: int = MIN_WORDS, max_words: int = MAX_WORDS) -> dict[str, list[str]]:
    """``{domain: prompts}``: the first ``per_domain`` qualifying sentences of ``lines`` per domain (see the
    module's docstring); each prompt keeps WikiText's spacing and gets the leading space every WikiText line has.
    A sentence serves the domain of its first term only. Raises if a domain gets fewer than ``per_domain``."""
    vocab = {domain: {t.lower() for t in words} for domain, words in terms.items()}
    every = set().union(*vocab.values())
    chosen: dict[str, list[str]] = {domain: [] for domain in vocab}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("="):  # blank lines and section headings
            continue
        for sentence in line.split(" . "):
            tokens, words = sentence.split(), 0
            for i, token in enumerate(tokens):
                low = token.lower()
                if low in every:
                    if min_words <= words <= max_words:
                        domain = next(d for d, v in vocab.items() if low in v)
                        if len(chosen[domain]) < per_domain:
                            chosen[domain].append(" " + " ".join(tokens[:i]))
                    break
                if token == "<unk>" or words > max_words:
                    break
                words += bool(_WORD.search(token))
        if all(len(p) >= per_domain for p in chosen.values()):
            break
    short = {d: len(p) for d, p in chosen.items() if len(p) < per_domain}
    if short:
        raise ValueError(f"the test split gives too few prompts by the rule for {short} (want {per_domain} each); "
                         f"is the WikiText-2 test file complete?")
    return chosen


def wikitext2_rule_prompts(domains: Mapping | None = None) -> dict[str, list[str]]:
    """The rule's prompts for the book's domains (``load_domains()``'s terms), from ``$SEMLM_DATA_DIR``'s
    WikiText-2 test split."""
    from semlm.idea.wikitext_experiment import load_domains

    domains = load_domains() if domains is None else domains
    lines = dataset_file("wikitext-2", "test.txt").read_text(encoding="utf-8").splitlines()
    return rule_prompts(lines, {name: d.terms for name, d in domains.items()})


def prompts_digest(prompts: Mapping[str, Sequence[str]]) -> str:
    """SHA-256 of the chosen prompts (domains sorted), what a registration freezes."""
    text = json.dumps({d: list(p) for d, p in sorted(prompts.items())}, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def with_prompts(domains: Mapping, prompts: Mapping[str, Sequence[str]]) -> dict:
    """The domains of ``load_domains()`` with their hand-written prompts replaced by ``prompts``."""
    from dataclasses import replace

    return {name: replace(domain, prompts=list(prompts[name])) for name, domain in domains.items()}
