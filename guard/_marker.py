"""The hidden first line of a guard comment: how the guard finds its own comment again.

comment.md starts with the bare marker; publishing replaces it with one that carries the
comment's key, verdict and head, read back the next time the pull request is commented."""

from __future__ import annotations

import re

from pydantic import BaseModel

_PREFIX = "<!-- regression-guard:comment"
_SUFFIX = " -->"
_MARKER = re.compile(re.escape(_PREFIX) + r"(?P<attrs>(?: [a-z]+=[^\s>]*)*)" + re.escape(_SUFFIX) + r"\n?")


class Marker(BaseModel):
    """What a comment says of itself in its first line, hidden from readers."""

    key: str = "default"
    verdict: str = ""
    head: str = ""
    regressed: str = ""  # the head sha at which this comment last reported a regression

    def render(self) -> str:
        attrs = "".join(f" {name}={value}" for name, value in self.model_dump().items() if value)
        return f"{_PREFIX}{attrs}{_SUFFIX}"

    @classmethod
    def parse(cls, body: str) -> Marker | None:
        match = _MARKER.match(body)
        if match is None:
            return None
        pairs = dict(attr.split("=", 1) for attr in match["attrs"].split())
        return cls(**{k: v for k, v in pairs.items() if k in cls.model_fields})


# The first line of comment.md: the marker before publishing gives it its attributes.
COMMENT_MARKER = f"{_PREFIX}{_SUFFIX}"


def without_marker(body: str) -> str:
    """`body` without a marker line it starts with."""
    match = _MARKER.match(body)
    return body[match.end():] if match else body
