from __future__ import annotations

import os

import pytest
import torch

from litebert.paths import data_dir, fixtures_dir

# Tests run on 2 cores; keep torch from oversubscribing them and make runs repeatable.
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(scope="session")
def shared_data():
    """The public data directory (LITEBERT_DATA_DIR, default ../shared/data); skips when absent."""
    path = data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set LITEBERT_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def tf_fixtures():
    """The TensorFlow checkpoint fixtures (../shared/fixtures/tf); skips when absent."""
    path = fixtures_dir() / "tf"
    if not path.is_dir():
        pytest.skip(f"TF fixtures not found at {path} (set LITEBERT_FIXTURES_DIR)")
    return path


@pytest.fixture
def one_thread():
    """One intra-op thread for the test: tiny matrices gain nothing from more, and on a shared 2-core machine
    spinning OpenMP threads slow everything down. Modules opt in with ``pytestmark``."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
