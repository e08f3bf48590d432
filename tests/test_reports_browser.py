"""report.html renders in a headless Chromium with its tables (skipped without a browser)."""

from __future__ import annotations

import shutil
import subprocess

import pandas as pd
import pytest

import models
import reports

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def _report(tmp_path):
    kernels = pd.DataFrame({"name": ["gemm", "norm"], "op": ["gemm", "rmsnorm"],
                            "stream": ["compute", "compute"], "start_us": [0.0, 10.0],
                            "end_us": [10.0, 12.0], "flops": [1e12, 1e6],
                            "hbm_bytes": [1e8, 1e8]})
    result = {"kernels": kernels, "config": models.load_preset("h100_sxm").to_dict()}
    return reports.write_report(result, tmp_path / "report")


@pytest.mark.skipif(_browser() is None, reason="no chromium/google-chrome on PATH")
def test_headless_browser_dom_has_the_report_tables(tmp_path):
    """The DOM a headless browser builds from report.html holds both tables and the plots."""
    page = _report(tmp_path) / "report.html"
    dom = subprocess.run(
        [_browser(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True).stdout
    assert '<table id="summary">' in dom and '<table id="kernels">' in dom
    assert "gemm" in dom and "data:image/png;base64," in dom


def _dump_dom(page, tmp_path) -> str:
    return subprocess.run(
        [_browser(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True).stdout


@pytest.mark.skipif(_browser() is None, reason="no chromium/google-chrome on PATH")
def test_headless_browser_dom_has_the_compare_tables_and_scatter(tmp_path):
    """compare.html: category, unsimulated and per-kernel tables and the inline scatter."""
    from reports.compare import write_compare

    result = pd.DataFrame({
        "name": ["gemm_a", "gemm_b", "norm", "mystery"],
        "category": ["gemm", "gemm", "norm", None], "op": ["gemm", "gemm", "rmsnorm", None],
        "kind": ["gemm", "gemm", "rmsnorm", None], "sizes": ["{}", "{}", "{}", None],
        "dur_us": [10.0, 20.0, 5.0, 1.0], "simulated_us": [11.0, 18.0, 6.0, float("nan")],
        "status": ["simulated"] * 3 + ["unmatched"],
        "reason": [None] * 3 + ["no mapping rule matches the kernel name"]})
    page = write_compare(result, tmp_path / "cmp") / "compare.html"
    dom = _dump_dom(page, tmp_path)
    for table in ("categories", "unsimulated", "kernels"):
        assert f'<table id="{table}">' in dom
    assert "mystery" in dom and "data:image/png;base64," in dom
