"""FP8 GEMMs without Transformer Engine (docs/fp8.md): the quantiser, the GEMMs' forward and
backward and the delayed recipe's scale updates, each against a reference written here from the
definitions (OCP FP8: e4m3fn and e5m2 bit layouts, round to nearest even, saturation; Transformer
Engine's delayed-scaling rules), not against torch's float8 casts."""
import numpy as np
import pytest
import torch

from megatron_cpp import _C

FORMATS = {  # dtype: (exponent bits, mantissa bits, bias, whether the top exponent holds finite values)
    torch.float8_e4m3fn: (4, 3, 7, True),
    torch.float8_e5m2: (5, 2, 15, False),
}


def fp8_table(dtype):
    """Every finite non-negative value of the format and whether its mantissa code is even."""
    e_bits, m_bits, bias, top_finite = FORMATS[dtype]
    values, even = [], []
    for e in range(2 ** e_bits):
        for m in range(2 ** m_bits):
            if e == 2 ** e_bits - 1 and (not top_finite or m == 2 ** m_bits - 1):
                continue  # e5m2: inf and NaN; e4m3fn: only S.1111.111 is NaN
            v = (m / 2 ** m_bits) * 2.0 ** (1 - bias) if e == 0 else (1 + m / 2 ** m_bits) * 2.0 ** (e - bias)
            values.append(v)
            even.append(m % 2 == 0)
    return np.array(values), np.array(even)


def reference_quantize(x, scale, dtype):
    """x * scale in fp32, clamped to the largest finite value, rounded to the nearest value (ties to
    the even mantissa); returned as the float64 values the float8 codes stand for."""
    values, even = fp8_table(dtype)
    y = (np.asarray(x, np.float32) * np.float32(scale)).astype(np.float64)
    mag = np.minimum(np.abs(y), values[-1])
    hi = np.clip(np.searchsorted(values, mag), 0, len(values) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = mag - values[lo], values[hi] - mag
    pick = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(even[lo], lo, hi)))
    return np.sign(y) * values[pick]


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_the_quantiser_rounds_and_saturates_as_the_format_defines(dtype):
    values, _ = fp8_table(dtype)
    top = values[-1]
    assert top == (448.0 if dtype == torch.float8_e4m3fn else 57344.0)
    mids = (values[1:] + values[:-1]) / 2  # every tie between neighbours, subnormals included
    rng = np.random.default_rng(0)
    x = np.concatenate([values, -values, mids, -mids, rng.normal(0, 50, 4000), [top * 1.01, -top * 3, 1e-12, 0.0]])
    x = x.astype(np.float32)
    for scale in (1.0, 0.37, 8.0):
        got = _C.fp8_quantize(torch.from_numpy(x), torch.tensor(scale), dtype)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.double().numpy(), reference_quantize(x, scale, dtype), err_msg=str(scale))


def test_the_tensorwise_scale_is_fp8_max_over_amax_and_1_where_that_is_undefined():
    amax = torch.tensor([2.0, 0.0, float("inf"), float("nan"), 1e-45])
    got = _C.fp8_current_scale(amax, torch.float8_e4m3fn)
    assert got[0].item() == pytest.approx(224.0)
    assert got[1:4].tolist() == [1.0, 1.0, 1.0]
    assert got[4].item() == np.finfo(np.float32).max  # 448 / 1e-45 overflows fp32


def dequantized(x, scale, dtype):
    return reference_quantize(x.detach().double().numpy(), scale, dtype) / np.float32(scale)


