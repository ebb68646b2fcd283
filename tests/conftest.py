"""Shared test fixtures: tiny ONNX models and the oracle comparison helper."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT_MODELS = sorted(f[: -len(".onnx")] for f in os.listdir(LIGHT_DIR) if f.endswith(".onnx"))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)
