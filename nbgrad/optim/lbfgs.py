"""L-BFGS with an optional strong-Wolfe line search (mirrors ``torch.optim.LBFGS``).

The parameters are seen as one flat vector (numpy, in the parameters' dtype); the two-loop
recursion, the step-size rules and the line search follow torch's (minFunc's) so that float64
runs take the same iterates, function evaluations and stopping decisions.
"""

import math

import numpy as np

from nbgrad.autograd import grad_mode
from ..backend import get_array_module as _xp
from .optimizer import Optimizer, _tensor_of

__all__ = ["LBFGS"]


def _abs(a):
    """|a| on the array's own module (numpy, or cupy for device parameters)."""
    return _xp(a).abs(a)


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through (x1, f1, g1), (x2, f2, g2), clipped to ``bounds``
    (default: the interval between x1 and x2); the midpoint when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 ** 2 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Find a step ``t`` along ``d`` meeting the strong Wolfe conditions.

    ``evaluate(t)`` returns (loss, flat gradient) at ``x + t d``. Returns
    ``(loss, grad, t, evaluations)`` at the step chosen.
    """
    d_norm = float(_abs(d).max())
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    it = 0
    # phase 1: bracket an interval that contains an acceptable step
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            br, br_f, br_g, br_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            br, br_f, br_g, br_gtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if gtd_new >= 0:
            br, br_f, br_g, br_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        t_next = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                            bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new @ d)
        it += 1
    if it == max_ls:
        br, br_f, br_g, br_gtd = [0.0, t], [f, f_new], [g, g_new], [None, None]
    # phase 2: zoom into the bracket
    low, high = (0, 1) if br_f[0] <= br_f[-1] else (1, 0)
    insufficient = False
    while not done and it < max_ls:
        if abs(br[1] - br[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1])
        top, bottom = max(br), min(br)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:  # too close to an end: step away from it
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new @ d)
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= br_f[low]:
            br[high], br_f[high], br_g[high], br_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if br_f[0] <= br_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br[high] - br[low]) >= 0:
                br[high], br_f[high], br_g[high], br_gtd[high] = \
                    br[low], br_f[low], br_g[low], br_gtd[low]
            br[low], br_f[low], br_g[low], br_gtd[low] = t, f_new, g_new, gtd_new
    return br_f[low], br_g[low], br[low], evals


class LBFGS(Optimizer):
    """Limited-memory BFGS (mirrors ``torch.optim.LBFGS``). ``step(closure)`` runs up to
    ``max_iter`` iterations, calling ``closure`` (which zeroes the grads, computes the loss,
    calls ``backward`` and returns the loss) as often as the iterations and line search need.

    Args:
        params: the parameters (one group only).
        lr (float): 1; max_iter (int): 20 per ``step``; max_eval (int): max_iter * 5 // 4;
        tolerance_grad (float): 1e-7, stop when max |grad| is below it;
        tolerance_change (float): 1e-9, stop when the loss or the step change less;
        history_size (int): 100 pairs (s, y) kept;
        line_search_fn (str | None): None (fixed step ``lr``) or ``"strong_wolfe"``.

    State (of the first parameter, as torch): ``func_evals``, ``n_iter``, ``d``, ``t``,
    ``old_dirs``, ``old_stps``, ``ro``, ``H_diag``, ``prev_flat_grad``, ``prev_loss``, ``al``.

    Raises:
        ValueError: a negative lr or several parameter groups; RuntimeError: an unknown
            line_search_fn (torch's texts).
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ---- the parameters as one flat vector
    def _flat_grad(self):
        m = _xp(self._params[0]._data)
        return m.concatenate([
            m.zeros(p.numel(), p._data.dtype) if p._grad is None
            else p._grad._data.reshape(-1) for p in self._params])

    def _add_step(self, t, d):
        offset = 0
        for p in self._params:
            n = p.numel()
            pd = p._data
            pd += t * d[offset:offset + n].reshape(pd.shape)
            p._bump_version("add_")
            offset += n

    def _copy_params(self):
        return [p._data.copy() for p in self._params]

    def _set_params(self, values):
        for p, v in zip(self._params, values):
            p._data[...] = v
            p._bump_version("copy_")

    def _evaluate(self, closure):
        with grad_mode.enable_grad():
            loss = closure()
        return loss, float(loss)

    def step(self, closure):
        """Run up to ``max_iter`` L-BFGS iterations; returns the loss of the first evaluation.

        Args:
            closure (callable): re-evaluates the model and returns the loss (required).
        """
        with grad_mode.no_grad():
            return self._step(closure)

    def _step(self, closure):
        group = self.param_groups[0]
        lr = group["lr"]
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss, loss = self._evaluate(closure)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if _abs(flat_grad).max() <= tol_grad:
            return orig_loss

        d = _array(state.get("d"))
        t = _number(state.get("t"))
        old_dirs = [_array(v) for v in state.get("old_dirs", [])]
        old_stps = [_array(v) for v in state.get("old_stps", [])]
        ro = [_number(v) for v in state.get("ro", [])]
        h_diag = _number(state.get("H_diag"))
        prev_flat_grad = _array(state.get("prev_flat_grad"))
        prev_loss = state.get("prev_loss")
        al = [_number(v) for v in state["al"]] if "al" in state else None

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            # direction: steepest descent first, then the two-loop recursion over the history
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, h_diag = [], [], [], 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y @ s
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / (y @ y)
                if al is None:
                    al = state["al"] = [None] * history_size  # the key where torch puts it
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = (old_stps[i] @ q) * ro[i]
                    q -= al[i] * old_dirs[i]
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = (old_dirs[i] @ r) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            # step length
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / _abs(flat_grad).sum()) * lr
            else:
                t = lr
            gtd = float(flat_grad @ d)
            if gtd > -tol_change:
                break
            ls_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x0 = self._copy_params()

                def evaluate(step, x0=x0, d=d):
                    self._add_step(step, d)
                    value = self._evaluate(closure)[1]
                    grad = self._flat_grad()
                    self._set_params(x0)
                    return value, grad

                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    evaluate, t, d, loss, flat_grad, gtd, max_ls=max_eval - evals)
                self._add_step(t, d)
                opt_cond = _abs(flat_grad).max() <= tol_grad
            else:
                self._add_step(t, d)
                opt_cond = False
                if n_iter != max_iter:  # no re-evaluation after the last iteration (as torch)
                    loss = self._evaluate(closure)[1]
                    flat_grad = self._flat_grad()
                    opt_cond = _abs(flat_grad).max() <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval or opt_cond:
                break
            if _abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change:
                break

        state["d"] = _tensor_of(d)
        state["t"] = _scalar_state(t)
        state["old_dirs"] = [_tensor_of(v) for v in old_dirs]
        state["old_stps"] = [_tensor_of(v) for v in old_stps]
        state["ro"] = [_scalar_state(v) for v in ro]
        if al is not None:
            state["al"] = [_scalar_state(v) for v in al]
        state["H_diag"] = _scalar_state(h_diag)
        state["prev_flat_grad"] = _tensor_of(prev_flat_grad)
        state["prev_loss"] = prev_loss
        return orig_loss


def _array(t):
    return None if t is None else t._data


# torch keeps the scalars it computed from tensors (t on the first step, H_diag, ro, al) as 0-d
# tensors in the state, and Python numbers as they were (lr, H_diag = 1): so does nbgrad, the
# computation itself running on 0-d values of the parameters' dtype as torch's does
def _scalar_state(v):
    return v if v is None or type(v) in (int, float) else _tensor_of(_xp(v).asarray(v))


def _number(v):
    return v._data[()] if hasattr(v, "_data") else v
