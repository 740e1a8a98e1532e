"""A batch step's native calls (runtime/model/gemv.c): the attention in one call a layer (``cm_attend_rows``):
packed tokens of rows that feed different numbers of tokens, over a shared base and their rows' own slots, give
the float32 attention's values within a bfloat16 rounding, for any head grouping, head size, base size (none
included) and slot pattern a batch makes; a NaN key reaches exactly the queries that read it; layouts it cannot
read are refused. The MLP's ``silu(gate) * up`` in one pass (``cm_silu_mul_bf16``) gives torch's bits (up to
exp's last bit), special values included. (A batch step through them against torch's: tests/runtime/test_batch.py.)"""

import pytest
import torch
import torch.nn.functional as F

from callmaybe.runtime.model import native

from ..conftest import needs_cc
from .test_native_decode import _bf16_neighbours


def _step(gen, heads, kv_heads, d, base, widths, used, shares, cap_extra=3, exact_base=True):
    """A step as :class:`~callmaybe.runtime.decoding.batch.Batch` lays it out: row ``b`` feeds ``widths[b]``
    tokens at slots ``used + c``, after some valid slots of its own below ``used`` (gaps are padding), and reads
    the base when ``shares[b]``. Returns the kernel's arguments and, per token, (row, its slots, on the base)."""
    rows = len(widths)
    cap = used + max(widths) + cap_extra
    keys = torch.randn(rows, kv_heads, cap, d, generator=gen) * 2
    values = torch.randn(rows, kv_heads, cap, d, generator=gen)
    q = (torch.randn(sum(widths), heads, d, generator=gen) * 2).bfloat16()
    # bfloat16 values widened, as the buffers hold a bfloat16 model's (the base's keys then multiply as bfloat16
    # pairs where the CPU has AVX-512 BF16); ``exact_base=False``: float32 values, the float32 products
    base_k = torch.randn(kv_heads, base, d, generator=gen) * 2
    base_k = base_k.bfloat16().float() if exact_base else base_k
    base_v = torch.randn(kv_heads, base, d, generator=gen)
    token_row, offsets, slots, on_base, reads = [], [0], [], [], []
    for b, w in enumerate(widths):
        valid = sorted(torch.randperm(used, generator=gen)[:int(torch.randint(0, used + 1, (1,), generator=gen))]
                       .tolist()) if used else []
        for c in range(w):
            mine = valid + [used + i for i in range(c + 1)]
            token_row.append(b)
            slots += mine
            offsets.append(len(slots))
            on_base.append(int(shares[b] and base > 0))
            reads.append((b, mine, bool(on_base[-1])))
    args = (q, base_k if base else None, base_v if base else None, torch.tensor(on_base, dtype=torch.uint8), keys,
            values, torch.tensor(token_row, dtype=torch.int32), torch.tensor(offsets, dtype=torch.int32),
            torch.tensor(slots, dtype=torch.int32))
    return args, reads, (base_k, base_v)


def _reference(args, reads, base, scaling):
    """The attention in float64, token by token: (tokens, heads x head_dim)."""
    q, _, _, _, keys, values = args[:6]
    base_k, base_v = base
    heads, d = q.shape[1], q.shape[2]
    kv_heads = keys.shape[1]
    group = heads // kv_heads
    out = torch.empty(q.shape[0], heads, d, dtype=torch.float64)
    for t, (b, mine, on) in enumerate(reads):
        for h in range(heads):
            g = h // group
            k = keys[b, g, mine].double()
            v = values[b, g, mine].double()
            if on:
                k, v = torch.cat([base_k[g].double(), k]), torch.cat([base_v[g].double(), v])
            p = torch.softmax(k @ q[t, h].double() * scaling, dim=0)
            out[t, h] = p @ v
    return out.reshape(q.shape[0], heads * d)


