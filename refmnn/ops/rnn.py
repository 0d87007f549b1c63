"""Recurrent layers: RNN, GRU, LSTM (every version, layout 0 and 1, all directions).

Notation (ONNX spec): T = seq_length, B = batch_size, I = input_size, H = hidden_size,
D = num_directions (2 for "bidirectional", else 1). With layout 0 (the default):

    X [T, B, I]   W [D, G*H, I]   R [D, G*H, H]   B [D, 2*G*H] (Wb then Rb)
    sequence_lens [B] int32       initial_h / initial_c [D, B, H]
    Y [T, D, B, H]                Y_h / Y_c [D, B, H]

layout 1 (opset 14+) is batch-major: X [B, T, I], initial_* and Y_h/Y_c [B, D, H],
Y [B, T, D, H]. G is the gate count: 1 (RNN), 3 (GRU: z, r, h), 4 (LSTM: i, o, f, c).

Each cell is one readable step function vectorised over the batch; :func:`_run_direction`
runs it over time, honouring ``sequence_lens``: for batch entry b only steps 0..len_b-1 run
(a reverse direction starts at len_b-1), Y is 0 past len_b and Y_h/Y_c hold the state after
the last step run (the initial state when len_b is 0). ``clip`` (when given) bounds the
pre-activation of every gate to [-clip, clip]; the cell state C of an LSTM is not clipped before
h (as ONNX Runtime does). float16/bfloat16 compute in float32 and round once at the end.

The opset-1/3 spec text writes ``Ht-1*Ri`` without the transpose that opset 7 added; R has the
same layout in every version and every implementation multiplies by R^T, so all versions
compute ``Ht-1 @ R^T``. Opset 1's ``output_sequence`` attribute is accepted; Y is always
computed and returned when the node lists it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from refmnn.dtypes import compute_dtype
from refmnn.graph import TensorType, ValueType
from refmnn.ops._infer import shape_of
from refmnn.ops._schema import Attr, InferContext, flag, op

# ------------------------------------------------------------------------------ activations

Activation = Callable[[np.ndarray], np.ndarray]

# name -> (function of (x, alpha, beta), default alpha or None, default beta or None)
_ACTIVATIONS: dict[str, tuple[Callable[[np.ndarray, float, float], np.ndarray], float | None,
                              float | None]] = {
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: 1.0 / (1.0 + np.exp(-x)), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x >= a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1)), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(0, x), None, None),
}


def _activations(names: Sequence[str] | None, defaults: Sequence[str], directions: int,
                 alphas: Sequence[float] | None, betas: Sequence[float] | None
                 ) -> list[list[Activation]]:
    """The activation functions of each direction.

    ``names`` lists one function per gate role for each direction (forward first); a list for
    one direction only is reused for the reverse direction, and a list for two directions given
    to a one-direction layer uses its first half (RNN's schema default is ("Tanh", "Tanh")).
    Names are case-insensitive. Each
    function that takes alpha (beta) consumes the next entry of ``activation_alpha``
    (``activation_beta``), in order; when the list is exhausted the function's default is used.
    """
    per = len(defaults)
    chosen = list(names) if names else list(defaults) * directions
    if len(chosen) == per and directions == 2:
        chosen = chosen * 2
    if len(chosen) == 2 * per and directions == 1:
        chosen = chosen[:per]  # RNN's schema default ("Tanh", "Tanh") names two for one direction
    if len(chosen) != per * directions:
        raise ValueError(f"expected {per * directions} activations, got {len(chosen)}: {chosen}")
    alpha_left, beta_left = list(alphas or ()), list(betas or ())
    funcs: list[Activation] = []
    for name in chosen:
        key = name.lower()
        if key not in _ACTIVATIONS:
            raise ValueError(f"unknown activation {name!r}; known: {sorted(_ACTIVATIONS)}")
        fn, default_alpha, default_beta = _ACTIVATIONS[key]
        alpha = alpha_left.pop(0) if default_alpha is not None and alpha_left else default_alpha
        beta = beta_left.pop(0) if default_beta is not None and beta_left else default_beta
        funcs.append(lambda x, fn=fn, a=alpha, b=beta: fn(x, a, b))
    return [funcs[d * per:(d + 1) * per] for d in range(directions)]


def _clipper(clip: float | None) -> Activation:
    if clip is None:
        return lambda x: x
    return lambda x: np.clip(x, -clip, clip)


# ------------------------------------------------------------------------------ time loop

Step = Callable[[np.ndarray, tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]


def _run_direction(xw: np.ndarray, lens: np.ndarray, reverse: bool, states: tuple[np.ndarray, ...],
                   step: Step) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Run ``step`` over time for one direction.

    xw: [T, B, G*H] input projections (X @ W^T + Wb) for every step. lens: [B] steps to run per
    batch entry. states: the initial states, each [B, H]; the first one is H, which is also
    the per-step output. Returns Y [T, B, H] (zeros past lens) and the final states.
    """
    steps, batch = xw.shape[:2]
    y = np.zeros((steps, batch, states[0].shape[-1]), dtype=states[0].dtype)
    rows = np.arange(batch)
    for t in range(steps):
        valid = t < lens  # [B]
        if not valid.any():
            break
        index = np.where(valid, lens - 1 - t, 0) if reverse else np.full(batch, t)
        new = step(xw[index, rows], states)
        states = tuple(np.where(valid[:, None], n, s) for n, s in zip(new, states, strict=True))
        y[index[valid], rows[valid]] = states[0][valid]
    return y, states


def _run(X: np.ndarray, W: np.ndarray, R: np.ndarray, B: np.ndarray | None,
         sequence_lens: np.ndarray | None, initials: list[np.ndarray | None], gates: int,
         direction: str, layout: int, hidden_size: int | None,
         make_step: Callable[[int, np.ndarray, np.ndarray], Step]) -> tuple[np.ndarray, ...]:
    """Shared driver: layouts, defaults, directions; ``make_step(d, R_d, Rb_d)`` builds a cell.

    Returns Y [T, D, B, H] (or batch-major) followed by the final states (Y_h, [Y_c]).
    """
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ValueError(f"direction must be forward, reverse or bidirectional, got {direction!r}")
    dirs = 2 if direction == "bidirectional" else 1
    out_dtype = X.dtype
    ct = compute_dtype(X.dtype)
    if layout:
        X = np.swapaxes(X, 0, 1)
        initials = [None if s is None else np.swapaxes(s, 0, 1) for s in initials]
    steps, batch = X.shape[0], X.shape[1]
    hidden = R.shape[-1]
    if hidden_size is not None and hidden_size != hidden:
        raise ValueError(f"hidden_size={hidden_size} but R has hidden size {hidden}")
    if W.shape[0] != dirs or W.shape[1] != gates * hidden:
        raise ValueError(f"W has shape {list(W.shape)}, expected [{dirs}, {gates * hidden}, I]")
    bias = np.zeros((dirs, 2 * gates * hidden), ct) if B is None else B.astype(ct)
    lens = np.full(batch, steps) if sequence_lens is None else np.asarray(sequence_lens, np.int64)
    states = [np.zeros((dirs, batch, hidden), ct) if s is None else s.astype(ct) for s in initials]
    ys, finals = [], []
    for d in range(dirs):
        xw = X.astype(ct) @ W[d].astype(ct).T + bias[d, :gates * hidden]
        step = make_step(d, R[d].astype(ct), bias[d, gates * hidden:])
        reverse = direction == "reverse" or d == 1
        y, final = _run_direction(xw, lens, reverse, tuple(s[d] for s in states), step)
        ys.append(y)
        finals.append(final)
    Y = np.stack(ys, axis=1)  # [T, D, B, H]
    outs = [np.stack([f[k] for f in finals]) for k in range(len(initials))]  # each [D, B, H]
    if layout:
        Y = Y.transpose(2, 0, 1, 3)
        outs = [np.swapaxes(o, 0, 1) for o in outs]
    return tuple(a.astype(out_dtype) for a in (Y, *outs))


def _infer(count: int) -> Callable[..., tuple[ValueType, ...]]:
    """Shape rule for Y and ``count`` state outputs."""

    def rule(ctx: InferContext, X: ValueType | None, W: ValueType | None, R: ValueType | None,
             *rest: ValueType | None, direction: str, hidden_size: int | None, layout: int = 0,
             **attrs: object) -> tuple[ValueType, ...]:
        dtype = X.dtype if isinstance(X, TensorType) else None
        xs, rs = shape_of(X), shape_of(R)
        hidden = hidden_size if hidden_size is not None else (rs[-1] if rs and len(rs) == 3
                                                              else None)
        if rs and len(rs) == 3 and isinstance(rs[-1], int) and hidden not in (None, rs[-1]):
            ctx.fail(f"hidden_size={hidden} but R {list(rs)} has hidden size {rs[-1]}")
        dirs = 2 if direction == "bidirectional" else 1
        steps, batch = (xs[0], xs[1]) if xs and len(xs) == 3 else (None, None)
        if layout:
            steps, batch = batch, steps
            y = TensorType(dtype, (batch, steps, dirs, hidden))
            state = TensorType(dtype, (batch, dirs, hidden))
        else:
            y = TensorType(dtype, (steps, dirs, batch, hidden))
            state = TensorType(dtype, (dirs, batch, hidden))
        return (y,) + (state,) * count

    return rule


_COMMON = (
    Attr("activation_alpha", "floats", None, "alphas of the activations that take one, in order"),
    Attr("activation_beta", "floats", None, "betas of the activations that take one, in order"),
    Attr("activations", "strings", None, "activation names per gate role, per direction"),
    Attr("clip", "float", None, "bound on gate pre-activations; none when absent"),
    Attr("direction", "string", "forward", "forward, reverse or bidirectional"),
    Attr("hidden_size", "int", None, "H; taken from R when absent"),
)
_OUTPUT_SEQUENCE = flag("output_sequence", 0, "opset 1: Y is optional if 0 (ignored)")
_LAYOUT = flag("layout", 0, "0: time-major, 1: batch-major")
_RNN_IN = ("X", "W", "R", "B?", "sequence_lens?", "initial_h?")

# ------------------------------------------------------------------------------------- RNN


def _rnn(X, W, R, B, sequence_lens, initial_h, activation_alpha, activation_beta, activations,
         clip, direction, hidden_size, layout):
    """Ht = f(clip(Xt @ Wi^T + Ht-1 @ Ri^T + Wbi + Rbi)); f defaults to Tanh."""
    dirs = 2 if direction == "bidirectional" else 1
    funcs = _activations(activations, ("Tanh",), dirs, activation_alpha, activation_beta)
    cut = _clipper(clip)

    def make_step(d: int, Rd: np.ndarray, rb: np.ndarray) -> Step:
        (f,) = funcs[d]

        def step(xw: np.ndarray, states: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            (h,) = states  # [B, H]
            return (f(cut(xw + h @ Rd.T + rb)),)

        return step

    return _run(X, W, R, B, sequence_lens, [initial_h], 1, direction, layout, hidden_size,
                make_step)


@op("RNN", since=14, inputs=_RNN_IN, outputs=("Y?", "Y_h?"), infer=_infer(1),
    attrs=(*_COMMON, _LAYOUT))
def rnn(X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha,
        activation_beta, activations, clip, direction, hidden_size, layout):
    """Simple RNN: Ht = f(Xt @ Wi^T + Ht-1 @ Ri^T + Wbi + Rbi), f = Tanh unless given.

    Shapes in the module docstring (G = 1). Y [T, D, B, H] (layout 1: [B, T, D, H]), Y_h the last
    state. Output dtype = X dtype (float16/float/double; bfloat16 from opset 22, same definition).
    """
    return _rnn(X, W, R, B, sequence_lens, initial_h, activation_alpha, activation_beta,
                activations, clip, direction, hidden_size, layout)


@op("RNN", since=7, inputs=_RNN_IN, outputs=("Y?", "Y_h?"), infer=_infer(1), attrs=_COMMON)
def rnn_7(X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha,
          activation_beta, activations, clip, direction, hidden_size):
    """RNN-7: as RNN-14 without ``layout`` (always time-major)."""
    return _rnn(X, W, R, B, sequence_lens, initial_h, activation_alpha, activation_beta,
                activations, clip, direction, hidden_size, 0)


@op("RNN", since=1, inputs=_RNN_IN, outputs=("Y?", "Y_h?"), infer=_infer(1),
    attrs=(*_COMMON, _OUTPUT_SEQUENCE))
def rnn_1(X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha,
          activation_beta, activations, clip, direction, hidden_size, output_sequence):
    """RNN-1: as RNN-7 plus the ``output_sequence`` attribute (accepted, Y always computed)."""
    return _rnn(X, W, R, B, sequence_lens, initial_h, activation_alpha, activation_beta,
                activations, clip, direction, hidden_size, 0)


# ------------------------------------------------------------------------------------- GRU


def _gru(X, W, R, B, sequence_lens, initial_h, activation_alpha, activation_beta, activations,
         clip, direction, hidden_size, layout, linear_before_reset):
    dirs = 2 if direction == "bidirectional" else 1
    funcs = _activations(activations, ("Sigmoid", "Tanh"), dirs, activation_alpha, activation_beta)
    cut = _clipper(clip)

    def make_step(d: int, Rd: np.ndarray, rb: np.ndarray) -> Step:
        f, g = funcs[d]
        hidden = Rd.shape[-1]
        r_zr, r_h = Rd[:2 * hidden], Rd[2 * hidden:]  # [2H, H], [H, H]
        rb_zr, rb_h = rb[:2 * hidden], rb[2 * hidden:]

        def step(xw: np.ndarray, states: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            (h,) = states  # [B, H]; xw [B, 3H] = (Xt@Wz^T + Wbz, Xt@Wr^T + Wbr, Xt@Wh^T + Wbh)
            zr = xw[:, :2 * hidden] + h @ r_zr.T + rb_zr
            z = f(cut(zr[:, :hidden]))
            r = f(cut(zr[:, hidden:]))
            if linear_before_reset:
                candidate = g(cut(xw[:, 2 * hidden:] + r * (h @ r_h.T + rb_h)))
            else:
                candidate = g(cut(xw[:, 2 * hidden:] + (r * h) @ r_h.T + rb_h))
            return ((1 - z) * candidate + z * h,)

        return step

    return _run(X, W, R, B, sequence_lens, [initial_h], 3, direction, layout, hidden_size,
                make_step)


_LBR = flag("linear_before_reset", 0, "apply the reset gate after the linear map of H")


@op("GRU", since=14, inputs=_RNN_IN, outputs=("Y?", "Y_h?"), infer=_infer(1),
    attrs=(*_COMMON, _LAYOUT, _LBR))
def gru(X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha,
        activation_beta, activations, clip, direction, hidden_size, layout, linear_before_reset):
    """GRU (gates z, r, h; f = Sigmoid, g = Tanh unless given):

        zt = f(Xt@Wz^T + Ht-1@Rz^T + Wbz + Rbz)
        rt = f(Xt@Wr^T + Ht-1@Rr^T + Wbr + Rbr)
        ht = g(Xt@Wh^T + (rt . Ht-1)@Rh^T + Rbh + Wbh)      linear_before_reset = 0
        ht = g(Xt@Wh^T + rt . (Ht-1@Rh^T + Rbh) + Wbh)      linear_before_reset != 0
        Ht = (1 - zt) . ht + zt . Ht-1

    Shapes in the module docstring (G = 3). Output dtype = X dtype (bfloat16 from opset 22).
    """
    return _gru(X, W, R, B, sequence_lens, initial_h, activation_alpha, activation_beta,
                activations, clip, direction, hidden_size, layout, linear_before_reset)


@op("GRU", since=7, inputs=_RNN_IN, outputs=("Y?", "Y_h?"), infer=_infer(1),
    attrs=(*_COMMON, _LBR))
def gru_7(X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha,
          activation_beta, activations, clip, direction, hidden_size, linear_before_reset):
    """GRU-7: as GRU-14 without ``layout`` (always time-major)."""
    return _gru(X, W, R, B, sequence_lens, initial_h, activation_alpha, activation_beta,
                activations, clip, direction, hidden_size, 0, linear_before_reset)


@op("GRU", since=3, inputs=_RNN_IN, outputs=("Y?", "Y_h?"), infer=_infer(1),
    attrs=(*_COMMON, _LBR, _OUTPUT_SEQUENCE))
def gru_3(X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha,
          activation_beta, activations, clip, direction, hidden_size, linear_before_reset,
          output_sequence):
    """GRU-3: as GRU-7 plus ``output_sequence`` (accepted, Y always computed)."""
    return _gru(X, W, R, B, sequence_lens, initial_h, activation_alpha, activation_beta,
                activations, clip, direction, hidden_size, 0, linear_before_reset)


@op("GRU", since=1, inputs=_RNN_IN, outputs=("Y?", "Y_h"), infer=_infer(1),
    attrs=(*_COMMON, _OUTPUT_SEQUENCE))
def gru_1(X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha,
          activation_beta, activations, clip, direction, hidden_size, output_sequence):
    """GRU-1: no ``linear_before_reset`` (always 0); Y_h is a required output."""
    return _gru(X, W, R, B, sequence_lens, initial_h, activation_alpha, activation_beta,
                activations, clip, direction, hidden_size, 0, 0)


# ------------------------------------------------------------------------------------ LSTM


def _lstm(X, W, R, B, sequence_lens, initial_h, initial_c, P, activation_alpha, activation_beta,
          activations, clip, direction, hidden_size, layout, input_forget):
    dirs = 2 if direction == "bidirectional" else 1
    funcs = _activations(activations, ("Sigmoid", "Tanh", "Tanh"), dirs, activation_alpha,
                         activation_beta)
    cut = _clipper(clip)
    hidden = R.shape[-1]
    ct = compute_dtype(X.dtype)
    peep = np.zeros((dirs, 3 * hidden), ct) if P is None else P.astype(ct)  # [D, 3H]

    def make_step(d: int, Rd: np.ndarray, rb: np.ndarray) -> Step:
        f, g, h_act = funcs[d]
        p_i, p_o, p_f = peep[d, :hidden], peep[d, hidden:2 * hidden], peep[d, 2 * hidden:]

        def step(xw: np.ndarray, states: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
            h, c = states  # [B, H] each; gates in order i, o, f, c
            gates = xw + h @ Rd.T + rb
            gi, go, gf, gc = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
            i = f(cut(gi + p_i * c))
            forget = 1 - i if input_forget else f(cut(gf + p_f * c))
            c_new = forget * c + i * g(cut(gc))
            o = f(cut(go + p_o * c_new))
            return (o * h_act(c_new), c_new)

        return step

    return _run(X, W, R, B, sequence_lens, [initial_h, initial_c], 4, direction, layout,
                hidden_size, make_step)


_LSTM_IN = ("X", "W", "R", "B?", "sequence_lens?", "initial_h?", "initial_c?", "P?")
_INPUT_FORGET = flag("input_forget", 0, "couple the input and forget gates: ft = 1 - it")


@op("LSTM", since=14, inputs=_LSTM_IN, outputs=("Y?", "Y_h?", "Y_c?"), infer=_infer(2),
    attrs=(*_COMMON, _INPUT_FORGET, _LAYOUT))
def lstm(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *,
         activation_alpha, activation_beta, activations, clip, direction, hidden_size,
         input_forget, layout):
    """LSTM (gates i, o, f, c; f = Sigmoid, g = Tanh, h = Tanh unless given):

        it = f(Xt@Wi^T + Ht-1@Ri^T + Pi . Ct-1 + Wbi + Rbi)
        ft = f(Xt@Wf^T + Ht-1@Rf^T + Pf . Ct-1 + Wbf + Rbf)     (1 - it when input_forget)
        ct = g(Xt@Wc^T + Ht-1@Rc^T + Wbc + Rbc)
        Ct = ft . Ct-1 + it . ct
        ot = f(Xt@Wo^T + Ht-1@Ro^T + Po . Ct + Wbo + Rbo)
        Ht = ot . h(Ct)

    P [D, 3H] holds the peepholes Pi, Po, Pf (zeros when omitted). Shapes in the module
    docstring (G = 4). Output dtype = X dtype (bfloat16 from opset 22, same definition).
    """
    return _lstm(X, W, R, B, sequence_lens, initial_h, initial_c, P, activation_alpha,
                 activation_beta, activations, clip, direction, hidden_size, layout, input_forget)


@op("LSTM", since=7, inputs=_LSTM_IN, outputs=("Y?", "Y_h?", "Y_c?"), infer=_infer(2),
    attrs=(*_COMMON, _INPUT_FORGET))
def lstm_7(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *,
           activation_alpha, activation_beta, activations, clip, direction, hidden_size,
           input_forget):
    """LSTM-7: as LSTM-14 without ``layout`` (always time-major)."""
    return _lstm(X, W, R, B, sequence_lens, initial_h, initial_c, P, activation_alpha,
                 activation_beta, activations, clip, direction, hidden_size, 0, input_forget)


@op("LSTM", since=1, inputs=_LSTM_IN, outputs=("Y?", "Y_h?", "Y_c?"), infer=_infer(2),
    attrs=(*_COMMON, _INPUT_FORGET, _OUTPUT_SEQUENCE))
def lstm_1(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *,
           activation_alpha, activation_beta, activations, clip, direction, hidden_size,
           input_forget, output_sequence):
    """LSTM-1: as LSTM-7 plus ``output_sequence`` (accepted, Y always computed)."""
    return _lstm(X, W, R, B, sequence_lens, initial_h, initial_c, P, activation_alpha,
                 activation_beta, activations, clip, direction, hidden_size, 0, input_forget)


OPS = (rnn_1, rnn_7, rnn, gru_1, gru_3, gru_7, gru, lstm_1, lstm_7, lstm)
