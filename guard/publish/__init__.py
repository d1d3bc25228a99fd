"""Publish: the sticky pull-request comment, the commit status, and the job's outputs,
summary and annotations; for the service, the words of its alerts and failed checks, and the
upload of a record to it."""

from guard._marker import Marker
from guard.publish._alert import alert_comment_body, alert_issue_body, alert_issue_title
from guard.publish._artifact import gather_artifact
from guard.publish._client import DEFAULT_API_URL, GitHub
from guard._comment_mode import COMMENT_MODES, DEFAULT_COMMENT_MODE
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
from guard.publish._failed_check import CheckOutput, JobFailure, failed_check_output
from guard.publish._publish import PublishRequest, PublishResult, job_links, publish
from guard.publish._status import STATUS_CONTEXT, set_status, status_state
from guard.publish._summary import (
    annotations, headline, worst_gpu_ms_change_pct, worst_tok_per_s_change_pct, write_outputs,
)
from guard.publish._upload import Uploaded, UploadError, upload_record

__all__ = [
    "CheckOutput",
    "COMMENT_MODES",
    "DEFAULT_API_URL",
    "DEFAULT_BOT_LOGIN",
    "DEFAULT_COMMENT_MODE",
    "MAX_BODY_CHARS",
    "STATUS_CONTEXT",
    "CommentMode",
    "CommentResult",
    "GitHub",
    "JobFailure",
    "Marker",
    "MaybeApplied",
    "PublishError",
    "PublishRequest",
    "PublishResult",
    "UploadError",
    "Uploaded",
    "alert_comment_body",
    "alert_issue_body",
    "alert_issue_title",
    "annotations",
    "compose",
    "gather_artifact",
    "cut",
    "failed_check_output",
    "headline",
    "job_links",
    "upload_record",
    "publish",
    "publish_comment",
    "set_status",
    "status_state",
    "worst_gpu_ms_change_pct",
    "worst_tok_per_s_change_pct",
    "write_outputs",
]
