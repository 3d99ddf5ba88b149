import pytest
import torch

from semlm.data.synthetic import LEXICON
from semlm.data.vocab import Vocabulary


@pytest.fixture(scope="session")
def vocab() -> Vocabulary:
    return Vocabulary.build(LEXICON)


@pytest.fixture(autouse=True)
def _single_thread_determinism():
    torch.manual_seed(0)
    yield
