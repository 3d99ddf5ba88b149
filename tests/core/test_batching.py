"""Length bucketing and trimming of LMTensors mini-batches (semlm.data.dataset)."""

import dataclasses

import pytest
import torch

from semlm.data.synthetic import SyntheticConfig
from semlm.fusion.synthetic_experiment import prepare_data
from semlm.fusion.config import BackboneConfig
from semlm.fusion.model import lm_config, build_model


@pytest.fixture(scope="module")
def data():
    data = prepare_data(SyntheticConfig(n_train=320, n_val=64))
    assert data.train.bucket_batches == 0                      # off by default: it moves the synthetic PPL
    return dataclasses.replace(data, train=dataclasses.replace(data.train, bucket_batches=50))


def test_batches_are_trimmed_to_their_longest_real_row(data):
    train = data.train
    sizes = []
    for batch in train.batches(32, torch.Generator().manual_seed(3), shuffle=True):
        assert batch.input_ids.shape[1] == int(batch.mask.sum(1).max())   # no all-padding column
        assert batch.features.shape[:2] == batch.targets.shape == batch.scored.shape == batch.input_ids.shape
        sizes.append(len(batch))
    assert sum(sizes) == len(train) and len(sizes) == -(-len(train) // 32)
    ordered = list(train.batches(32))                                      # evaluation order: rows in order
    assert torch.equal(ordered[0].input_ids, train.input_ids[:32, :ordered[0].input_ids.shape[1]])


def test_bucketed_batches_are_a_permutation_of_the_corpus(data):
    train = data.train
    lengths = []
    for batch in train.batches(32, torch.Generator().manual_seed(0), shuffle=True):
        lengths += batch.mask.sum(1).tolist()
    assert sorted(lengths) == sorted(train.lengths.tolist())
    tokens = sorted(tuple(r[m].tolist()) for b in train.batches(32, torch.Generator().manual_seed(0), shuffle=True)
                    for r, m in zip(b.input_ids, b.mask))
    assert tokens == sorted(tuple(r[m].tolist()) for r, m in zip(train.input_ids, train.mask))


def test_same_generator_state_gives_the_same_batches(data):
    first = [b.input_ids for b in data.train.batches(32, torch.Generator().manual_seed(7), shuffle=True)]
    again = [b.input_ids for b in data.train.batches(32, torch.Generator().manual_seed(7), shuffle=True)]
    other = [b.input_ids for b in data.train.batches(32, torch.Generator().manual_seed(8), shuffle=True)]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(first, other))


def test_bucketing_computes_fewer_positions_than_plain_shuffling(data):
    plain = dataclasses.replace(data.train, bucket_batches=0)
    def positions(tensors):
        return sum(b.input_ids.numel() for b in tensors.batches(32, torch.Generator().manual_seed(0), shuffle=True))
    assert positions(data.train) < 0.9 * positions(plain)
    assert positions(plain) <= data.train.input_ids.numel()


def test_bad_bucket_setting_is_rejected(data):
    with pytest.raises(ValueError, match="bucket_batches must be an int >= 0"):
        dataclasses.replace(data.train, bucket_batches=-1)


@pytest.mark.parametrize("causal", [True, False])
def test_trimmed_batches_give_the_outputs_of_the_padded_batch(data, causal):
    torch.manual_seed(0)
    model = build_model(lm_config(BackboneConfig(len(data.vocab), d_model=32, n_layers=2, n_heads=2, d_ff=64,
                                                causal=causal), kind="fusion")).eval()
    val = data.val
    short = torch.nonzero(val.lengths < val.lengths.max()).flatten()[:8]
    trimmed = val.batch(short)
    assert trimmed.input_ids.shape[1] < val.input_ids.shape[1]
    with torch.no_grad():
        padded = model(val.input_ids[short], val.features[short], val.mask[short]).logits
        cut = model(trimmed.input_ids, trimmed.features, trimmed.mask).logits
    width = trimmed.input_ids.shape[1]
    keep = trimmed.mask
    torch.testing.assert_close(cut[keep], padded[:, :width][keep], rtol=1e-5, atol=1e-5)

