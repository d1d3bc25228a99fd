"""Record: one commit measured alone, as a pull request's run measures each arm, with no
comparison and no verdict: main's figures on a push (`guard record`)."""

from guard.record._models import RECORD_FILE, RECORD_SCHEMA_VERSION, Record, RecordedBatch

__all__ = ["RECORD_FILE", "RECORD_SCHEMA_VERSION", "Record", "RecordedBatch"]
