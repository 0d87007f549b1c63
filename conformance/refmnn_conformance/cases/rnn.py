"""Recurrent layers (refmnn/ops/rnn.py): RNN, GRU and LSTM, small, every direction, both layouts,
initial state, sequence lengths, clip and non-default activations."""

from __future__ import annotations

import numpy as np

from refmnn.dtypes import DType

from refmnn_conformance.case import UNIT, OpCase, Sample, SampleContext, Tol

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def rnn_samples(op: str):
    gates = _GATES[op]

    def samples(ctx: SampleContext):
        t, b, i, h = 4, 3, 5, 6
        outputs = 3 if op == "LSTM" else 2

        def weights(dirs: int):
            w = ctx.make((dirs, gates * h, i), UNIT) * ctx.scalar(0.5)
            r = ctx.make((dirs, gates * h, h), UNIT) * ctx.scalar(0.5)
            bias = ctx.make((dirs, 2 * gates * h), UNIT) * ctx.scalar(0.5)
            return w, r, bias

        x = ctx.make((t, b, i), UNIT)
        w, r, bias = weights(1)
        yield Sample((x, w, r), {"hidden_size": h}, outputs=outputs, name="forward_no_bias")
        yield Sample((x, w, r, bias), {"hidden_size": h}, outputs=outputs, name="forward_bias")
        yield Sample((x, w, r, bias), {"hidden_size": h, "direction": "reverse"}, outputs=outputs,
                     name="reverse")
        wb, rb, bb = weights(2)
        h0 = ctx.make((2, b, h), UNIT)
        lens = np.array([4, 2, 1], dtype=np.int32)
        extra = (ctx.make((2, b, h), UNIT),) if op == "LSTM" else ()
        yield Sample((x, wb, rb, bb, lens, h0, *extra), {"hidden_size": h,
                                                         "direction": "bidirectional"},
                     outputs=outputs, name="bidirectional_lengths_initial_state")
        yield Sample((np.swapaxes(x, 0, 1).copy(), w, r, bias), {"hidden_size": h, "layout": 1},
                     outputs=outputs, name="batch_major_layout")
        yield Sample((x, w, r, bias), {"hidden_size": h, "clip": 0.3}, outputs=outputs, name="clip")
        acts = {"RNN": ["Relu"], "GRU": ["HardSigmoid", "Tanh"], "LSTM": ["HardSigmoid", "Tanh",
                                                                           "Tanh"]}[op]
        yield Sample((x, w, r, bias), {"hidden_size": h, "activations": acts}, outputs=outputs,
                     name="activations")
        if op == "GRU":
            yield Sample((x, w, r, bias), {"hidden_size": h, "linear_before_reset": 1},
                         outputs=outputs, name="linear_before_reset")
        if op == "LSTM":
            peep = ctx.make((1, 3 * h), UNIT)
            yield Sample((x, w, r, bias, None, None, None, peep), {"hidden_size": h},
                         outputs=outputs, name="peepholes")
            yield Sample((x, w, r, bias), {"hidden_size": h, "input_forget": 1}, outputs=outputs,
                         name="input_forget")

    return samples


_TYPES = (DType.float32, DType.float16, DType.float64)
_TOL = {DType.float16: Tol(5e-3, 2e-3, "errors compound over the time steps; gates in float32"),
        DType.float32: Tol(1e-5, 1e-6, "a matvec and a transcendental per step, compounded over "
                                       "the time steps")}
CASES = tuple(OpCase(op, dtypes=_TYPES, samples=rnn_samples(op), tolerance=_TOL, tags=("rnn",))
              for op in ("RNN", "GRU", "LSTM"))
