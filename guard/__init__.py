"""regression-guard: stops decode slowdowns in GPU inference engines before they merge."""

from guard._errors import BuildError, ConfigError, GitError, GuardError, HarnessError, TraceError

__version__ = "0.1.0"
# The config file a repository's base commit holds; here, so that the command line names it
# without loading the config stage.
DEFAULT_CONFIG_NAME = "guard.toml"

__all__ = ["BuildError", "ConfigError", "GitError", "GuardError", "HarnessError", "TraceError", "__version__"]
