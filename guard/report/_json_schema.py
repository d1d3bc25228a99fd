"""The JSON Schema of report.json, generated from the `Report` model: what other tools read.

    python -m guard.report._json_schema docs/report.schema.json   (or `make schema`)

A test holds the committed file to what this writes, so the two never drift apart."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from guard.report._schema import SCHEMA_VERSION, Report

SCHEMA_FILE = "docs/report.schema.json"


def report_json_schema() -> str:
    schema = Report.model_json_schema(mode="serialization")
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **schema,
        "title": f"regression-guard report.json, schema_version {SCHEMA_VERSION}",
    }
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    text = report_json_schema()
    if argv:
        Path(argv[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