CASES = [  # heads, kv_heads, head_dim, base tokens, widths, used, shares
    (12, 2, 128, 472, [5, 5, 8, 1, 9, 6, 8, 9, 9, 2, 10, 11, 22, 34, 25, 36], 60, [True] * 16),  # a server step
    (12, 2, 128, 40, [1, 1, 1, 3], 7, [True, False, True, False]),  # some rows without the base
    (12, 2, 128, 0, [4, 1, 17], 30, [False] * 3),  # no base at all
    (14, 2, 64, 33, [2, 40, 1], 0, [True] * 3),  # Qwen2.5-0.5B's grouping; nothing cached yet; a 40-token run
    (18, 2, 32, 31, [3, 2], 5, [True, True]),  # 9 heads a group: 8 and 1 in two passes (6 and 3 under AVX2)
    (9, 3, 64, 64, [1, 2, 3], 12, [True, True, False]),  # SmolLM2-135M's grouping
    (4, 4, 24, 20, [3, 1], 6, [True, True]),  # head_dim 24: the plain loops
    (2, 1, 16, 1, [20], 3, [True]),  # 16 entries: the plain loops under AVX-512, vectors under AVX2
]


def _check_rows(lib):
    gen = torch.Generator().manual_seed(5)
    for (heads, kv_heads, d, base, widths, used, shares), exact in [(case, True) for case in CASES] + \
            [(case, False) for case in CASES[:2]]:
        args, reads, kept = _step(gen, heads, kv_heads, d, base, widths, used, shares, exact_base=exact)
        got = lib.attend_rows(*args, d ** -0.5)
        want = _reference(args, reads, kept, d ** -0.5)
        assert got.shape == want.shape and got.dtype == torch.bfloat16
        # float32's error on a sum of a few hundred terms of magnitude 1 where they cancel: 2^-16 (outputs near 0)
        assert _bf16_neighbours(got, want, 2 ** -16), (heads, kv_heads, d, base, widths)
        if kv_heads > 1:  # the key/value heads swapped: another answer
            other = lib.attend_rows(*args[:4], args[4].flip(1).contiguous(), args[5].flip(1).contiguous(), *args[6:],
                                    d ** -0.5)
            assert not torch.allclose(other.float(), want.float(), atol=1e-2), heads


def _check_nan(lib):
    """A NaN key makes NaN the outputs of the queries of its key/value head that read it, and no others."""
    gen = torch.Generator().manual_seed(6)
    args, reads, kept = _step(gen, 12, 2, 128, 40, [3, 2], 4, [True, True])
    keys = args[4]
    slot = reads[0][1][0] if reads[0][1] else 4  # row 0's first slot: every token of row 0 reads it
    keys[0, 1, slot, 7] = float("nan")
    got = lib.attend_rows(*args, 128 ** -0.5).view(-1, 12, 128)
    assert bool(got[:3, 6:].isnan().all()) and not bool(got[:3, :6].isnan().any())  # row 0: head 1's queries
    assert not bool(got[3:].isnan().any())  # row 1 reads its own keys
    keys[0, 1, slot, 7] = 0.0
    base_k = args[1].clone()
    base_k[0, 39, 5] = float("nan")  # base token 39 of key/value head 0: every token reads it
    got = lib.attend_rows(args[0], base_k, *args[2:], 128 ** -0.5).view(-1, 12, 128)
    assert bool(got[:, :6].isnan().all()) and not bool(got[:, 6:].isnan().any())


@needs_cc
def test_the_step_attention_is_the_float32_attention_rounded_to_bfloat16(lib):
    _check_rows(lib)
    _check_nan(lib)


@needs_cc
def test_a_library_without_avx512_gives_the_same_step_attention(fresh, monkeypatch):
    monkeypatch.setenv("CC", "cc -mno-avx512f")
    plain = native.rotation()
    assert plain is not None
    _check_rows(plain)
    _check_nan(plain)


