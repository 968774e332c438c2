"""Figure helpers: PNG output and log-log slope fits, without pyplot."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure

from depthscale.report.figures import loglog_fit_panel, new_figure, save_figure

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_new_figure_shapes() -> None:
    fig, axes = new_figure()
    assert isinstance(fig, Figure) and axes.shape == (1,)
    fig, axes = new_figure(ncols=3, nrows=2, width=2.0, height=1.5)
    assert axes.shape == (6,)
    assert tuple(fig.get_size_inches()) == pytest.approx((6.0, 3.0))
    with pytest.raises(ValueError, match="at least one panel"):
        new_figure(ncols=0)


def test_save_figure_writes_png_without_pyplot(tmp_path: Path) -> None:
    pyplot_loaded = "matplotlib.pyplot" in sys.modules
    fig, axes = new_figure(ncols=2)
    axes[0].plot([1, 2, 3], [1, 4, 9])
    axes[1].set_title("second")
    path = save_figure(fig, tmp_path / "figs" / "claim.png")
    assert path == tmp_path / "figs" / "claim.png"
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 1000
    assert [p.name for p in path.parent.iterdir()] == ["claim.png"]
    assert ("matplotlib.pyplot" in sys.modules) == pyplot_loaded


def test_loglog_fit_panel_exact_slope() -> None:
    _fig, axes = new_figure()
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    slope = loglog_fit_panel(axes[0], x, 3 * x**-1.5, label="3 x^-1.5")
    assert slope == pytest.approx(-1.5, abs=1e-12)
    assert axes[0].get_xscale() == "log" and axes[0].get_yscale() == "log"
    labels = [t.get_text() for t in axes[0].get_legend().get_texts()]
    assert labels == ["3 x^-1.5", "3 x^-1.5 fit: slope -1.5"]
    assert len(axes[0].get_lines()) == 1


def test_loglog_fit_panel_without_fit_and_degenerate_data() -> None:
    _fig, axes = new_figure(ncols=2)
    x = [1.0, 10.0, 100.0, -1.0, float("nan")]
    y = [1.0, 100.0, 10000.0, 5.0, 1.0]
    assert loglog_fit_panel(axes[0], x, y, label="sq", fit=False) == pytest.approx(2.0)
    assert axes[0].get_lines() == []
    assert np.isnan(loglog_fit_panel(axes[1], [2.0, 2.0], [1.0, 3.0], label="one x"))
    with pytest.raises(ValueError, match="differ in length"):
        loglog_fit_panel(axes[1], [1.0, 2.0], [1.0], label="bad")


def test_crowded_log_ticks_keep_their_marks_but_not_overlapping_labels() -> None:
    """A tick within 1/12 of the axis' decades of the last labelled one is left blank, and the
    largest value is always labelled (its crowding neighbour blanked instead): laws-table1's
    cnn1d depths L = 13, 14, 15, 16 printed over each other."""
    from depthscale.report.figures import spaced_labels

    assert spaced_labels([2, 3, 4, 6, 8, 11, 13, 14, 15, 16]) == [
        "2", "3", "4", "6", "8", "11", "", "", "", "16"]
    assert spaced_labels([1, 2, 3, 4, 5, 6, 7, 8]) == ["1", "2", "3", "4", "5", "6", "", "8"]
    assert spaced_labels([2, 3, 4, 5, 6, 8, 11, 16]) == ["2", "3", "4", "5", "6", "8", "11", "16"]
    assert spaced_labels([4, 8, 16, 32, 64]) == ["4", "8", "16", "32", "64"]
    assert spaced_labels([512, 4096]) == ["512", "4096"] and spaced_labels([5]) == ["5"]
