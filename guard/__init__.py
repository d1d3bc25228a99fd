"""regression-guard: stops decode slowdowns in GPU inference engines before they merge."""

from guard._errors import BuildError, ConfigError, GitError, GuardError, HarnessError, TraceError

__version__ = "0.1.0"

__all__ = ["BuildError", "ConfigError", "GitError", "GuardError", "HarnessError", "TraceError", "__version__"]
