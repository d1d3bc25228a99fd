"""examples/guard.toml, the file the README points a new user to, held to the config model: it
names every key the model takes, the values it sets are the defaults (unless its comment says
otherwise), and it parses as a config; the README's own guard.toml parses too. So is
docs/configuration.md's table of keys: a row per key, each with the model's default."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from guard.config import GuardConfig, parse_config

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "guard.toml"
CONFIGURATION = ROOT / "docs" / "configuration.md"
NOT_DEFAULT = "(not the default)"  # a value the example sets for show, marked so in its comment


def _keys(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every key of the config, dotted, with its default; sections by their own keys."""
    found: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        key = field.alias or name
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found |= _keys(annotation, f"{prefix}{key}.")
        else:
            found[f"{prefix}{key}"] = field.get_default(call_default_factory=True)
    return found


def _named(text: str) -> set[str]:
    """The keys the example names, set or commented out, dotted with their section."""
    named, section = set(), ""
    for line in text.splitlines():
        if header := re.match(r"#?\s*\[\[?([a-z_.]+)\]\]?(\s+#.*)?$", line.strip()):
            section = header.group(1) + "."
        elif key := re.match(r"#?\s*([a-z_]+)\s*=", line.strip()):
            named.add(section + key.group(1))
    return named


def test_the_example_names_every_key_the_config_takes() -> None:
    text = EXAMPLE.read_text()
    missing = sorted(k for k in _keys(GuardConfig) if k not in _named(text) and not k.startswith("arms"))
    assert not missing, f"examples/guard.toml does not name: {', '.join(missing)}"


def test_the_values_the_example_sets_are_the_defaults_and_it_parses() -> None:
    text = EXAMPLE.read_text()
    config = parse_config(tomllib.loads(text), source=str(EXAMPLE))
    defaults = GuardConfig()
    marked = {section + key for section, key in _marked(text)}
    for dotted in _keys(GuardConfig):
        if dotted in marked or dotted.startswith("arms"):
            continue
        shown, default = _at(config, dotted), _at(defaults, dotted)
        assert shown == default, f"examples/guard.toml sets {dotted} = {shown!r}, the default is {default!r}"


def _marked(text: str) -> list[tuple[str, str]]:
    found, section = [], ""
    for line in text.splitlines():
        if header := re.match(r"\[\[?([a-z_.]+)\]\]?(\s+#.*)?$", line.strip()):
            section = header.group(1) + "."
        elif (key := re.match(r"([a-z_]+)\s*=", line.strip())) and NOT_DEFAULT in line:
            found.append((section, key.group(1)))
    return found


def _at(config: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        config = getattr(config, part)
    return config


def test_the_readmes_guard_toml_parses_as_a_config() -> None:
    shown = re.findall(r"^```toml\n(.*?)^```", (ROOT / "README.md").read_text(), re.M | re.S)
    assert len(shown) == 1, "the README shows one guard.toml"
    parse_config(tomllib.loads(shown[0]), source="README.md")


def _table(text: str) -> list[tuple[str, str]]:
    """docs/configuration.md's table of keys: each row's key, dotted (`[[arms]]` as `arms`), and
    its default cell as written."""
    rows = []
    for line in text.splitlines():
        if line.startswith("| `"):
            key, default = (cell.strip() for cell in line.split("|", 3)[1:3])
            rows.append((key.strip("`[]"), default))
    return rows


NAMES_NO_VALUE = object()  # a default cell that describes the default (`none`, "the guard's interpreter")


def _stated(cell: str) -> Any:
    """A default cell's value: a TOML literal in backticks; NAMES_NO_VALUE for words."""
    literal = re.fullmatch(r"`([^`]+)`", cell)
    if literal is None:
        return NAMES_NO_VALUE
    try:
        return tomllib.loads(f"value = {literal[1]}")["value"]
    except tomllib.TOMLDecodeError:
        return NAMES_NO_VALUE  # a key named as the default, e.g. `threshold_pct`


def test_the_configuration_page_lists_every_key_once_and_no_other() -> None:
    listed = [key for key, _ in _table(CONFIGURATION.read_text())]
    keys = set(_keys(GuardConfig))
    assert sorted(k for k in keys if k not in listed) == [], "docs/configuration.md's table lacks these keys"
    assert sorted(k for k in listed if k not in keys) == [], "docs/configuration.md lists keys the config has not"
    assert sorted(k for k in set(listed) if listed.count(k) > 1) == [], "docs/configuration.md lists a key twice"


def test_the_configuration_pages_defaults_are_the_models() -> None:
    """A value in backticks is the default; words (`none`, "the guard's interpreter", another
    key's name) stand only for a default the model leaves unset, which another setting fills."""
    defaults = _keys(GuardConfig)
    wrong = []
    for key, cell in _table(CONFIGURATION.read_text()):
        if key not in defaults or key == "arms":
            continue  # the test above names it; `[[arms]]`: tables a config adds, none by default
        stated, default = _stated(cell), defaults[key]
        if (stated is NAMES_NO_VALUE) != (default is None) or (stated is not NAMES_NO_VALUE and stated != default):
            wrong.append(f"{key}: the page says {cell}, the default is {default!r}")
    assert wrong == []
