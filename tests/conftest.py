"""Test-wide fixtures: the op result cache that `ptxsim run` and `ptxsim op` use by default
(`$XDG_CACHE_HOME/ptxsim/op-cache`, `workloads.op_result_cache`) lives in temp folders, so
tests never write to the real home and never read results another test saved.

The session's folder covers fixtures of wider scope (module, session) and subprocesses; each
test then gets its own, so a test that swaps in a fake `simulate_op` neither sees cached
real results nor leaves its fakes for others.
"""

from __future__ import annotations

import os

import pytest

CACHE_HOME = "XDG_CACHE_HOME"


@pytest.fixture(scope="session", autouse=True)
def _session_cache_home(tmp_path_factory):
    """XDG_CACHE_HOME -> a temp folder for the whole session (restored after)."""
    before = os.environ.get(CACHE_HOME)
    os.environ[CACHE_HOME] = str(tmp_path_factory.mktemp("xdg-cache-session"))
    yield
    if before is None:
        os.environ.pop(CACHE_HOME, None)
    else:
        os.environ[CACHE_HOME] = before


@pytest.fixture(autouse=True)
def _test_cache_home(_session_cache_home, tmp_path_factory, monkeypatch):
    """XDG_CACHE_HOME -> a fresh temp folder per test."""
    monkeypatch.setenv(CACHE_HOME, str(tmp_path_factory.mktemp("xdg-cache")))
