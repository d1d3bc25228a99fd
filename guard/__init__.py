"""regression-guard: stops decode slowdowns in GPU inference engines before they merge."""

from importlib.metadata import PackageNotFoundError, version

from guard._errors import BuildError, ConfigError, GitError, GuardError, HarnessError, TraceError

UNKNOWN_VERSION = "0.0"  # pyproject.toml's fallback-version: a build that knew no tag and no commit
# The installed distribution's, which hatch-vcs took from git's tags when it was built
try:
    __version__ = version("regression-guard")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = UNKNOWN_VERSION
# The config file a repository's base commit holds; here, so that the command line names it
# without loading the config stage.
DEFAULT_CONFIG_NAME = "guard.toml"

__all__ = ["BuildError", "ConfigError", "GitError", "GuardError", "HarnessError", "TraceError", "__version__"]
