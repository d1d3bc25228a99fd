"""Record: one commit measured alone, as a pull request's run measures each arm, with no
comparison and no verdict: main's figures on a push (`guard record`)."""

from guard.record._models import RECORD_FILE, RECORD_SCHEMA_VERSION, Record, RecordedBatch
from guard.record._read import MAX_RECORD_BYTES, RecordError, parse_record, read_record, record_discrepancies

__all__ = [
    "MAX_RECORD_BYTES",
    "RECORD_FILE",
    "RECORD_SCHEMA_VERSION",
    "Record",
    "RecordError",
    "RecordedBatch",
    "parse_record",
    "read_record",
    "record_discrepancies",
]
