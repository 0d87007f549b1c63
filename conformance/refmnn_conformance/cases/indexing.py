"""Indexing (refmnn/ops/indexing.py): Gather."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType
from refmnn.errors import RefmnnError

from refmnn_conformance.case import ErrorSample, OpCase, Sample, SampleContext
from refmnn_conformance.cases._common import FLOATS


def gather_samples(ctx: SampleContext):
    x = ctx.make((5, 4, 3))
    yield Sample((x, np.array([0, 4, 2], dtype=np.int64)), name="axis0")
    yield Sample((x, np.array([[1, 3], [0, 0]], dtype=np.int64)), {"axis": 1}, name="matrix_indices")
    yield Sample((x, np.array(2, dtype=np.int64)), {"axis": 2}, name="scalar_index")
    yield Sample((x, np.array([-1, -5], dtype=np.int64)), name="negative_indices")
    yield Sample((x, np.array([1, 0], dtype=np.int32)), {"axis": -1}, name="int32_indices")
    yield Sample((x, np.zeros((0,), dtype=np.int64)), name="no_indices")
    yield Sample((ctx.noncontiguous(ctx.make((4, 6))), np.array([3, 1], dtype=np.int64)),
                 name="noncontiguous")


def gather_errors(ctx: SampleContext):
    x = ctx.make((3, 4))
    yield ErrorSample(Sample((x, np.array([3], dtype=np.int64)), name="index_out_of_range"),
                      RefmnnError, r"out of range|bounds|index")
    yield ErrorSample(Sample((x, np.array([-4], dtype=np.int64)), name="negative_out_of_range"),
                      RefmnnError, r"out of range|bounds|index")


CASES = (
    OpCase("Gather", dtypes=FLOATS + (DType.int64, DType.int32, DType.uint8, DType.bool),
           samples=gather_samples, errors=gather_errors, tags=("movement",)),
)
