"""Hostile inputs, one call each: run in torch and in nbgrad, the outcomes compared by
tests/test_bad_inputs.py (same exception type; nbgrad's message names what torch's names).

Each case is `name: f(T)`, `T` the library (torch or nbgrad) and `F = T.nn.functional` reached
through it. Some calls torch accepts (a 0-d transpose(0, 0), comparing with a str): nbgrad must
accept them too. Kept out, as other areas own them: type promotion and module dtype strictness
(promo), integer division by zero (fix-rows), nbgrad.load / save (ckpt).

Run `python tests/_bad_inputs.py` for the counts (cases, same type, same text).
"""
from __future__ import annotations


def _o(T, *shape):
    return T.ones(*shape)


def _a(T, n=6):
    return T.arange(float(n))


def _i(T, *vals):
    return T.tensor(list(vals))


def _m(T, *shape):
    return T.arange(float(_prod(shape))).reshape(*shape)


def _prod(s):
    n = 1
    for k in s:
        n *= k
    return n


def _opt(T, name, **kw):
    return getattr(T.optim, name)([T.nn.Parameter(T.ones(2))], **kw)


def _scatter(T, dim, index, src):
    return T.zeros(3).scatter_(dim, index, src)


def _backward_twice(T):
    x = T.ones(2, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


def _leaf_inplace(T):
    T.ones(2, requires_grad=True).add_(1)


def _modified_saved(T):
    x = T.ones(3, requires_grad=True)
    y = x.exp()
    y.add_(1)
    y.sum().backward()


def _set_grad(T, shape):
    x = T.ones(2, 3, requires_grad=True)
    x.grad = T.ones(*shape)


def _view_inplace(T):
    x = T.ones(2, 3, requires_grad=True).clone()
    for v in x.unbind(0):
        v.mul_(2)


def _no_grad_fn(T):
    T.ones(2).sum().backward()


CASES = {
    # ---- creation -----------------------------------------------------------------------------
    "zeros_negative": lambda T: T.zeros(-1),
    "ones_negative": lambda T: T.ones(2, -3),
    "empty_negative": lambda T: T.empty(-2),
    "full_negative": lambda T: T.full((2, -1), 1.0),
    "randn_negative": lambda T: T.randn(-2),
    "rand_negative": lambda T: T.rand(2, -1),
    "eye_negative": lambda T: T.eye(-1),
    "eye_negative_m": lambda T: T.eye(2, -3),
    "arange_zero_step": lambda T: T.arange(0, 10, 0),
    "arange_wrong_sign": lambda T: T.arange(0, 10, -1),
    "arange_wrong_sign_up": lambda T: T.arange(10, 0, 1),
    "arange_nan": lambda T: T.arange(0, float("nan")),
    "arange_inf": lambda T: T.arange(0, float("inf")),
    "linspace_negative": lambda T: T.linspace(0, 1, -2),
    "logspace_negative": lambda T: T.logspace(0, 1, -1),
    "randint_empty_range": lambda T: T.randint(5, 2, (3,)),
    "randint_equal": lambda T: T.randint(0, 0, (2,)),
    "randperm_negative": lambda T: T.randperm(-1),
    "tensor_ragged": lambda T: T.tensor([[1, 2], [3]]),
    "tensor_str": lambda T: T.tensor("abc"),
    "tensor_none": lambda T: T.tensor([1, None]),
    "tensor_str_dtype": lambda T: T.tensor([1.0], dtype="float32"),
    "zeros_str_dtype": lambda T: T.zeros(2, dtype="float32"),
    "zeros_float_size": lambda T: T.zeros(2.5),
    "ones_str_size": lambda T: T.ones("3"),
    "huge_alloc": lambda T: T.zeros(2 ** 40, 2 ** 20),
    "huge_empty": lambda T: T.empty(2 ** 40, 2 ** 20),
    "full_like_bad": lambda T: T.full_like(_o(T, 2), "x"),
    "randn_int_dtype": lambda T: T.randn(2, dtype=T.int64),
    "rand_bool_dtype": lambda T: T.rand(2, dtype=T.bool),
    "normal_negative_std": lambda T: T.normal(0.0, -1.0, (2,)),
    "multinomial_zero": lambda T: T.multinomial(T.zeros(3), 1),
    "multinomial_too_many": lambda T: T.multinomial(_o(T, 3), 5),
    "multinomial_negative": lambda T: T.multinomial(T.tensor([1.0, -1.0]), 1),
    "bernoulli_out_of_range": lambda T: T.bernoulli(T.tensor([1.5])),
    "requires_grad_int": lambda T: T.ones(2, dtype=T.int64).requires_grad_(),
    "tensor_requires_grad_int": lambda T: T.tensor([1, 2], requires_grad=True),
    "from_numpy_list": lambda T: T.from_numpy([1, 2]),
    # ---- views and shapes --------------------------------------------------------------------
    "view_wrong_numel": lambda T: _a(T).view(5),
    "view_two_minus_one": lambda T: _a(T).view(-1, -1),
    "view_minus_one_indivisible": lambda T: _a(T).view(-1, 4),
    "reshape_wrong_numel": lambda T: _a(T).reshape(4),
    "reshape_negative": lambda T: _a(T).reshape(-2, 3),
    "view_noncontiguous": lambda T: _m(T, 2, 3).t().view(6),
    "expand_wrong": lambda T: _a(T, 2).expand(3, 3),
    "expand_fewer_dims": lambda T: _m(T, 2, 3).expand(3),
    "expand_as_wrong": lambda T: _a(T, 2).expand_as(_o(T, 3)),
    "transpose_out_of_range": lambda T: _m(T, 2, 3).transpose(0, 2),
    "transpose_0d_same": lambda T: T.tensor(3.0).transpose(0, 0),
    "transpose_0d_minus_one": lambda T: T.tensor(3.0).transpose(-1, 0),
    "transpose_0d_one": lambda T: T.tensor(3.0).transpose(0, 1),
    "t_3d": lambda T: _o(T, 2, 2, 2).t(),
    "permute_repeated": lambda T: _m(T, 2, 3).permute(0, 0),
    "permute_too_few": lambda T: _m(T, 2, 3).permute(0),
    "permute_out_of_range": lambda T: _m(T, 2, 3).permute(0, 2),
    "squeeze_out_of_range": lambda T: _m(T, 2, 3).squeeze(3),
    "unsqueeze_out_of_range": lambda T: _m(T, 2, 3).unsqueeze(5),
    "flatten_out_of_range": lambda T: _m(T, 2, 3).flatten(2),
    "flatten_start_after_end": lambda T: _o(T, 2, 3, 4).flatten(2, 1),
    "unflatten_wrong": lambda T: _a(T).unflatten(0, (4, 2)),
    "narrow_too_long": lambda T: _a(T).narrow(0, 5, 3),
    "narrow_dim": lambda T: _a(T).narrow(1, 0, 1),
    "select_out_of_range": lambda T: _m(T, 2, 3).select(0, 5),
    "select_0d": lambda T: T.tensor(1.0).select(0, 0),
    "chunk_zero": lambda T: _a(T).chunk(0),
    "split_zero": lambda T: _a(T).split(0),
    "split_sizes_wrong": lambda T: _a(T).split([2, 3]),
    "cat_mismatch": lambda T: T.cat([_o(T, 2, 3), _o(T, 2, 4)]),
    "cat_empty_list": lambda T: T.cat([]),
    "cat_dims_differ": lambda T: T.cat([_o(T, 2, 3), _o(T, 3)]),
    "cat_dim_out_of_range": lambda T: T.cat([_o(T, 2), _o(T, 2)], 1),
    "stack_mismatch": lambda T: T.stack([_o(T, 2), _o(T, 3)]),
    "stack_empty": lambda T: T.stack([]),
    "movedim_repeated": lambda T: _o(T, 2, 3).movedim((0, 1), (0, 0)),
    "repeat_fewer_dims": lambda T: _m(T, 2, 3).repeat(2),
    "repeat_negative": lambda T: _a(T).repeat(-1),
    "flip_out_of_range": lambda T: _a(T).flip(5),
    "roll_mismatch": lambda T: _m(T, 2, 3).roll((1, 2), (0,)),
    "diagonal_same_dims": lambda T: _m(T, 2, 3).diagonal(0, 0, 0),
    "tril_1d": lambda T: _a(T).tril(),
    "triu_1d": lambda T: _a(T).triu(),
    "unfold_too_big": lambda T: _a(T).unfold(0, 8, 1),
    "unfold_zero_step": lambda T: _a(T).unfold(0, 2, 0),
    "as_strided_out_of_bounds": lambda T: _a(T).as_strided((3, 3), (3, 1)),
    "broadcast_to_wrong": lambda T: _a(T, 3).broadcast_to((2, 4)),
    "broadcast_tensors": lambda T: T.broadcast_tensors(_o(T, 2), _o(T, 3)),
    "swapaxes_out_of_range": lambda T: _a(T).swapaxes(0, 1),
    "view_as_wrong": lambda T: _a(T).view_as(_o(T, 4)),
    "resize_as_": lambda T: _a(T, 2).expand(2, 2).resize_(5),
    "index_dim_0d": lambda T: T.tensor(1.0).size(1),
    "size_out_of_range": lambda T: _a(T).size(2),
    "stride_out_of_range": lambda T: _a(T).stride(3),
    # ---- reductions ---------------------------------------------------------------------------
    "sum_out_of_range": lambda T: _m(T, 2, 3).sum(5),
    "sum_repeated_dims": lambda T: _m(T, 2, 3).sum((0, 0)),
    "sum_str_dim": lambda T: _m(T, 2, 3).sum("a"),
    "mean_int": lambda T: T.arange(6).mean(),
    "mean_out_of_range": lambda T: _a(T).mean(1),
    "argmax_empty": lambda T: T.zeros(0).argmax(),
    "argmin_empty": lambda T: T.zeros(0).argmin(),
    "max_empty": lambda T: T.zeros(0).max(),
    "min_empty": lambda T: T.zeros(0).min(),
    "amax_empty": lambda T: T.zeros(0).amax(),
    "max_dim_empty": lambda T: T.zeros(2, 0).max(1),
    "max_out_of_range": lambda T: _a(T).max(1),
    "std_int": lambda T: T.arange(6).std(),
    "var_out_of_range": lambda T: _a(T).var(2),
    "prod_out_of_range": lambda T: _a(T).prod(3),
    "cumsum_out_of_range": lambda T: _a(T).cumsum(3),
    "cumsum_no_dim": lambda T: _a(T).cumsum(),
    "topk_too_many": lambda T: _a(T).topk(10),
    "topk_negative": lambda T: _a(T).topk(-1),
    "kthvalue_too_big": lambda T: _a(T).kthvalue(10),
    "kthvalue_zero": lambda T: _a(T).kthvalue(0),
    "logsumexp_out_of_range": lambda T: _a(T).logsumexp(2),
    "median_empty": lambda T: T.zeros(0).median(),
    "mode_out_of_range": lambda T: _a(T).mode(3),
    "norm_bad_p": lambda T: _a(T).norm(p="fro", dim=(0, 0)),
    "all_out_of_range": lambda T: _a(T).all(2),
    "count_nonzero_out_of_range": lambda T: _a(T).count_nonzero(3),
    "sort_out_of_range": lambda T: _a(T).sort(2),
    "argsort_out_of_range": lambda T: _a(T).argsort(3),
    "softmax_out_of_range": lambda T: _a(T).softmax(2),
    "softmax_no_dim": lambda T: _m(T, 2, 3).softmax(),
    "unique_dim_out_of_range": lambda T: _a(T).unique(dim=3),
    "quantile_out_of_range": lambda T: _a(T).quantile(1.5),
    "histc_bad_range": lambda T: _a(T).histc(bins=4, min=3, max=1),
    "bincount_negative": lambda T: T.bincount(T.tensor([-1, 2])),
    "bincount_float": lambda T: T.bincount(_a(T)),
    # ---- elementwise and matrix products --------------------------------------------------------
    "add_shapes": lambda T: _o(T, 2, 3) + _o(T, 4),
    "mul_shapes": lambda T: _o(T, 2) * _o(T, 3),
    "sub_bool": lambda T: T.tensor([True]) - T.tensor([False]),
    "neg_bool": lambda T: -T.tensor([True]),
    "add_str": lambda T: _o(T, 2) + "a",
    "add_none": lambda T: _o(T, 2) + None,
    "eq_str": lambda T: _o(T, 2) == "a",
    "ne_str": lambda T: _o(T, 2) != "b",
    "eq_none": lambda T: _o(T, 2) == None,  # noqa: E711 (the call under test)
    "lt_str": lambda T: _o(T, 2) < "a",
    "where_shapes": lambda T: T.where(T.tensor([True, False]), _o(T, 3), _o(T, 2)),
    "where_nonbool": lambda T: T.where(_o(T, 2), _o(T, 2), _o(T, 2)),
    "pow_shapes": lambda T: _o(T, 2).pow(_o(T, 3)),
    "atan2_shapes": lambda T: T.atan2(_o(T, 2), _o(T, 3)),
    "maximum_shapes": lambda T: T.maximum(_o(T, 2), _o(T, 3)),
    "bitwise_and_float": lambda T: _o(T, 2) & _o(T, 2),
    "bitwise_or_float": lambda T: _o(T, 2) | _o(T, 2),
    "bitwise_not_float": lambda T: ~_o(T, 2),
    "lshift_float": lambda T: _o(T, 2) << 1,
    "clamp_no_bounds": lambda T: _a(T).clamp(),
    "lerp_shapes": lambda T: T.lerp(_o(T, 2), _o(T, 3), 0.5),
    "matmul_mismatch": lambda T: _o(T, 2, 3) @ _o(T, 4, 2),
    "matmul_0d": lambda T: T.tensor(1.0) @ _o(T, 2),
    "matmul_1d_mismatch": lambda T: _o(T, 2) @ _o(T, 3),
    "mm_1d": lambda T: T.mm(_o(T, 2), _o(T, 2, 2)),
    "mm_mismatch": lambda T: T.mm(_o(T, 2, 3), _o(T, 2, 3)),
    "bmm_mismatch": lambda T: T.bmm(_o(T, 2, 3, 4), _o(T, 2, 5, 6)),
    "bmm_batch_mismatch": lambda T: T.bmm(_o(T, 2, 3, 4), _o(T, 3, 4, 5)),
    "bmm_2d": lambda T: T.bmm(_o(T, 3, 4), _o(T, 4, 5)),
    "baddbmm_broadcast": lambda T: T.baddbmm(_o(T, 2, 3, 3), _o(T, 2, 3, 4), _o(T, 2, 4, 5)),
    "addmm_mismatch": lambda T: T.addmm(_o(T, 2, 2), _o(T, 2, 3), _o(T, 4, 2)),
    "addmm_self_broadcast": lambda T: T.addmm(_o(T, 3), _o(T, 2, 3), _o(T, 3, 2)),
    "addmv_mismatch": lambda T: T.addmv(_o(T, 2), _o(T, 2, 3), _o(T, 4)),
    "addr_mismatch": lambda T: T.addr(_o(T, 3, 3), _o(T, 2), _o(T, 3)),
    "dot_mismatch": lambda T: T.dot(_o(T, 2), _o(T, 3)),
    "dot_2d": lambda T: T.dot(_o(T, 2, 2), _o(T, 2, 2)),
    "mv_mismatch": lambda T: T.mv(_o(T, 2, 3), _o(T, 4)),
    "mv_1d": lambda T: T.mv(_o(T, 3), _o(T, 3)),
    "outer_2d": lambda T: T.outer(_o(T, 2, 2), _o(T, 2)),
    "cross_not_3": lambda T: T.linalg.cross(_o(T, 2), _o(T, 2)),
    "einsum_mismatch": lambda T: T.einsum("ij,jk->ik", _o(T, 2, 3), _o(T, 4, 2)),
    "einsum_bad_equation": lambda T: T.einsum("ij->k", _o(T, 2, 3)),
    "einsum_too_few": lambda T: T.einsum("ij,jk->ik", _o(T, 2, 3)),
    "tensordot_mismatch": lambda T: T.tensordot(_o(T, 2, 3), _o(T, 4, 2), dims=1),
    "kron_fine": lambda T: T.kron(_o(T, 2), _o(T, 3)),
    "cdist_mismatch": lambda T: T.cdist(_o(T, 2, 3), _o(T, 2, 4)),
    "float_of_many": lambda T: float(_o(T, 2)),
    "int_of_many": lambda T: int(_o(T, 2)),
    "bool_of_many": lambda T: bool(_o(T, 2)),
    "item_of_many": lambda T: _o(T, 2).item(),
    "item_of_empty": lambda T: T.zeros(0).item(),
    "len_0d": lambda T: len(T.tensor(1.0)),
    "iter_0d": lambda T: list(T.tensor(1.0)),
    # ---- indexing -----------------------------------------------------------------------------
    "index_out_of_range": lambda T: _a(T)[6],
    "index_negative_out_of_range": lambda T: _a(T)[-7],
    "index_second_dim": lambda T: _m(T, 2, 3)[:, 5],
    "index_too_many": lambda T: _a(T)[0, 0],
    "index_str": lambda T: _a(T)["a"],
    "index_float": lambda T: _a(T)[1.5],
    "index_list_out_of_range": lambda T: _a(T)[[0, 7]],
    "index_tensor_out_of_range": lambda T: _a(T)[T.tensor([0, 7])],
    "index_float_tensor": lambda T: _a(T)[T.tensor([0.0, 1.0])],
    "index_mask_wrong_shape": lambda T: _a(T)[T.tensor([True, False])],
    "index_0d_int": lambda T: T.tensor(1.0)[0],
    "index_0d_slice": lambda T: T.tensor(1.0)[1:],
    "index_broadcast_fail": lambda T: _m(T, 3, 3)[T.tensor([0, 1]), T.tensor([0, 1, 2])],
    "index_none_out_of_range": lambda T: _a(T)[None, None, 7],
    "setitem_out_of_range": lambda T: _a(T).__setitem__(7, 1.0),
    "setitem_shape": lambda T: _m(T, 2, 3).__setitem__(0, T.ones(4)),
    "setitem_str": lambda T: _a(T).__setitem__("x", 1.0),
    "index_select_out_of_range": lambda T: _a(T).index_select(0, T.tensor([7])),
    "index_select_float": lambda T: _a(T).index_select(0, T.tensor([1.0])),
    "index_select_2d_index": lambda T: _a(T).index_select(0, T.tensor([[1]])),
    "gather_out_of_range": lambda T: _m(T, 2, 3).gather(1, T.tensor([[0, 5]])),
    "gather_float_index": lambda T: _m(T, 2, 3).gather(1, T.tensor([[0.0]])),
    "gather_dims": lambda T: _m(T, 2, 3).gather(1, T.tensor([0])),
    "scatter_out_of_range": lambda T: _scatter(T, 0, T.tensor([5]), T.ones(1)),
    "scatter_negative": lambda T: _scatter(T, 0, T.tensor([-5]), T.ones(1)),
    "scatter_dtype": lambda T: _scatter(T, 0, T.tensor([1]), T.ones(1, dtype=T.float64)),
    "scatter_float_index": lambda T: _scatter(T, 0, T.tensor([1.0]), T.ones(1)),
    "scatter_add_out_of_range": lambda T: T.zeros(3).scatter_add_(0, T.tensor([4]), T.ones(1)),
    "scatter_dim_out_of_range": lambda T: _scatter(T, 1, T.tensor([1]), T.ones(1)),
    "index_add_mismatch": lambda T: T.zeros(3).index_add_(0, T.tensor([0, 1]), T.ones(3)),
    "index_add_out_of_range": lambda T: T.zeros(3).index_add_(0, T.tensor([5]), T.ones(1)),
    "index_copy_out_of_range": lambda T: T.zeros(3).index_copy_(0, T.tensor([5]), T.ones(1)),
    "index_fill_out_of_range": lambda T: T.zeros(3).index_fill_(0, T.tensor([5]), 1.0),
    "masked_fill_nonbool": lambda T: _a(T).masked_fill(_a(T), 0.0),
    "masked_fill_shape": lambda T: _a(T).masked_fill(T.tensor([True, False]), 0.0),
    "masked_select_shape": lambda T: _a(T).masked_select(T.tensor([True, False])),
    "masked_scatter_short": lambda T: T.zeros(3).masked_scatter_(T.tensor([True] * 3),
                                                                    T.ones(2)),
    "index_put_shape": lambda T: T.zeros(3).index_put_((T.tensor([0, 1]),), T.ones(3)),
    "nonzero_0d_fine": lambda T: T.tensor(1.0).nonzero(),
    "embedding_bag_bad": lambda T: T.nn.functional.embedding_bag(T.tensor([0, 9]), _o(T, 4, 2),
                                                                 T.tensor([0])),
    # ---- linear algebra -----------------------------------------------------------------------
    "inv_singular": lambda T: T.linalg.inv(T.zeros(2, 2)),
    "inv_non_square": lambda T: T.linalg.inv(_o(T, 2, 3)),
    "inv_1d": lambda T: T.linalg.inv(_o(T, 3)),
    "inv_int": lambda T: T.linalg.inv(T.eye(2, dtype=T.int64)),
    "det_non_square": lambda T: T.linalg.det(_o(T, 2, 3)),
    "det_1d": lambda T: T.linalg.det(_o(T, 3)),
    "slogdet_non_square": lambda T: T.linalg.slogdet(_o(T, 2, 3)),
    "cholesky_not_pd": lambda T: T.linalg.cholesky(-T.eye(2)),
    "cholesky_non_square": lambda T: T.linalg.cholesky(_o(T, 2, 3)),
    "solve_singular": lambda T: T.linalg.solve(T.zeros(2, 2), _o(T, 2)),
    "solve_mismatch": lambda T: T.linalg.solve(T.eye(2), _o(T, 3)),
    "eigh_non_square": lambda T: T.linalg.eigh(_o(T, 2, 3)),
    "svd_1d": lambda T: T.linalg.svd(_o(T, 3)),
    "qr_1d": lambda T: T.linalg.qr(_o(T, 3)),
    "matrix_power_non_square": lambda T: T.linalg.matrix_power(_o(T, 2, 3), 2),
    "matrix_power_singular_negative": lambda T: T.linalg.matrix_power(T.zeros(2, 2), -1),
    "norm_bad_ord": lambda T: T.linalg.norm(_m(T, 2, 2), ord="abc"),
    "matrix_norm_1d": lambda T: T.linalg.matrix_norm(_o(T, 3)),
    "vector_norm_int": lambda T: T.linalg.vector_norm(T.arange(3)),
    "pinv_1d": lambda T: T.linalg.pinv(_o(T, 3)),
    "trace_1d": lambda T: T.trace(_o(T, 3)),
    "diag_3d": lambda T: T.diag(_o(T, 2, 2, 2)),
    "diag_embed_fine": lambda T: T.diag_embed(_o(T, 2)),
    # ---- nn.functional ------------------------------------------------------------------------
    "linear_mismatch": lambda T: T.nn.functional.linear(_o(T, 2, 3), _o(T, 4, 5)),
    "linear_bias_mismatch": lambda T: T.nn.functional.linear(_o(T, 2, 3), _o(T, 4, 3),
                                                             _o(T, 5)),
    "conv2d_channels": lambda T: T.nn.functional.conv2d(_o(T, 1, 2, 5, 5), _o(T, 4, 3, 3, 3)),
    "conv2d_2d_input": lambda T: T.nn.functional.conv2d(_o(T, 5, 5), _o(T, 4, 3, 3, 3)),
    "conv2d_kernel_too_big": lambda T: T.nn.functional.conv2d(_o(T, 1, 3, 2, 2),
                                                              _o(T, 4, 3, 3, 3)),
    "conv2d_groups": lambda T: T.nn.functional.conv2d(_o(T, 1, 3, 5, 5), _o(T, 4, 1, 3, 3),
                                                      groups=2),
    "conv2d_stride_zero": lambda T: T.nn.functional.conv2d(_o(T, 1, 3, 5, 5), _o(T, 4, 3, 3, 3),
                                                           stride=0),
    "conv2d_negative_padding": lambda T: T.nn.functional.conv2d(
        _o(T, 1, 3, 5, 5), _o(T, 4, 3, 3, 3), padding=-1),
    "conv2d_bias_mismatch": lambda T: T.nn.functional.conv2d(_o(T, 1, 3, 5, 5),
                                                             _o(T, 4, 3, 3, 3), _o(T, 3)),
    "conv1d_channels": lambda T: T.nn.functional.conv1d(_o(T, 1, 2, 5), _o(T, 4, 3, 3)),
    "conv_transpose2d_channels": lambda T: T.nn.functional.conv_transpose2d(_o(T, 1, 2, 5, 5),
                                                                            _o(T, 3, 4, 3, 3)),
    "max_pool2d_too_big": lambda T: T.nn.functional.max_pool2d(_o(T, 1, 1, 2, 2), 3),
    "max_pool2d_padding": lambda T: T.nn.functional.max_pool2d(_o(T, 1, 1, 4, 4), 2, padding=2),
    "max_pool2d_1d_input": lambda T: T.nn.functional.max_pool2d(_o(T, 4), 2),
    "avg_pool2d_too_big": lambda T: T.nn.functional.avg_pool2d(_o(T, 1, 1, 2, 2), 3),
    "max_pool1d_too_big": lambda T: T.nn.functional.max_pool1d(_o(T, 1, 1, 2), 3),
    "adaptive_avg_pool2d_1d": lambda T: T.nn.functional.adaptive_avg_pool2d(_o(T, 4), 2),
    "layer_norm_shape": lambda T: T.nn.functional.layer_norm(_o(T, 2, 3), (4,)),
    "layer_norm_int": lambda T: T.nn.functional.layer_norm(T.ones(2, 3, dtype=T.int64), (3,)),
    "layer_norm_weight_shape": lambda T: T.nn.functional.layer_norm(_o(T, 2, 3), (3,),
                                                                    _o(T, 4)),
    "batch_norm_running_shape": lambda T: T.nn.functional.batch_norm(_o(T, 2, 3), T.zeros(4),
                                                                     T.ones(4)),
    "batch_norm_one_value": lambda T: T.nn.functional.batch_norm(_o(T, 1, 3), None, None,
                                                                 training=True),
    "group_norm_indivisible": lambda T: T.nn.functional.group_norm(_o(T, 2, 3, 4), 2),
    "instance_norm_running": lambda T: T.nn.functional.instance_norm(_o(T, 2, 3, 4), T.zeros(4),
                                                                     T.ones(4)),
    "embedding_out_of_range": lambda T: T.nn.functional.embedding(T.tensor([5]), _o(T, 4, 2)),
    "embedding_float_index": lambda T: T.nn.functional.embedding(T.tensor([1.0]), _o(T, 4, 2)),
    "embedding_negative": lambda T: T.nn.functional.embedding(T.tensor([-1]), _o(T, 4, 2)),
    "one_hot_negative": lambda T: T.nn.functional.one_hot(T.tensor([-1])),
    "one_hot_small": lambda T: T.nn.functional.one_hot(T.tensor([3]), 2),
    "one_hot_float": lambda T: T.nn.functional.one_hot(T.tensor([1.0])),
    "cross_entropy_target_range": lambda T: T.nn.functional.cross_entropy(_o(T, 2, 3),
                                                                          T.tensor([0, 5])),
    "cross_entropy_target_negative": lambda T: T.nn.functional.cross_entropy(
        _o(T, 2, 3), T.tensor([0, -2])),
    "cross_entropy_batch_mismatch": lambda T: T.nn.functional.cross_entropy(_o(T, 2, 3),
                                                                            T.tensor([0, 1, 2])),
    "cross_entropy_prob_shape": lambda T: T.nn.functional.cross_entropy(_o(T, 2, 3), _o(T, 2, 4)),
    "cross_entropy_weight_shape": lambda T: T.nn.functional.cross_entropy(
        _o(T, 2, 3), T.tensor([0, 1]), weight=_o(T, 4)),
    "cross_entropy_float_target_1d": lambda T: T.nn.functional.cross_entropy(
        _o(T, 2, 3), T.tensor([0.0, 1.0])),
    "nll_loss_target_dims": lambda T: T.nn.functional.nll_loss(_o(T, 2, 3),
                                                               T.tensor([[0, 1]])),
    "nll_loss_target_range": lambda T: T.nn.functional.nll_loss(_o(T, 2, 3), T.tensor([0, 3])),
    "nll_loss_3d_input_target": lambda T: T.nn.functional.nll_loss(_o(T, 2, 3, 4),
                                                                   T.zeros(2, 5).long()),
    "bce_out_of_range": lambda T: T.nn.functional.binary_cross_entropy(T.tensor([1.5]),
                                                                       T.tensor([1.0])),
    "bce_shape": lambda T: T.nn.functional.binary_cross_entropy(T.tensor([0.5, 0.5]),
                                                                T.tensor([1.0])),
    "bce_logits_shape": lambda T: T.nn.functional.binary_cross_entropy_with_logits(
        _o(T, 2), _o(T, 3)),
    "kl_div_shapes": lambda T: T.nn.functional.kl_div(_o(T, 2, 3), _o(T, 2, 4)),
    "mse_shapes": lambda T: T.nn.functional.mse_loss(_o(T, 2, 3), _o(T, 2, 4)),
    "l1_shapes": lambda T: T.nn.functional.l1_loss(_o(T, 2, 3), _o(T, 4)),
    "mse_bad_reduction": lambda T: T.nn.functional.mse_loss(_o(T, 2), _o(T, 2),
                                                            reduction="avg"),
    "huber_negative_delta": lambda T: T.nn.functional.huber_loss(_o(T, 2), _o(T, 2), delta=-1.0),
    "smooth_l1_negative_beta": lambda T: T.nn.functional.smooth_l1_loss(_o(T, 2), _o(T, 2),
                                                                        beta=-1.0),
    "margin_ranking_shapes": lambda T: T.nn.functional.margin_ranking_loss(_o(T, 2), _o(T, 3),
                                                                           _o(T, 2)),
    "cosine_embedding_shapes": lambda T: T.nn.functional.cosine_embedding_loss(
        _o(T, 2, 3), _o(T, 2, 4), _o(T, 2)),
    "triplet_shapes": lambda T: T.nn.functional.triplet_margin_loss(_o(T, 2, 3), _o(T, 2, 3),
                                                                    _o(T, 2, 4)),
    "ctc_fine_shapes": lambda T: T.nn.functional.softmax(_o(T, 2, 3), dim=3),
    "log_softmax_out_of_range": lambda T: T.nn.functional.log_softmax(_o(T, 2, 3), dim=2),
    "dropout_p_too_big": lambda T: T.nn.functional.dropout(_o(T, 2), p=1.5),
    "dropout_p_negative": lambda T: T.nn.functional.dropout(_o(T, 2), p=-0.1),
    "pad_too_many": lambda T: T.nn.functional.pad(_o(T, 2), (1, 1, 1, 1)),
    "pad_odd": lambda T: T.nn.functional.pad(_o(T, 2), (1,)),
    "pad_reflect_too_big": lambda T: T.nn.functional.pad(_o(T, 1, 1, 3), (3, 3), mode="reflect"),
    "pad_bad_mode": lambda T: T.nn.functional.pad(_o(T, 1, 1, 3), (1, 1), mode="wrap"),
    "interpolate_bad_mode": lambda T: T.nn.functional.interpolate(_o(T, 1, 1, 4), scale_factor=2,
                                                                  mode="cubic"),
    "interpolate_no_size": lambda T: T.nn.functional.interpolate(_o(T, 1, 1, 4)),
    "interpolate_both": lambda T: T.nn.functional.interpolate(_o(T, 1, 1, 4), size=8,
                                                              scale_factor=2),
    "interpolate_trilinear_4d": lambda T: T.nn.functional.interpolate(
        _o(T, 1, 1, 4, 4), scale_factor=2, mode="trilinear"),
    "interpolate_bicubic_5d": lambda T: T.nn.functional.interpolate(
        _o(T, 1, 1, 2, 2, 2), scale_factor=2, mode="bicubic"),
    "interpolate_trilinear_int": lambda T: T.nn.functional.interpolate(
        T.ones(1, 1, 2, 2, 2, dtype=T.int64), scale_factor=2, mode="trilinear"),
    "interpolate_size_length": lambda T: T.nn.functional.interpolate(
        _o(T, 1, 1, 2, 2, 2), size=(3, 3), mode="trilinear"),
    "lp_pool1d_4d": lambda T: T.nn.functional.lp_pool1d(_o(T, 1, 1, 4, 4), 2, 2),
    "max_unpool2d_float_indices": lambda T: T.nn.functional.max_unpool2d(
        _o(T, 1, 1, 2, 2), _o(T, 1, 1, 2, 2), 2),
    "max_unpool2d_index_out": lambda T: T.nn.functional.max_unpool2d(
        _o(T, 1, 1, 2, 2), T.full((1, 1, 2, 2), 16), 2),
    "max_unpool2d_output_size": lambda T: T.nn.functional.max_unpool2d(
        _o(T, 1, 1, 2, 2), T.zeros(1, 1, 2, 2, dtype=T.int64), 2, output_size=(9, 9)),
    "ctc_blank_out": lambda T: T.nn.functional.ctc_loss(
        _o(T, 3, 1, 2), T.tensor([[1]]), [3], [1], blank=2),
    "ctc_input_too_long": lambda T: T.nn.functional.ctc_loss(
        _o(T, 3, 1, 2), T.tensor([[1]]), [4], [1]),
    "ctc_targets_short": lambda T: T.nn.functional.ctc_loss(
        _o(T, 3, 1, 2), T.tensor([[1]]), [3], [2]),
    "ctc_lengths_float": lambda T: T.nn.functional.ctc_loss(
        _o(T, 3, 1, 2), T.tensor([[1]]), T.tensor([3.0]), T.tensor([1])),
    "ctc_lengths_mixed": lambda T: T.nn.functional.ctc_loss(
        _o(T, 3, 1, 2), T.tensor([[1]]), T.tensor([3]), [1]),
    "unfold_kernel_too_big": lambda T: T.nn.functional.unfold(_o(T, 1, 1, 2, 2), 3),
    "pixel_shuffle_indivisible": lambda T: T.nn.functional.pixel_shuffle(_o(T, 1, 3, 2, 2), 2),
    "glu_odd": lambda T: T.nn.functional.glu(_o(T, 3)),
    "normalize_out_of_range": lambda T: T.nn.functional.normalize(_o(T, 3), dim=2),
    "cosine_similarity_shapes": lambda T: T.nn.functional.cosine_similarity(_o(T, 2, 3),
                                                                            _o(T, 2, 4)),
    "sdpa_mismatch": lambda T: T.nn.functional.scaled_dot_product_attention(
        _o(T, 1, 2, 3, 4), _o(T, 1, 2, 3, 5), _o(T, 1, 2, 3, 4)),
    "softmax_int": lambda T: T.nn.functional.softmax(T.arange(3), dim=0),
    "relu_bool": lambda T: T.nn.functional.relu(T.tensor([True])),
    "gelu_int": lambda T: T.nn.functional.gelu(T.arange(3)),
    "leaky_relu_str": lambda T: T.nn.functional.leaky_relu(_o(T, 2), "a"),
    "prelu_weight_shape": lambda T: T.nn.functional.prelu(_o(T, 2, 3), _o(T, 2)),
    # ---- modules ------------------------------------------------------------------------------
    "Linear_mismatch": lambda T: T.nn.Linear(3, 4)(_o(T, 2, 5)),
    "Linear_negative": lambda T: T.nn.Linear(-1, 2),
    "Linear_0d_input": lambda T: T.nn.Linear(3, 4)(T.tensor(1.0)),
    "Conv2d_channels": lambda T: T.nn.Conv2d(3, 4, 3)(_o(T, 1, 2, 5, 5)),
    "Conv2d_groups": lambda T: T.nn.Conv2d(3, 4, 3, groups=2),
    "Conv2d_bad_padding": lambda T: T.nn.Conv2d(3, 4, 3, padding="full"),
    "Conv2d_same_stride": lambda T: T.nn.Conv2d(3, 4, 3, padding="same", stride=2),
    "Conv1d_2d_input": lambda T: T.nn.Conv1d(3, 4, 3)(_o(T, 5)),
    "BatchNorm1d_features": lambda T: T.nn.BatchNorm1d(3)(_o(T, 2, 4)),
    "BatchNorm2d_3d": lambda T: T.nn.BatchNorm2d(3)(_o(T, 3, 4, 4)),
    "BatchNorm1d_one_sample": lambda T: T.nn.BatchNorm1d(3)(_o(T, 1, 3)),
    "LayerNorm_shape": lambda T: T.nn.LayerNorm(4)(_o(T, 2, 3)),
    "GroupNorm_indivisible": lambda T: T.nn.GroupNorm(2, 3),
    "GroupNorm_channels": lambda T: T.nn.GroupNorm(2, 4)(_o(T, 2, 6, 3)),
    "InstanceNorm2d_3d": lambda T: T.nn.InstanceNorm2d(3)(_o(T, 3)),
    "Embedding_out_of_range": lambda T: T.nn.Embedding(5, 2)(T.tensor([5])),
    "Embedding_padding_idx": lambda T: T.nn.Embedding(5, 2, padding_idx=7),
    "LSTM_wrong_features": lambda T: T.nn.LSTM(3, 4)(_o(T, 2, 1, 5)),
    "LSTM_4d": lambda T: T.nn.LSTM(3, 4)(_o(T, 2, 1, 1, 3)),
    "LSTM_hidden_shape": lambda T: T.nn.LSTM(3, 4)(_o(T, 2, 1, 3), (T.zeros(1, 1, 5),
                                                                    T.zeros(1, 1, 4))),
    "GRU_hidden_shape": lambda T: T.nn.GRU(3, 4)(_o(T, 2, 1, 3), T.zeros(2, 1, 4)),
    "RNN_bad_nonlinearity": lambda T: T.nn.RNN(3, 4, nonlinearity="sigmoid"),
    "MHA_indivisible": lambda T: T.nn.MultiheadAttention(5, 2),
    "MHA_embed_mismatch": lambda T: T.nn.MultiheadAttention(4, 2)(_o(T, 3, 1, 5), _o(T, 3, 1, 5),
                                                                  _o(T, 3, 1, 5)),
    "TransformerEncoderLayer_bad_activation": lambda T: T.nn.TransformerEncoderLayer(
        4, 2, activation="tanh"),
    "Dropout_p": lambda T: T.nn.Dropout(1.5),
    "Flatten_out_of_range": lambda T: T.nn.Flatten(2)(_o(T, 2, 3)),
    "Unflatten_wrong": lambda T: T.nn.Unflatten(1, (2, 2))(_o(T, 2, 3)),
    "Sequential_bad_index": lambda T: T.nn.Sequential(T.nn.ReLU())[3],
    "ModuleList_bad_index": lambda T: T.nn.ModuleList([T.nn.ReLU()])[2],
    "add_module_dot": lambda T: T.nn.Module().add_module("a.b", T.nn.ReLU()),
    "register_buffer_bad": lambda T: T.nn.Module().register_buffer("x", 3),
    "register_parameter_tensor": lambda T: T.nn.Module().register_parameter("x", T.ones(2)),
    "load_state_dict_missing": lambda T: T.nn.Linear(2, 2).load_state_dict({}),
    "load_state_dict_shape": lambda T: T.nn.Linear(2, 2).load_state_dict(
        {"weight": T.ones(3, 3), "bias": T.ones(2)}),
    "state_dict_unexpected": lambda T: T.nn.Linear(2, 2).load_state_dict(
        {"weight": T.ones(2, 2), "bias": T.ones(2), "extra": T.ones(1)}),
    "CrossEntropyLoss_bad_reduction": lambda T: T.nn.CrossEntropyLoss(reduction="avg")(
        _o(T, 2, 3), T.tensor([0, 1])),
    "Softmax_int": lambda T: T.nn.Softmax(0)(T.arange(3)),
    "Upsample_bad_mode": lambda T: T.nn.Upsample(scale_factor=2, mode="cubic")(_o(T, 1, 1, 4)),
    "MaxPool2d_too_big": lambda T: T.nn.MaxPool2d(5)(_o(T, 1, 1, 2, 2)),
    "clip_grad_norm_bad_type": lambda T: T.nn.utils.clip_grad_norm_(
        [T.nn.Parameter(T.ones(2))], 1.0, norm_type="abc"),
    "parameters_to_vector_bad": lambda T: T.nn.utils.parameters_to_vector([1, 2]),
    # ---- autograd -----------------------------------------------------------------------------
    "backward_non_scalar": lambda T: T.ones(2, requires_grad=True).mul(2).backward(),
    "backward_twice": _backward_twice,
    "backward_no_grad_fn": _no_grad_fn,
    "grad_not_requiring": lambda T: T.autograd.grad(T.ones(2).sum(), T.ones(2)),
    "grad_unused": lambda T: T.autograd.grad(T.ones(2, requires_grad=True).sum(),
                                             T.ones(2, requires_grad=True)),
    "grad_shape_mismatch": lambda T: T.ones(2, requires_grad=True).mul(2).backward(T.ones(3)),
    "leaf_inplace": _leaf_inplace,
    "modified_saved": _modified_saved,
    "set_grad_shape": lambda T: _set_grad(T, (3, 2)),
    "set_grad_type": lambda T: _set_grad(T, (2, 3)) or setattr(T.ones(2), "grad", 3),
    "view_unbind_inplace": _view_inplace,
    "numpy_requires_grad": lambda T: T.ones(2, requires_grad=True).numpy(),
    "requires_grad_nonleaf_false": lambda T: T.ones(2, requires_grad=True).mul(2)
    .requires_grad_(False),
    "detach_inplace_view": lambda T: T.ones(2, requires_grad=True)[0:1].detach_(),
    "retain_grad_no_grad": lambda T: T.ones(2).retain_grad(),
    "register_hook_no_grad": lambda T: T.ones(2).register_hook(lambda g: g),
    # ---- optimizers and schedulers ------------------------------------------------------------
    "SGD_negative_lr": lambda T: _opt(T, "SGD", lr=-0.1),
    "SGD_negative_momentum": lambda T: _opt(T, "SGD", lr=0.1, momentum=-1),
    "SGD_nesterov_no_momentum": lambda T: _opt(T, "SGD", lr=0.1, nesterov=True),
    "SGD_negative_wd": lambda T: _opt(T, "SGD", lr=0.1, weight_decay=-1),
    "Adam_bad_beta": lambda T: _opt(T, "Adam", betas=(1.5, 0.9)),
    "Adam_bad_beta2": lambda T: _opt(T, "Adam", betas=(0.9, -0.1)),
    "Adam_negative_eps": lambda T: _opt(T, "Adam", eps=-1.0),
    "AdamW_negative_lr": lambda T: _opt(T, "AdamW", lr=-1.0),
    "RMSprop_negative_alpha": lambda T: _opt(T, "RMSprop", alpha=-1.0),
    "Adagrad_negative_lr_decay": lambda T: _opt(T, "Adagrad", lr_decay=-1.0),
    "Adadelta_bad_rho": lambda T: _opt(T, "Adadelta", rho=1.5),
    "ASGD_negative_wd": lambda T: _opt(T, "ASGD", weight_decay=-1.0),
    "Rprop_bad_etas": lambda T: _opt(T, "Rprop", etas=(1.5, 0.5)),
    "Adafactor_bad_d": lambda T: _opt(T, "Adafactor", d=0.5),
    "Adafactor_positive_decay": lambda T: _opt(T, "Adafactor", beta2_decay=0.5),
    "SparseAdam_zero_lr": lambda T: _opt(T, "SparseAdam", lr=0.0),
    "SWALR_bad_strategy": lambda T: T.optim.swa_utils.SWALR(_opt(T, "SGD", lr=0.1), 0.05,
                                                            anneal_strategy="exp"),
    "optimizer_empty": lambda T: T.optim.SGD([], lr=0.1),
    "optimizer_tensor_params": lambda T: T.optim.SGD(T.ones(2, requires_grad=True), lr=0.1),
    "optimizer_non_leaf": lambda T: T.optim.SGD([T.ones(2, requires_grad=True) * 2], lr=0.1),
    "optimizer_duplicate": lambda T: T.optim.SGD([T.nn.Parameter(T.ones(2))] * 2, lr=0.1),
    "optimizer_bad_state_dict": lambda T: _opt(T, "SGD", lr=0.1).load_state_dict(
        {"state": {}, "param_groups": [{"params": [0, 1]}]}),
    "StepLR_no_step_size": lambda T: T.optim.lr_scheduler.StepLR(_opt(T, "SGD", lr=0.1)),
    "MultiStepLR_bad": lambda T: T.optim.lr_scheduler.MultiStepLR(_opt(T, "SGD", lr=0.1), 3),
    "OneCycleLR_no_steps": lambda T: T.optim.lr_scheduler.OneCycleLR(_opt(T, "SGD", lr=0.1), 1.0),
    # ---- conversions and dtypes -----------------------------------------------------------------
    "to_bad_string": lambda T: _o(T, 2).to("abc"),
    "to_bad_type": lambda T: _o(T, 2).to(3.5),
    "type_bad": lambda T: _o(T, 2).type("abc"),
    "view_dtype_bad": lambda T: _o(T, 3).view(T.float64),
    "copy_shapes": lambda T: T.zeros(2).copy_(_o(T, 3)),
    "fill_tensor_nd": lambda T: T.zeros(2).fill_(_o(T, 2)),
    "new_tensor_ragged": lambda T: _o(T, 2).new_tensor([[1], [1, 2]]),
    "isclose_shapes": lambda T: T.isclose(_o(T, 2), _o(T, 3)),
    "allclose_shapes": lambda T: T.allclose(_o(T, 2), _o(T, 3)),
    "equal_fine": lambda T: T.equal(_o(T, 2), _o(T, 3)),
    "manual_seed_bad": lambda T: T.manual_seed("a"),
    "set_default_dtype_int": lambda T: T.set_default_dtype(T.int64),
}
