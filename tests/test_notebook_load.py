"""A long session in a real kernel (nbclient), the non-timing half of benchmarks/bench_load.py:
live widgets do not pile up, each saved panel stays small, the kernel does not grow with cells.

Timings are the benchmark's business (benchmarks/README.md); here only counts and bytes.
"""

import sys
from pathlib import Path

import pytest

pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("anywidget")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench_load  # noqa: E402

from nbgrad.notebook import extension  # noqa: E402

CELLS = 40


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("load")
    return (bench_load.session(CELLS, False, bench_load.REPO, tmp),
            bench_load.session(CELLS, True, bench_load.REPO, tmp))


def test_every_cell_gets_one_panel_and_old_widgets_close(sessions):
    without, with_ = sessions
    assert without["panels"] == 0 and with_["panels"] == CELLS
    # the last KEEP_LIVE panels, and the one Layout they share; nothing per past cell
    assert with_["live_widgets"] <= extension.KEEP_LIVE + 1


def test_saved_size_per_panel_is_capped(sessions):
    without, with_ = sessions
    per_panel = (with_["saved_bytes"] - without["saved_bytes"]) / with_["panels"]
    assert per_panel <= 50_000, per_panel
    assert with_["max_output_bytes"] <= extension.MAX_STATIC_BYTES + 2_000


def test_kernel_memory_does_not_grow_with_the_panels(sessions):
    without, with_ = sessions
    assert with_["growth_mb"] - without["growth_mb"] < 50
