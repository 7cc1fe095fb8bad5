"""Which of several equal elements torch's CPU kernels report, reproduced: kthvalue's quickselect
(ATen's quick_select_template) and topk's libstdc++ partial_sort / nth_element + sort
(ATen's TopKImpl.h). Only rows with ties come here: the rows of the op table find values and
indices with numpy, and call these on the rows where the choice among equal elements shows.
Pure Python on one row at a time, NaN counting as the largest value, as in torch.
"""
from __future__ import annotations


def _gt(x, y):
    return (x != x and y == y) or x > y


def _lt(x, y):
    return (x == x and y != y) or x < y


def _lg(n):
    return n.bit_length() - 1


def kth_index(values, k):
    """The index into the list `values` of the element at sorted position `k` (0-based) as
    torch.kthvalue's quickselect leaves it."""
    arr = list(values)
    ids = list(range(len(arr)))
    gt = _gt

    def swap(i, j):
        arr[i], arr[j] = arr[j], arr[i]
        ids[i], ids[j] = ids[j], ids[i]

    lo, hi = 0, len(arr) - 1
    while True:
        if hi <= lo:
            return ids[k]
        if hi == lo + 1:
            if gt(arr[lo], arr[hi]):
                swap(lo, hi)
            return ids[k]
        p = lo + (hi - lo) // 2  # median of three, moved to lo + 1, lo, hi
        swap(p, lo + 1)
        if gt(arr[lo + 1], arr[hi]):
            swap(lo + 1, hi)
        if gt(arr[lo], arr[hi]):
            swap(lo, hi)
        if gt(arr[lo + 1], arr[lo]):
            swap(lo + 1, lo)
        i, j = lo + 1, hi
        piv = arr[lo]
        while True:
            i += 1
            while gt(piv, arr[i]):
                i += 1
            j -= 1
            while gt(arr[j], piv):
                j -= 1
            if j < i:
                break
            swap(i, j)
        swap(lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1


def topk_indices(values, k, largest, sorted=True):
    """The indices, in order, of the `k` largest (smallest) of the list `values` as torch.topk
    gives them: libstdc++'s partial_sort when k * 64 <= n, else nth_element and (sorted) a
    sort of the first k - 1, the algorithms transcribed step by step (their choice among equal
    elements, and the order nth_element leaves, is the point)."""
    q = list(enumerate(values))  # (index, value), compared by value
    n = len(q)
    order = _gt if largest else _lt

    def comp(x, y):
        return order(x[1], y[1])

    partial_sort, sort, nth_element = _stl(q, comp)
    if k == 0:
        return []
    if k * 64 <= n:
        partial_sort(0, k, n)
    else:
        nth_element(0, k - 1, n)
        if sorted:
            sort(0, k - 1)
    return [i for i, _ in q[:k]]


def sort_indices(values, descending):
    """The indices of the list `values` in the order torch.sort (stable=False) gives them:
    libstdc++'s std::sort (introsort) of (value, index) pairs with ATen's KeyValueCompAsc /
    KeyValueCompDesc (NaN the largest)."""
    q = list(enumerate(values))
    order = _gt if descending else _lt

    def comp(x, y):
        return order(x[1], y[1])

    _stl(q, comp)[1](0, len(q))
    return [i for i, _ in q]


def mode_index(values):
    """(value, index) torch.mode reports for the list `values`: std::sort of (value, index)
    pairs by `<`, then the first value of the largest count, and the index its run ends at."""
    q = list(enumerate(values))

    def comp(x, y):
        return x[1] < y[1]

    _stl(q, comp)[1](0, len(q))
    best, count, run = None, 0, 0
    for i, (j, v) in enumerate(q):
        run += 1
        if i == len(q) - 1 or v != q[i + 1][1]:
            if run > count:
                best, count = (v, j), run
            run = 0
    return best


def _stl(q, comp):
    """libstdc++'s partial_sort, sort and nth_element on the list `q` in place, with `comp`."""

    def adjust_heap(first, hole, length, value):
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if comp(q[first + child], q[first + child - 1]):
                child -= 1
            q[first + hole] = q[first + child]
            hole = child
        if length & 1 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            q[first + hole] = q[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and comp(q[first + parent], value):
            q[first + hole] = q[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        q[first + hole] = value

    def make_heap(first, last):
        length = last - first
        if length < 2:
            return
        parent = (length - 2) // 2
        while True:
            adjust_heap(first, parent, length, q[first + parent])
            if parent == 0:
                return
            parent -= 1

    def pop_heap(first, last, result):
        value = q[result]
        q[result] = q[first]
        adjust_heap(first, 0, last - first, value)

    def heap_select(first, middle, last):
        make_heap(first, middle)
        for i in range(middle, last):
            if comp(q[i], q[first]):
                pop_heap(first, middle, i)

    def sort_heap(first, last):
        while last - first > 1:
            last -= 1
            pop_heap(first, last, last)

    def partial_sort(first, middle, last):
        heap_select(first, middle, last)
        sort_heap(first, middle)

    def move_median_to_first(result, a, b, c):
        if comp(q[a], q[b]):
            if comp(q[b], q[c]):
                m = b
            elif comp(q[a], q[c]):
                m = c
            else:
                m = a
        elif comp(q[a], q[c]):
            m = a
        elif comp(q[b], q[c]):
            m = c
        else:
            m = b
        q[result], q[m] = q[m], q[result]

    def unguarded_partition(first, last, pivot):
        while True:
            while comp(q[first], q[pivot]):
                first += 1
            last -= 1
            while comp(q[pivot], q[last]):
                last -= 1
            if not first < last:
                return first
            q[first], q[last] = q[last], q[first]
            first += 1

    def partition_pivot(first, last):
        mid = first + (last - first) // 2
        move_median_to_first(first, first + 1, mid, last - 1)
        return unguarded_partition(first + 1, last, first)

    def linear_insert(last):
        val = q[last]
        nxt = last - 1
        while comp(val, q[nxt]):
            q[last] = q[nxt]
            last = nxt
            nxt -= 1
        q[last] = val

    def insertion_sort(first, last):
        if first == last:
            return
        for i in range(first + 1, last):
            if comp(q[i], q[first]):
                val = q[i]
                q[first + 1:i + 1] = q[first:i]
                q[first] = val
            else:
                linear_insert(i)

    def introsort_loop(first, last, depth):
        while last - first > 16:
            if depth == 0:
                partial_sort(first, last, last)
                return
            depth -= 1
            cut = partition_pivot(first, last)
            introsort_loop(cut, last, depth)
            last = cut

    def sort(first, last):
        if first == last:
            return
        introsort_loop(first, last, _lg(last - first) * 2)
        if last - first > 16:
            insertion_sort(first, first + 16)
            for i in range(first + 16, last):
                linear_insert(i)
        else:
            insertion_sort(first, last)

    def nth_element(first, nth, last):
        if first == last or nth == last:
            return
        depth = _lg(last - first) * 2
        while last - first > 3:
            if depth == 0:
                heap_select(first, nth + 1, last)
                q[first], q[nth] = q[nth], q[first]
                return
            depth -= 1
            cut = partition_pivot(first, last)
            if cut <= nth:
                first = cut
            else:
                last = cut
        insertion_sort(first, last)

    return partial_sort, sort, nth_element
