"""B-topic-drift over worlds: each seed's own topic world and its data rate on held-out transitions."""

from dataclasses import replace

from semlm.data.topics import TopicConfig, TopicWorld
from semlm.idea.profiles import topic_drift_profile
from semlm.idea.topic_experiment import world_data_rate, world_of_seed


def test_each_seed_draws_its_own_world_with_the_same_laws():
    base = topic_drift_profile("smoke")
    a, b = world_of_seed(base, 501), world_of_seed(base, 502)
    assert (a.data.seed, a.data.lexicon_seed) == (501, 501)
    assert replace(a.data, seed=0, lexicon_seed=0) == replace(b.data, seed=0, lexicon_seed=0)
    assert TopicWorld.from_config(a.data).nouns != TopicWorld.from_config(b.data).nouns


def test_the_world_rate_rests_on_enough_held_out_transitions_and_finds_the_law():
    config = TopicConfig(seed=501, lexicon_seed=501, switch_prob=0.15)
    rate = world_data_rate(config, transitions=20_000)
    assert rate.n >= 20_000 and rate.high - rate.low < 0.012
    # a switch happens between topical sentences with probability switch_prob, which the labeller reads back
    assert rate.low - 0.02 < 0.15 < rate.high + 0.02
    assert world_data_rate(config, 20_000) == rate  # deterministic in the world
    other = world_data_rate(replace(config, switch_prob=0.4), 20_000)
    assert other.mean > rate.mean + 0.15
