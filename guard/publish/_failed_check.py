"""The words of a failed job's Check Run: what failed and what to do, by the kind of failure
the service found. The job's own error is shown as it was stored, in a code block (data)."""

from __future__ import annotations

from pydantic import BaseModel

from guard._markdown import block
from guard._types import FailureKind

MAX_DETAIL_CHARS = 4_000

_WHAT = {
    "timeout": "The measurement ran over the job's time limit and was stopped",
    "no-report": "The measuring command exited without writing a report",
    "report-refused": "The report the measurement left did not hold up when it was read back",
    "report-mismatch": "The report the measurement left is for other commits than this job's",
    "fetch": "The commits to measure could not be fetched",
    "github": "A call to GitHub failed, so the job could not go on",
    "dispatch": "The measuring workflow could not be dispatched",
    "worker-lost": "The measuring host stopped during this job on every try",
    "cancelled": "The service's operator stopped this job",
    "internal": "The service failed on this job",
}
_TO_DO = {
    "timeout": "Make the workload shorter (fewer `workload.steps` or `measure.repeats` in guard.toml), or ask "
               "the service's operator for a longer job time limit; then re-run this check.",
    "no-report": "Read the log's end above: fix what it names (the build, the workload) and push, or re-run "
                 "this check if it was the host.",
    "report-refused": "A report is decided again from its own numbers before anything is posted: the measuring "
                      "command must leave the report.json that `guard run` wrote, unedited.",
    "report-mismatch": "The measuring command must measure the job's base and head (`GUARD_JOB_BASE`, "
                       "`GUARD_JOB_HEAD`); re-run this check once it does.",
    "fetch": "Check that both commits are pushed and that the App can read the repository (Contents: read); "
             "then re-run this check.",
    "github": "Re-run this check; if it fails again, check the App's permissions (Checks, Issues and Pull "
              "requests: write; Contents and Metadata: read).",
    "dispatch": "Check that the workflow named by `--dispatch-workflow` exists on the dispatch branch and takes "
                "the inputs base, head, pr and guard-job; then re-run this check.",
    "worker-lost": "Look at the host (out of memory, a GPU fault, a restart) before re-running this check.",
    "cancelled": "Re-run this check to measure it after all, or ask the service's operator why it was stopped.",
    "internal": "The service's log names the fault. Re-run this check; if it fails the same way, report it.",
}


class JobFailure(BaseModel):
    """Why a job failed, as the service found it: the kind decides the words, the detail is data."""

    kind: FailureKind
    detail: str  # the job's error as stored
    job_id: int


class CheckOutput(BaseModel):
    title: str
    summary: str


def failed_check_output(failure: JobFailure) -> CheckOutput:
    detail = failure.detail if len(failure.detail) <= MAX_DETAIL_CHARS else \
        "..." + failure.detail[-MAX_DETAIL_CHARS:]
    summary = (f"**{_WHAT[failure.kind]}**, so this job gives the commit no verdict.\n\n"
               f"{block(detail)}\n\n{_TO_DO[failure.kind]}\n\n"
               f"_Job {failure.job_id} of the regression-guard service._\n")
    return CheckOutput(title=f"Failed: {_WHAT[failure.kind][0].lower()}{_WHAT[failure.kind][1:]}"[:255],
                       summary=summary)