@needs_cc
def test_layouts_the_step_attention_cannot_read_are_refused(lib):
    gen = torch.Generator().manual_seed(7)
    args, _, _ = _step(gen, 12, 2, 128, 40, [3, 2], 4, [True, False])
    q, base_k, base_v, on_base, keys, values, token_row, offsets, slots = args
    refused = r"^attend_rows: q \(5, 12, 128\), keys \(2, 2, 10, 128\): refused by the kernel \(a row or slot out " \
              r"of range, a token attending to nothing, a token's slots not the start of the next one's of its " \
              r"row, or no memory\)$"
    for bad in (torch.tensor([10]), torch.tensor([-1])):  # a slot past the buffers' 10, or below 0
        wrong = slots.clone()
        wrong[-1:] = bad
        with pytest.raises(ValueError, match=refused):
            lib.attend_rows(q, base_k, base_v, on_base, keys, values, token_row, offsets, wrong, 0.1)
    wrong = token_row.clone()
    wrong[4] = 2  # a row past the buffers' 2
    with pytest.raises(ValueError, match=refused):
        lib.attend_rows(q, base_k, base_v, on_base, keys, values, wrong, offsets, slots, 0.1)
    first = slots[:int(offsets[1])].clone()  # row 0's first token reads slots its second does not start with
    wrong = slots.clone()
    wrong[int(offsets[1]):int(offsets[1]) + len(first)] = first.flip(0) if len(first) > 1 else first + 1
    with pytest.raises(ValueError, match=refused):
        lib.attend_rows(q, base_k, base_v, on_base, keys, values, token_row, offsets, wrong, 0.1)
    empty = torch.tensor([0, 0, 0, 0, 0, 0], dtype=torch.int32)  # no own slot, and row 1 without the base
    with pytest.raises(ValueError, match=refused):
        lib.attend_rows(q, base_k, base_v, on_base, keys, values, token_row, empty, slots[:0], 0.1)
    taken = r"^attend_rows: q \(5, 12, 128\) torch.float32, keys \(2, 2, 10, 128\) torch.float32: not an input " \
            r"this kernel takes$"
    with pytest.raises(ValueError, match=taken):
        lib.attend_rows(q.float(), base_k, base_v, on_base, keys, values, token_row, offsets, slots, 0.1)
    with pytest.raises(ValueError, match="attend_rows: .* not an input"):  # bfloat16 buffers
        lib.attend_rows(q, base_k, base_v, on_base, keys.bfloat16(), values.bfloat16(), token_row, offsets, slots,
                        0.1)
    with pytest.raises(ValueError, match="attend_rows: .* not an input"):  # base keys and values of two sizes
        lib.attend_rows(q, base_k[:, :39], base_v, on_base, keys, values, token_row, offsets, slots, 0.1)
    with pytest.raises(ValueError, match="attend_rows: .* not an input"):  # fewer slots than the offsets count
        lib.attend_rows(q, base_k, base_v, on_base, keys, values, token_row, offsets, slots[:-1], 0.1)
    with pytest.raises(ValueError, match="attend_rows: .* not an input"):  # keys without values
        lib.attend_rows(q, base_k, None, on_base, keys, values, token_row, offsets, slots, 0.1)


def _check_silu_mul(lib):
    gen = torch.Generator().manual_seed(8)
    for shape in [(200, 8960), (1, 37), (3, 1536), (0, 16)]:
        g = (torch.randn(*shape, generator=gen) * 6).bfloat16()
        u = (torch.randn(*shape, generator=gen) * 3).bfloat16()
        got, want = lib.silu_mul(g, u), F.silu(g) * u
        assert got.shape == want.shape and got.dtype == torch.bfloat16
        if got.numel():  # measured: every one of 1.8 million values the same bits; exp's last bit may move a few
            assert float((got == want).float().mean()) > 0.9999, shape
            step = (torch.frexp(want.float())[1].float() - 8).exp2()
            assert bool(((got.float() - want.float()).abs() <= step).all()), shape
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 100.0, -100.0, 1e-38, -3.0,
                            88.0, -88.0, 1.0], dtype=torch.bfloat16)
    for u in (torch.ones_like(special), special.flip(0)):
        got, want = lib.silu_mul(special, u), F.silu(special) * u
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got[~got.isnan()], want[~want.isnan()])


@needs_cc
def test_the_gated_mlp_step_gives_torchs_bits(lib):
    if lib.kind != "vnni":
        assert lib.silu_mul(torch.zeros(4, dtype=torch.bfloat16), torch.zeros(4, dtype=torch.bfloat16)) is None
        pytest.skip("built without AVX-512: torch's operators run instead (checked: None)")
    _check_silu_mul(lib)
    with pytest.raises(ValueError, match=r"^silu_mul: g \(2, 3\) torch.float32, u \(2, 3\) torch.bfloat16: not an "
                                         r"input this kernel takes$"):
        lib.silu_mul(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bfloat16))


@needs_cc
def test_a_library_without_avx512_leaves_the_gated_mlp_step_to_torch(fresh, monkeypatch):
    monkeypatch.setenv("CC", "cc -mno-avx512f")
    plain = native.rotation()
    assert plain is not None
    assert plain.silu_mul(torch.ones(20, dtype=torch.bfloat16), torch.ones(20, dtype=torch.bfloat16)) is None
