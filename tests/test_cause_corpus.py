"""Capture-change detection on the corpus of real engine commits holds the precision and recall it was measured at.

The floors are the figures of docs/notebook/capture-detection.md: a change that finds fewer of the
labelled capture changes, or flags more of the others, fails here and names the commits.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest

from benchmarks.capture_corpus import CORPUS, INDEX, load_corpus, measure
from guard.cause import find_capture_changes

# true positives / (true positives + false positives), true positives / labelled capture changes
PRECISION_FLOOR = Fraction(44, 47)
RECALL_FLOOR = Fraction(44, 46)


@pytest.mark.slow
def test_detection_on_the_corpus_keeps_its_precision_and_recall():
    result = measure(find_capture_changes)

    tp, fp, fn = len(result.true_positives), len(result.false_positives), len(result.false_negatives)
    precision, recall = Fraction(tp, tp + fp), Fraction(tp, tp + fn)
    misclassified = "\n".join(result.misclassified())
    assert precision >= PRECISION_FLOOR, f"precision {float(precision):.3f} < {float(PRECISION_FLOOR):.3f}:\n" + (
        misclassified)
    assert recall >= RECALL_FLOOR, f"recall {float(recall):.3f} < {float(RECALL_FLOOR):.3f}:\n{misclassified}"


def test_the_corpus_is_labelled_real_commits_kept_as_small_diffs():
    commits = load_corpus()
    index = json.loads(INDEX.read_text())

    assert 40 <= len(commits) <= 90
    positives = [c for c in commits if c.label == "capture"]
    assert len(positives) * 3 >= len(commits)
    assert len({c.sha for c in commits}) == len(commits)
    for commit in commits:
        assert re.fullmatch(r"[0-9a-f]{40}", commit.sha), commit.sha
        assert commit.reason and commit.subject and commit.files, commit.name
        assert (CORPUS / commit.diff).is_file(), commit.diff
    on_disk = {p.name for p in CORPUS.iterdir()} - {"index.json"}
    assert on_disk == {c.diff for c in commits}  # no diff the index does not name
    assert sum(p.stat().st_size for p in CORPUS.iterdir()) < 2_000_000
    assert index["commits"][0].keys() >= {"repo", "sha", "subject", "label", "reason", "diff"}
