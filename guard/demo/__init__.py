"""`guard demo`: the whole pipeline on a throwaway repository holding the reference engine."""

from guard.demo._repo import make_demo_repo
from guard.demo._run import run_demo
from guard.demo._scenarios import DEFAULT_SCENARIO, SCENARIOS

__all__ = ["DEFAULT_SCENARIO", "SCENARIOS", "make_demo_repo", "run_demo"]
