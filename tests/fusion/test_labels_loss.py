"""``FusionLM`` and ``BaselineLM`` take ``labels`` as transformers' causal LMs do (issue 34): the output's
``loss`` is the book's next-token loss on the same batch, and transformers' ``Trainer`` trains them."""

import pytest
import torch
from transformers import Trainer, TrainingArguments

from semlm.data.dataset import encode_corpus
from semlm.data.synthetic import LEXICON
from semlm.fusion.features import SyntheticFeatures
from semlm.fusion.losses import FusionLoss, auxiliary_bce
from semlm.fusion.config import BackboneConfig
from semlm.fusion.model import build_model, lm_config

SENTENCES = [list(LEXICON[0:4]), list(LEXICON[5:7]), list(LEXICON[9:16])]  # rows of three lengths: pads


def tiny(vocab, kind):
    torch.manual_seed(0)
    backbone = BackboneConfig(len(vocab), d_model=16, n_layers=1, n_heads=2, d_ff=32, dropout=0.0)
    return build_model(lm_config(backbone, kind=kind))


def as_transformers_batch(batch, pad_id):
    """The book's (input_ids, targets) pair as one causal-LM row per sentence: ids = labels, pads -> -100."""
    full = torch.cat([batch.input_ids, batch.targets[:, -1:]], dim=1)
    features = torch.cat([batch.features, batch.features[:, -1:]], dim=1)  # the last row is never read causally
    labels = full.masked_fill(full == pad_id, -100)
    return full, features, labels, full != pad_id


@pytest.mark.parametrize("kind", ["fusion", "baseline"])
def test_labels_give_the_books_next_token_loss_on_the_same_batch(vocab, kind):
    featurize = SyntheticFeatures(vocab)
    batch = encode_corpus(SENTENCES, vocab, featurize)
    model = tiny(vocab, kind)
    book_loss, parts = FusionLoss(label_smoothing=0.0, aux_weight=0.0, uniformizer_weight=0.0)(model, batch)
    ids, features, labels, mask = as_transformers_batch(batch, vocab.pad_id)
    out = model(ids, features, mask, labels=labels)
    torch.testing.assert_close(out.loss, book_loss, rtol=1e-6, atol=1e-6)
    assert out.loss.requires_grad
    if kind == "fusion":
        torch.testing.assert_close(out.aux_loss, auxiliary_bce(out.feature_pred, features, mask))
    else:
        assert out.aux_loss is None
    assert model(ids, features, mask).loss is None  # no labels, no loss


@pytest.mark.parametrize("kind", ["fusion", "baseline"])
def test_transformers_trainer_takes_a_step_on_the_labels_loss(vocab, kind, tmp_path):
    featurize = SyntheticFeatures(vocab)
    ids, features, labels, mask = as_transformers_batch(encode_corpus(SENTENCES, vocab, featurize), vocab.pad_id)
    rows = [{"input_ids": i, "features": f, "labels": y, "attention_mask": m}
            for i, f, y, m in zip(ids, features, labels, mask)]
    model = tiny(vocab, kind)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=len(rows),
                             learning_rate=1e-2, report_to=[], save_strategy="no", logging_steps=1,
                             disable_tqdm=True, use_cpu=True, dataloader_num_workers=0)
    collate = lambda batch: {key: torch.stack([row[key] for row in batch]) for key in batch[0]}  # noqa: E731
    trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=collate)
    with torch.no_grad():
        expected = model.eval()(ids, features, mask, labels=labels).loss
    model.train()
    result = trainer.train()
    assert result.global_step == 1
    assert result.training_loss == pytest.approx(float(expected), rel=1e-5)  # dropout is 0: the step's loss
    assert any(not torch.equal(p, before[name]) for name, p in model.named_parameters())
