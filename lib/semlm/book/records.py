"""Which record type each chapter's metrics file is read as (:func:`load_record`), and the benchmark's.

The chapters' records live beside their papers (:mod:`semlm.fusion.records`, :mod:`semlm.idea.records`);
this map is where the book, which knows every chapter, puts them together for the claims and the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from semlm.core.records import ChapterRecord, Record
from semlm.fusion.records import (DecodingRecord, FeatureBankRecord, FusionTrainingRecord, IntentControlRecord,
                                  LeakageAuditRecord, SST2Record)
from semlm.idea.records import IdeaGatingRecord, LoraRecord, TopicDriftRecord, XrayRecord


@dataclass(frozen=True, kw_only=True)
class BenchmarkRecord(ChapterRecord):
    """``make bench``: the report shows its top-level numbers, kept in ``extra``."""

    chapter: ClassVar[str] = "bench"


RECORDS: dict[str, type[ChapterRecord]] = {
    cls.chapter: cls
    for cls in (FeatureBankRecord, FusionTrainingRecord, DecodingRecord, LeakageAuditRecord, SST2Record,
                IdeaGatingRecord, XrayRecord, LoraRecord, TopicDriftRecord, BenchmarkRecord,
                IntentControlRecord)
}


def load_record(chapter: str, data) -> ChapterRecord:
    """The typed record of ``chapter`` from its metrics file's dict (or the record itself)."""
    if chapter not in RECORDS:
        raise ValueError(f"no record type for chapter {chapter!r}; known: {', '.join(RECORDS)}")
    cls = RECORDS[chapter]
    if isinstance(data, cls):
        return data
    if isinstance(data, Record):
        raise ValueError(f"chapter {chapter} needs a {cls.__name__}, got a {type(data).__name__}")
    return cls.from_dict(data)
