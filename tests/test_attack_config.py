"""A pull request that tries to set its own pass criteria: through its guard.toml, the files a
config names, paths that lead out of the checkout, and values that exhaust the runner. Real
git repositories, real `guard run` and `guard calibrate` subprocesses."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import cmarkgfm
from cmarkgfm.cmark import Options

from guard.config import config_change
from guard._markdown import block as code_block
from tests.conftest import commit_all, git
from tests.test_pipeline import CONFIG, SLEEPY_STEPS, guard_run, make_repo, write_workload
from tests.workload_sources import SLEEPY_WORKLOAD

# the base's config: method none, batch sizes [1, 2], 3 repeats, 1% threshold
BASE_CONFIG = CONFIG.format(method="none", install="", repeats=3)
# what a head adds to its guard.toml: a pass criterion of its own, and Markdown that would
# close the comment's code block and its <details> if it were not shown as data
HEAD_CONFIG = BASE_CONFIG.replace("repeats = 3", "repeats = 2\nthreshold_pct = 100000").replace(
    "[1, 2]", "[1]"
) + '# ```` </details>\n# <img src="https://e.invalid/pixel.png"> [link](https://e.invalid) ``````\n'


def one_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The one message of a refused run: exit 2, one line, no traceback."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("guard: error: ")]
    assert len(errors) == 1 and errors[0] == lines[-1], proc.stderr
    return errors[0]


@pytest.mark.slow
def test_a_slower_head_that_raises_its_own_threshold_is_still_a_regression(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, config=BASE_CONFIG)
    write_workload(repo, work=30000)  # ten times the work per step
    (repo / "guard.toml").write_text(HEAD_CONFIG)
    commit_all(repo, "ten times slower, and a guard.toml that lets it pass")
    out = tmp_path / "out"
    proc = guard_run(repo, out)
    assert proc.returncode == 1, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "regression"
    assert report["rule"]["gpu_ms"]["pct"] == 1.0 and report["rule"]["tok_per_s"]["pct"] == 1.0  # the base's
    assert [b["batch_size"] for b in report["batch_sizes"]] == [1, 2]  # not the head's [1]
    # the base's 3 processes per arm, not the head's 2 (a slow one measured again adds one to each arm)
    assert report["workload"]["repeats"] == 3 and all(a["repeats"] >= 3 for a in report["arms"])
    assert report["config_change"]["paths"] == ["guard.toml"]
    assert "+threshold_pct = 100000" in report["config_change"]["diff"].splitlines()
    assert "config: from the base commit; the head's changes to guard.toml are not used" in proc.stderr

    comment = (out / "comment.md").read_text()
    assert "This pull request changes `guard.toml`; those changes were not used" in comment
    rendered = cmarkgfm.github_flavored_markdown_to_html(comment, options=Options.CMARK_OPT_UNSAFE)
    # the diff is one code block inside the one <details>, as text: nothing of it became markup
    blocks = re.findall(r'<pre lang="diff"><code>(.*?)</code></pre>', rendered, re.S)
    assert len(blocks) == 1
    shown = html.unescape(blocks[0])
    assert "+threshold_pct = 100000" in shown
    assert '+# <img src="https://e.invalid/pixel.png"> [link](https://e.invalid) ``````' in shown
    assert "+# ```` </details>" in shown
    assert "<img" not in rendered.replace(blocks[0], "") and "e.invalid" not in rendered.replace(blocks[0], "")
    # the diff's fold holds it whole, and no fold closes early; the picture's fold is Mermaid only
    folds = re.findall(r"<details>(.*?)</details>", rendered, re.S)
    assert len(folds) == rendered.count("<details>") == rendered.count("</details>")
    assert [blocks[0] in fold for fold in folds].count(True) == 1
    assert ['<pre lang="mermaid">' in fold and "<pre lang=\"diff\">" not in fold for fold in folds].count(True) == 1


@pytest.mark.slow
def test_the_install_command_is_the_base_commits(tmp_path: Path) -> None:
    """A head cannot name an install command that both arms run (its own code, in base's arm)."""
    marker = tmp_path / "head-install-ran"
    config = CONFIG.format(method="venv", install="sh build.sh", repeats=2).replace("[1, 2]", "[1]")
    repo = make_repo(tmp_path, config=config, files={"build.sh": "echo base build script\n"})
    (repo / "pwn.sh").write_text(f"touch {marker}\n")
    (repo / "guard.toml").write_text(config.replace('install = "sh build.sh"', 'install = "sh pwn.sh"'))
    commit_all(repo, "an install command of the head's own")
    out = tmp_path / "out"
    proc = guard_run(repo, out, "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode in (0, 4), proc.stderr  # a pass, or undecided: no slowdown shown
    assert not marker.exists()
    logs = sorted((tmp_path / "cache").glob("*/build.log"))
    assert len(logs) == 2  # base and head, each built with the base's command
    for log in logs:
        assert "install: sh build.sh\n" in log.read_text() and "base build script" in log.read_text()
    assert json.loads((out / "report.json").read_text())["config_change"]["paths"] == ["guard.toml"]


# Each a base config (what the guard reads) a run must refuse before it measures anything.
REFUSED = [
    ("absolute-thresholds", BASE_CONFIG + 'thresholds_file = "/etc/guard/thr.toml"\n',
     "bad value for 'measure.thresholds_file': '/etc/guard/thr.toml'; expected: a relative path"),
    ("dev-zero-thresholds", BASE_CONFIG + 'thresholds_file = "/dev/zero"\n',
     "bad value for 'measure.thresholds_file': '/dev/zero'"),
    ("entry-escapes", BASE_CONFIG.replace('"wl.py:make"', '"../../x.py:make"'),
     "bad value for 'workload.entry': '../../x.py:make'; expected: 'path/file.py:function' with a relative path"),
    ("nan-threshold", BASE_CONFIG + "threshold_pct = nan\n",
     "bad value for 'measure.threshold_pct': nan; expected: Input should be a finite number"),
    ("huge-repeats", BASE_CONFIG.replace("repeats = 3", "repeats = 1000000000"),
     "bad value for 'measure.repeats': 1000000000; expected: Input should be less than or equal to 200"),
    ("few-repeats", BASE_CONFIG.replace("allow_few_repeats = true", "allow_few_repeats = false"),
     "measure.repeats 3 is under 5 processes per arm, too few for the decision rule to decide a change near the "
     "threshold; use 5 or more, or set measure.allow_few_repeats = true for a quick try"),
    ("threshold-100", BASE_CONFIG + "threshold_pct = 100\n",
     "bad value for 'measure.threshold_pct': 100; expected: a threshold under 25% in GPU ms per step (100% would "
     "let a decode a quarter slower pass); quiet the runner"),
    ("nested", BASE_CONFIG + "x = " + "[" * 50_000 + "]" * 50_000 + "\n", "nested too deeply to read"),
    ("too-large", BASE_CONFIG + "# padding\n" * 120_000, "more than the 1024 KiB such a file may hold"),
]


@pytest.mark.parametrize(("config", "expected"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_bad_base_config_is_one_message(tmp_path: Path, config: str, expected: str) -> None:
    repo = make_repo(tmp_path, config=config)
    message = one_error(guard_run(repo, tmp_path / "out"))
    assert expected in message
    assert "guard.toml (commit " in message  # named as read: from the base commit, not the work tree


def test_a_symlink_in_the_base_commit_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.toml"
    outside.write_text("[thresholds]\ngpu_ms_pct = 99\ntok_per_s_pct = 99\n")
    repo = make_repo(tmp_path, config=BASE_CONFIG + 'thresholds_file = "thr.toml"\n')
    git(repo, "checkout", "--quiet", "main")
    (repo / "thr.toml").symlink_to(outside)
    commit_all(repo, "thresholds through a symlink")
    git(repo, "checkout", "--quiet", "feature")
    git(repo, "merge", "--quiet", "main")
    message = one_error(guard_run(repo, tmp_path / "out"))
    assert "measure.thresholds_file: thr.toml (commit " in message and "is a symlink" in message


def test_a_head_whose_entry_file_links_out_of_its_worktree_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, config=BASE_CONFIG)
    outside = tmp_path / "elsewhere" / "wl.py"
    outside.parent.mkdir()
    outside.write_text((repo / "wl.py").read_text())
    (repo / "wl.py").unlink()
    (repo / "wl.py").symlink_to(outside)
    commit_all(repo, "the workload now lives outside the repository")
    message = one_error(guard_run(repo, tmp_path / "out"))
    assert "workload.entry: wl.py leads outside" in message and "worktree" in message


def test_the_working_tree_is_never_read(tmp_path: Path) -> None:
    """An uncommitted guard.toml (or one only the head has) cannot break or steer the run:
    here the base's own config is refused, which proves which file was read."""
    repo = make_repo(tmp_path, config=BASE_CONFIG.replace("repeats = 3", "repeats = 1"))
    (repo / "guard.toml").write_text(BASE_CONFIG)  # valid, uncommitted
    message = one_error(guard_run(repo, tmp_path / "out"))
    assert "bad value for 'measure.repeats': 1" in message and "(commit " in message


def test_a_caller_config_inside_the_checkout_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, config=BASE_CONFIG)
    (repo / "ci").mkdir()
    (repo / "ci" / "guard.toml").write_text(BASE_CONFIG)
    for given in (repo / "ci" / "guard.toml", Path("ci/guard.toml")):
        proc = subprocess.run(
            [sys.executable, "-m", "guard", "run", "--repo", ".", "--head", "feature", "--config", str(given),
             "--out", str(tmp_path / "out")], cwd=repo, capture_output=True, text=True, timeout=120,
        )
        message = one_error(proc)
        assert "lies inside the repository's work tree" in message and "leave --config out" in message
    # a symlink from outside into the checkout is the same file
    (tmp_path / "link.toml").symlink_to(repo / "ci" / "guard.toml")
    assert "lies inside" in one_error(guard_run(repo, tmp_path / "out", "--config", str(tmp_path / "link.toml")))


@pytest.mark.parametrize("kind", ["fifo", "device-link", "escaping-name", "inside-checkout"])
def test_a_caller_configs_thresholds_file_must_be_a_regular_file_beside_it(tmp_path: Path, kind: str) -> None:
    repo = make_repo(tmp_path, config=BASE_CONFIG)
    folder = tmp_path / "ci-config"
    folder.mkdir()
    name = "thr.toml"
    if kind == "inside-checkout":  # beside the config, and in the pull request's checkout
        folder, name = tmp_path, f"{repo.name}/thr.toml"
        (repo / "thr.toml").write_text("[thresholds]\ngpu_ms_pct = 99\ntok_per_s_pct = 99\n")
        expected = f"measure.thresholds_file: {name}: lies inside the repository's work tree"
    elif kind == "fifo":
        os.mkfifo(folder / name)  # reading it would wait forever
        expected = "thr.toml is not a regular file"
    elif kind == "device-link":
        (folder / name).symlink_to("/dev/zero")  # reading it would fill the memory
        expected = "measure.thresholds_file: thr.toml leads outside"
    else:
        name = "../thr.toml"
        expected = "bad value for 'measure.thresholds_file': '../thr.toml'"
    (folder / "guard.toml").write_text(BASE_CONFIG + f'thresholds_file = "{name}"\n')
    message = one_error(guard_run(repo, tmp_path / "out", "--config", str(folder / "guard.toml")))
    assert expected in message


def test_the_default_base_does_not_follow_a_target_branch_that_disagrees(tmp_path: Path) -> None:
    """Without --base the base's own config may move the target branch, once; the head's never can."""
    repo = make_repo(tmp_path, config='target_branch = "develop"\n' + BASE_CONFIG)
    git(repo, "branch", "develop", "main~0")
    git(repo, "checkout", "--quiet", "develop")
    (repo / "guard.toml").write_text('target_branch = "release"\n' + BASE_CONFIG)
    commit_all(repo, "develop points elsewhere")
    git(repo, "checkout", "--quiet", "feature")
    git(repo, "merge", "--quiet", "develop")
    message = one_error(guard_run(repo, tmp_path / "out"))
    assert "names target_branch 'develop', but the one at the merge-base with 'develop' names 'release'" in message


def test_the_config_diff_is_bounded_and_paths_are_the_configs(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, config=BASE_CONFIG + 'thresholds_file = "thr.toml"\n',
                     files={"thr.toml": "[thresholds]\ngpu_ms_pct = 1\ntok_per_s_pct = 1\n"})
    base_sha = git(repo, "rev-parse", "main")
    (repo / "thr.toml").write_text("[thresholds]\ngpu_ms_pct = 99\ntok_per_s_pct = 99\n")
    (repo / "guard.toml").write_text(BASE_CONFIG + "".join(f"# line {i}\n" for i in range(500)))
    (repo / "wl.py").write_text("# not config\n")
    head_sha = commit_all(repo, "a long config change")
    change = config_change(repo, base_sha, head_sha, ["guard.toml", "thr.toml"])
    assert change is not None and change.paths == ["guard.toml", "thr.toml"]
    assert change.diff_truncated and len(change.diff.splitlines()) == 80
    assert change.diff.startswith("diff --git a/guard.toml b/guard.toml")
    assert config_change(repo, base_sha, base_sha, ["guard.toml", "thr.toml"]) is None


@pytest.mark.parametrize("runs", [1, 3, 4, 9])
def test_no_backtick_run_closes_the_code_block(runs: int) -> None:
    ticks = "`" * runs
    text = f"{ticks}\n {ticks}\n   {ticks}\n+ a {ticks} b\n"
    block = code_block(text, "diff")
    fence = block.split("diff\n", 1)[0]
    assert len(fence) == max(3, runs + 1)
    rendered = cmarkgfm.github_flavored_markdown_to_html(block + "\n\nafter\n")
    assert html.unescape(re.search(r"<code[^>]*>(.*?)</code>", rendered, re.S).group(1)) == text
    assert rendered.endswith("<p>after</p>\n")


@pytest.mark.slow
def test_calibrate_reads_the_config_of_its_ref(tmp_path: Path) -> None:
    # a steady workload, and repeats enough that its spread is not too uncertain to guard with
    config = BASE_CONFIG.replace("repeats = 3", "repeats = 4").replace("[1, 2]", "[1]")
    repo = make_repo(tmp_path, config=config.replace("steps = 12", SLEEPY_STEPS), files={"wl.py": SLEEPY_WORKLOAD})
    (repo / "guard.toml").write_text("[measure]\nrepeats = 1000000000\n")  # uncommitted, and absurd
    out = tmp_path / "thr.toml"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "calibrate", "--repo", str(repo), "--ref", "main", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    # the ref's values, not the working tree's: 4 repeats per side, batch size 1 only
    assert "A/A, 4 repeats per side" in out.read_text()
    assert "bs 1: " in out.read_text() and "bs 2: " not in out.read_text()