def close(got, want):
    """Within fp32 accumulation of the largest value; FP8's own error is some 10^4 times larger."""
    np.testing.assert_allclose(got.double().numpy(), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def run_linear(config, x, w, b, grad, meta=None):
    meta = meta or _C.Fp8Meta(config)
    x = x.clone().requires_grad_()
    w = w.clone().requires_grad_()
    b = b.clone().requires_grad_()
    y = _C.fp8_linear(x, w, b, meta)
    y.backward(grad)
    return meta, y.detach(), x.grad, w.grad, b.grad


def tensors(rows=24, n_in=32, n_out=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, rows // 2, n_in, generator=g) * 3, torch.randn(n_out, n_in, generator=g) * 0.1,
            torch.randn(n_out, generator=g), torch.randn(2, rows // 2, n_out, generator=g) * 1e-3)


KEPT = [2.0, 1000.0, 3e4]  # a delayed meta's scales for input, weight and output gradient


@pytest.mark.parametrize("fmt", ["hybrid", "e4m3"])
@pytest.mark.parametrize("recipe", ["delayed", "first_delayed", "tensorwise"])
def test_forward_and_backward_are_the_gemms_of_the_quantised_operands(fmt, recipe):
    """24 rows: padded to 32 for _scaled_mm and cut back. A delayed meta quantises with its kept
    scales, 1 before its first update ("first_delayed"); tensorwise scales each operand by fp8_max
    over its own amax."""
    x, w, b, grad = tensors()
    config = _C.Fp8Config(format=fmt, recipe="tensorwise" if recipe == "tensorwise" else "delayed")
    meta = _C.Fp8Meta(config)
    if recipe == "delayed":
        meta.scale = torch.tensor(KEPT)
    meta, y, dx, dw, db = run_linear(config, x, w, b, grad, meta)
    e4m3, grad_dtype = torch.float8_e4m3fn, torch.float8_e5m2 if fmt == "hybrid" else torch.float8_e4m3fn

    def scale_of(t, dtype, slot):
        if recipe != "tensorwise":
            return np.float32(KEPT[slot]) if recipe == "delayed" else np.float32(1.0)
        top = 448.0 if dtype == e4m3 else 57344.0
        return np.float32(top) / np.float32(t.abs().max().item())

    x2, g2 = x.reshape(-1, 32), grad.reshape(-1, 48)
    xq, wq, gq = (dequantized(t, scale_of(t, d, i), d) for i, (t, d) in enumerate(((x2, e4m3), (w, e4m3),
                                                                                    (g2, grad_dtype))))
    close(y.reshape(-1, 48), xq @ wq.T + b.double().numpy())
    close(dx.reshape(-1, 32), gq @ wq)
    close(dw, gq.T @ xq)
    close(db, g2.double().sum(0).numpy())
    if recipe != "tensorwise":  # the amaxes this iteration recorded, scales untouched until the update
        want = [x.abs().max().item(), w.abs().max().item(), grad.abs().max().item()]
        assert meta.amax_history[0].tolist() == pytest.approx(want, rel=1e-7)
        assert meta.scale.tolist() == (KEPT if recipe == "delayed" else [1.0, 1.0, 1.0])
    # Not the full-precision product: the test can tell the quantised GEMM from at::linear.
    assert not torch.allclose(y, torch.nn.functional.linear(x, w, b), rtol=1e-4, atol=1e-4)


def test_without_fp8_wgrad_the_weight_gradient_is_the_full_precision_product():
    x, w, b, grad = tensors()
    *_, dw, _ = run_linear(_C.Fp8Config(wgrad=False), x, w, b, grad)
    close(dw, (grad.reshape(-1, 48).double().T @ x.reshape(-1, 32).double()).numpy())


def reference_delayed(amaxes, history_len, algo, margin, tops):
    """Transformer Engine's amax_and_scale_update after each iteration: amax is the history's
    newest row (most_recent) or its max, scale = top / 2^margin / amax (kept where the amax is 0 or
    not finite), then the history rolls by one and its newest row restarts at 0."""
    history = np.zeros((history_len, 3))
    scale = np.ones(3, np.float32)
    out = []
    for a in amaxes:
        history[0] = np.maximum(history[0], a)
        amax = history.max(0) if algo == "max" else history[0]
        fresh = (np.float32(tops) * np.float32(2.0 ** -margin)) / amax.astype(np.float32)
        scale = np.where(np.isfinite(amax) & (amax > 0), fresh, scale).astype(np.float32)
        history = np.roll(history, -1, 0)
        history[0] = 0
        out.append((scale.copy(), history.copy()))
    return out


@pytest.mark.parametrize("algo, history_len, margin", [("most_recent", 1, 0), ("max", 3, 0), ("max", 4, 2),
                                                       ("most_recent", 2, 1)])
def test_delayed_scales_follow_the_amax_history(algo, history_len, margin):
    config = _C.Fp8Config(format="hybrid", amax_history_len=history_len, amax_compute_algo=algo, margin=margin)
    meta = _C.Fp8Meta(config)
    x, w, b, grad = tensors()
    amaxes = []
    for it, factor in enumerate([1.0, 4.0, 0.5, 0.25, 2.0]):
        xi, gi = x * factor, grad * (1 + it)
        run_linear(config, xi, w, b, gi, meta)
        amaxes.append([xi.abs().max().item(), w.abs().max().item(), gi.abs().max().item()])
        scale_used = meta.scale.clone()
        meta.update_scales()
        want_scale, want_history = reference_delayed(amaxes, history_len, algo, margin, [448, 448, 57344])[-1]
        assert meta.scale.tolist() == pytest.approx(want_scale.tolist(), rel=1e-6), it
        np.testing.assert_allclose(meta.amax_history.numpy(), want_history, rtol=1e-7)
        if it == 0:
            assert scale_used.tolist() == [1.0, 1.0, 1.0]


def test_evaluation_does_not_record_amaxes():
    config = _C.Fp8Config()
    meta = _C.Fp8Meta(config)
    x, w, b, _ = tensors()
    with torch.no_grad():
        _C.fp8_linear(x, w, b, meta)
    assert meta.amax_history.abs().sum().item() == 0


@pytest.mark.parametrize("kwargs, message", [
    ({"format": "e5m2"}, "--fp8-format must be e4m3 or hybrid, got 'e5m2'"),
    ({"recipe": "mxfp8"}, "--fp8-recipe must be delayed or tensorwise"),
    ({"amax_history_len": 0}, "--fp8-amax-history-len must be >= 1, got 0"),
    ({"amax_compute_algo": "mean"}, "--fp8-amax-compute-algo must be most_recent or max, got 'mean'"),
])
def test_a_bad_setting_is_one_line_naming_the_flag(kwargs, message):
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(")):
        _C.Fp8Config(**kwargs)


def test_sizes_that_are_not_multiples_of_16_are_refused():
    meta = _C.Fp8Meta(_C.Fp8Config())
    with pytest.raises(RuntimeError, match=r"multiples of 16; this layer's weight is \[40, 24\]"):
        _C.fp8_linear(torch.randn(4, 24), torch.randn(40, 24), torch.zeros(40), meta)
