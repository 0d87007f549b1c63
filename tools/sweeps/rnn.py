"""Recurrent layers: RNN, GRU and LSTM at opsets 7, 14 (layout) and 22, every direction; small
T x B x I x H; bias, sequence_lens (0 to seq_length), initial_h / initial_c and peepholes each
present or omitted; non-default activations with their alphas and betas; clip; GRU's
linear_before_reset; LSTM's input_forget; the first 1, 2 (or 3) outputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from refmnn.dtypes import DType

from ._sweep import ANY, UNIT, Sample, SampleContext, Sweep

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_ROLES = {"RNN": 1, "GRU": 2, "LSTM": 3}  # activations per direction: f / f, g / f, g, h
_ALPHA = ("Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu")
_BETA = ("Affine", "ScaledTanh", "HardSigmoid")
_NAMES = ("Sigmoid", "Tanh", "Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh",
          "HardSigmoid", "Elu", "Softsign", "Softplus")
_UNBOUNDED = ("Relu", "Affine", "LeakyRelu", "ThresholdedRelu", "Elu", "Softplus")
_FLOATS = (DType.float32, DType.float64)


def _activations(rng: np.random.Generator, op: str, dirs: int, attrs: dict[str, object]) -> None:
    """Sets a random ``activations`` list (one function per role and direction, as the spec
    counts them) in ``attrs``, and half the time an alpha (beta) for each function that takes
    one, consumed in order; an alpha is now and then the clip bound (ThresholdedRelu's edge).
    An unbounded function comes with a clip <= 1, so that the state cannot grow without bound
    over the steps (where float32 rounding would decide the digits compared)."""
    names = [str(rng.choice(_NAMES)) for _ in range(_ROLES[op] * dirs)]
    attrs["activations"] = names
    if any(n in _UNBOUNDED for n in names):
        attrs["clip"] = float(rng.choice([0.25, 0.5, 1.0]))
    if rng.random() < 0.5:
        edge = float(attrs.get("clip", 1.0))
        alphas = [edge if rng.random() < 0.2 else round(float(rng.uniform(0.1, 1.2)), 3)
                  for n in names if n in _ALPHA]
        betas = [round(float(rng.uniform(-0.5, 0.5)), 3) for n in names if n in _BETA]
        if alphas:
            attrs["activation_alpha"] = alphas
        if betas:
            attrs["activation_beta"] = betas


def _lengths(rng: np.random.Generator, steps: int, batch: int) -> np.ndarray:
    """sequence_lens: each in 1..T, and 0 (an empty sequence) one time in ten."""
    lens = rng.integers(1, steps + 1, batch) if steps else np.zeros(batch, np.int64)
    return np.where(rng.random(batch) < 0.1, 0, lens).astype(np.int32)


def _draw(ctx: SampleContext, opset: int, op: str) -> Sample:
    """A random ``op``: X [T, B, I] (layout 1 from opset 14: [B, T, I]) with T <= 5 (0 now and
    then, but for GRU), B <= 3 (0 now and then for RNN), I <= 4, H <= 4; a random direction;
    B, sequence_lens, initial_h (and for LSTM initial_c, P) each present or omitted;
    hidden_size written or (now and then) left to R; activations, clip, linear_before_reset /
    input_forget drawn; the first 1 to all outputs. (onnxruntime 1.32 aborts the process on
    an empty GRU and on an LSTM with no batch, so those are not drawn.)"""
    rng = ctx.rng
    gates = _GATES[op]
    steps, batch = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    if op != "GRU" and rng.random() < 0.05:
        steps = 0
    if op == "RNN" and rng.random() < 0.05:
        batch = 0
    size, hidden = int(rng.integers(1, 5)), int(rng.integers(1, 5))
    direction = str(rng.choice(["forward", "reverse", "bidirectional"]))
    dirs = 2 if direction == "bidirectional" else 1
    layout = int(opset >= 14 and rng.random() < 0.3)
    attrs: dict[str, object] = {"direction": direction} if rng.random() < 0.8 or dirs == 2 else {}
    if rng.random() < 0.9:
        attrs["hidden_size"] = hidden
    if layout:
        attrs["layout"] = 1
    if rng.random() < 0.3:
        attrs["clip"] = float(rng.choice([0.1, 0.5, 1.0, 3.0]))
    if rng.random() < 0.4:
        _activations(rng, op, dirs, attrs)
    if op == "GRU" and rng.random() < 0.6:
        attrs["linear_before_reset"] = int(rng.integers(0, 2))
    if op == "LSTM" and rng.random() < 0.4:
        attrs["input_forget"] = int(rng.integers(0, 2))

    def state() -> np.ndarray | None:
        shape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
        return ctx.make(shape, UNIT) if rng.random() < 0.5 else None

    x = ctx.make((batch, steps, size) if layout else (steps, batch, size), ANY)
    w = ctx.make((dirs, gates * hidden, size), UNIT)
    r = ctx.make((dirs, gates * hidden, hidden), UNIT)
    inputs: list[np.ndarray | None] = [
        x, w, r, ctx.make((dirs, 2 * gates * hidden), UNIT) if rng.random() < 0.7 else None,
        _lengths(rng, steps, batch) if rng.random() < 0.5 else None, state()]
    if op == "LSTM":
        inputs += [state(), ctx.make((dirs, 3 * hidden), UNIT) if rng.random() < 0.5 else None]
    while inputs[-1] is None:
        inputs.pop()
    return Sample(tuple(inputs), attrs, outputs=int(rng.integers(1, 4 if op == "LSTM" else 3)))


_ORT_DEFAULTS = {"LeakyRelu": 0.01, "HardSigmoid": 0.2, "Elu": 1.0}
"""onnxruntime 1.32's default alphas (rnn_helpers.cc NameToArgDefaultsMap); any other function
missing its alpha or beta gets 0."""


def _defaulted(attrs: Mapping[str, Any]) -> list[str]:
    """The activations whose alpha or beta falls to its default (the list ran out first)
    where onnxruntime's default (0) is not the one of the ONNX operator the spec points to:
    Affine (alpha 1), ThresholdedRelu (alpha 1) and ScaledTanh (no default; the reference
    takes 1, 1)."""
    alphas, betas = len(attrs.get("activation_alpha", ())), len(attrs.get("activation_beta", ()))
    starved = []
    for name in attrs.get("activations", ()):
        short = (name in _ALPHA and alphas <= 0) or (name in _BETA and betas <= 0)
        alphas -= name in _ALPHA
        betas -= name in _BETA
        if short and name not in _ORT_DEFAULTS:
            starved.append(name)
    return starved


def _edge(attrs: Mapping[str, Any]) -> bool:
    """Whether a ThresholdedRelu's alpha is the clip bound, so that clipped pre-activations
    sit exactly on the threshold."""
    taking = [n for n in attrs.get("activations", ()) if n in _ALPHA]
    return any(n == "ThresholdedRelu" and a == attrs.get("clip")
               for n, a in zip(taking, attrs.get("activation_alpha", ()), strict=False))


def known(sample: Sample, opset: int, peer: str) -> str | None:
    """The peers' settled errors: onnxruntime's activation defaults, its strict threshold and
    its zero state for an empty sequence; the features onnx.reference ignores."""
    attrs = sample.attrs
    x = sample.inputs[0]
    steps, batch = (x.shape[1], x.shape[0]) if attrs.get("layout") else x.shape[:2]
    lens = sample.inputs[4] if len(sample.inputs) > 4 else None
    if peer == "onnxruntime":
        starved = _defaulted(attrs)
        if starved:
            return (f"onnxruntime 1.32 gives {starved} alpha = beta = 0 when activation_alpha / "
                    "activation_beta run out (rnn_helpers.cc: only LeakyRelu, HardSigmoid and "
                    "Elu have defaults); the spec: 'Default values are the same as of "
                    "corresponding ONNX operators' (ThresholdedRelu alpha 1.0, experimental "
                    "Affine alpha 1.0 beta 0.0; ScaledTanh had none: the reference takes 1, 1 "
                    "as onnxruntime's own contrib ScaledTanh)")
        if _edge(attrs):
            return ("onnxruntime 1.32's recurrent ThresholdedRelu is 'x > alpha ? x : 0' "
                    "(rnn_helpers.h); the recurrent ops' spec text lists 'ThresholdedRelu(x) - x "
                    "if x >= alpha else 0', and here the clip puts pre-activations exactly on "
                    "alpha (the standalone ThresholdedRelu op says x > alpha: the two texts "
                    "disagree; the reference follows the recurrent ops' own)")
        if batch and (steps == 0 or lens is not None and bool((lens == 0).any())):
            return ("onnxruntime 1.32 zeroes Y_h (and Y_c) of a batch entry whose sequence is "
                    "empty (sequence_lens 0, or seq_length 0); the spec says nothing of empty "
                    "sequences: the reference runs no step and returns the initial state as the "
                    "last state (refmnn/ops/rnn.py, a documented choice)")
        return None
    ignored = [name for name, used in (
        ("sequence_lens", lens is not None and bool((lens < steps).any())),
        ("clip", "clip" in attrs),
        ("activations", "activations" in attrs and (sample.inputs[1].shape[0] == 2
                                                     or len(attrs["activations"]) > 1)),
        ("input_forget", bool(attrs.get("input_forget")))) if used]
    if ignored:
        return (f"onnx.reference 1.23.2 ignores {ignored} (its RNN, GRU and LSTM take "
                "sequence_lens, clip, input_forget and, but for RNN's first one, activations "
                "as unused arguments: '# TODO: support overridden attributes')")
    return None


def draw_rnn(ctx: SampleContext, opset: int) -> Sample:
    """A random RNN (see :func:`_draw`): one activation per direction."""
    return _draw(ctx, opset, "RNN")


def draw_gru(ctx: SampleContext, opset: int) -> Sample:
    """A random GRU (see :func:`_draw`): f and g per direction, linear_before_reset 0 or 1."""
    return _draw(ctx, opset, "GRU")


def draw_lstm(ctx: SampleContext, opset: int) -> Sample:
    """A random LSTM (see :func:`_draw`): f, g and h per direction, peepholes, input_forget."""
    return _draw(ctx, opset, "LSTM")


SWEEPS = (
    Sweep("RNN", (7, 14, 22), draw_rnn, dtypes=_FLOATS, known=known),
    Sweep("GRU", (7, 14, 22), draw_gru, dtypes=_FLOATS, known=known),
    Sweep("LSTM", (7, 14, 22), draw_lstm, dtypes=_FLOATS, known=known),
)
