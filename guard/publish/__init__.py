"""Publish: the sticky pull-request comment, the commit status, and the job's outputs,
summary and annotations."""

from guard._marker import Marker
from guard.publish._artifact import gather_artifact
from guard.publish._client import DEFAULT_API_URL, GitHub
from guard.publish._comment import (
    DEFAULT_BOT_LOGIN,
    MAX_BODY_CHARS,
    CommentMode,
    CommentResult,
    compose,
    cut,
    publish_comment,
)
from guard.publish._errors import MaybeApplied, PublishError
from guard.publish._publish import PublishRequest, PublishResult, job_links, publish
from guard.publish._status import STATUS_CONTEXT, set_status, status_state
from guard.publish._summary import (
    annotations, headline, worst_gpu_ms_change_pct, worst_tok_per_s_change_pct, write_outputs,
)

__all__ = [
    "DEFAULT_API_URL",
    "DEFAULT_BOT_LOGIN",
    "MAX_BODY_CHARS",
    "STATUS_CONTEXT",
    "CommentMode",
    "CommentResult",
    "GitHub",
    "Marker",
    "MaybeApplied",
    "PublishError",
    "PublishRequest",
    "PublishResult",
    "annotations",
    "compose",
    "gather_artifact",
    "cut",
    "headline",
    "job_links",
    "publish",
    "publish_comment",
    "set_status",
    "status_state",
    "worst_gpu_ms_change_pct",
    "worst_tok_per_s_change_pct",
    "write_outputs",
]
