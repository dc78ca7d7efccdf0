import os

import pytest
import torch

# tests are small: 2 threads is the machine, and it keeps timings steady under CI
torch.set_num_threads(min(2, os.cpu_count() or 1))

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
