"""Config loading: defaults, a valid file, and one clear message per bad key."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from guard._errors import ConfigError
from guard.config import GuardConfig, load_config


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "guard.toml"
    path.write_text(text)
    return path


def test_missing_optional_file_gives_defaults(tmp_path: Path) -> None:
    config = load_config(tmp_path / "guard.toml")
    assert config == GuardConfig()
    assert config.workload.batch_sizes == [1, 2]
    assert config.workload.steps == 256
    assert config.workload.warmup_steps == 32
    assert config.build.method == "venv"
    assert config.build.install == "pip install --no-deps ."
    assert config.measure.repeats == 5


def test_valid_file_overrides(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
[workload]
entry = "mypkg.bench:make"
batch_sizes = [1, 4, 8]
steps = 64
options = { layers = 2 }
[build]
method = "none"
[measure]
repeats = 3
allow_few_repeats = true  # the CPU tests' few processes
""",
    )
    config = load_config(path)
    assert config.workload.entry == "mypkg.bench:make"
    assert config.workload.batch_sizes == [1, 4, 8]
    assert config.workload.options == {"layers": 2}
    assert config.build.method == "none"
    assert config.measure.repeats == 3
    assert config.workload.warmup_steps == 32  # untouched keys keep defaults


@pytest.mark.parametrize(
    ("text", "key", "value", "expected"),
    [
        ("[workload]\nsteps = 'many'", "workload.steps", "'many'", "valid integer"),
        ("[workload]\nbatch_sizes = [1, 0]", "workload.batch_sizes", "[1, 0]", "1 or more"),
        ("[workload]\nbatch_sizes = [2, 2]", "workload.batch_sizes", "[2, 2]", "must not repeat"),
        ("[build]\nmethod = 'conda'", "build.method", "'conda'", "'venv', 'none' or 'docker'"),
        ("[workload]\nentry = 'no-colon'", "workload.entry", "'no-colon'", "pkg.module:function"),
        ("[measure]\nrepeats = 1", "measure.repeats", "1", "greater than or equal to 2"),
        ("[measure]\ncpus = [2, -1]", "measure.cpus", "[2, -1]", "CPU ids are 0 or more"),
        ("[measure]\ncpus = [3, 3]", "measure.cpus", "[3, 3]", "must not repeat"),
        ("[workload]\nreference_file = '../ref.json'", "workload.reference_file", "'../ref.json'", "inside the repo"),
        ("[workload]\nreference_file = '/abs/ref.json'", "workload.reference_file", "'/abs/ref.json'", "no leading /"),
        ("[workload]\nentry = '../../x.py:make'", "workload.entry", "'../../x.py:make'", "no '..'"),
        ("[workload]\nentry = '/tmp/x.py:make'", "workload.entry", "'/tmp/x.py:make'", "relative path"),
        ("[workload]\nentry = 'os.path; x:make'", "workload.entry", "'os.path; x:make'", "dotted module name"),
        ("[measure]\nthresholds_file = '/etc/thr.toml'", "measure.thresholds_file", "'/etc/thr.toml'", "no leading /"),
        ("[measure]\nthresholds_file = 'a/../../t.toml'", "measure.thresholds_file", "'a/../../t.toml'", "no '..'"),
        ("[measure]\nthreshold_pct = nan", "measure.threshold_pct", "nan", "finite number"),
        ("[measure]\nthreshold_pct = inf", "measure.threshold_pct", "inf", "finite number"),
        ("[measure]\nthreshold_pct = 100", "measure.threshold_pct", "100", "under 25% in GPU ms per step"),
        ("[measure]\nthreshold_pct = 25", "measure.threshold_pct", "25", "25% would let a decode a quarter slower"),
        ("[measure]\nrepeats = 1000000000", "measure.repeats", "1000000000", "less than or equal to 200"),
        ("[measure]\ntimeout_s = 1e9", "measure.timeout_s", "1000000000.0", "less than or equal to 86400"),
        ("[build]\ntimeout_s = inf", "build.timeout_s", "inf", "finite number"),
        ("[workload]\nsteps = 1000001", "workload.steps", "1000001", "less than or equal to 100000"),
        ("[workload]\nwarmup_steps = 1000001", "workload.warmup_steps", "1000001", "less than or equal to 100000"),
        ("[workload]\nbatch_sizes = [1, 100000]", "workload.batch_sizes", "[1, 100000]", "4096 or less"),
        ("[workload]\noptions = { scale = nan }", "workload.options", "{'scale': nan}", "no nan or inf"),
        ("target_branch = 'HEAD'", "target_branch", "'HEAD'", "a branch name"),
        ("target_branch = 'main~3'", "target_branch", "'main~3'", "a branch name"),
        ("[workload]\nreference_file = '[x](http://e.invalid).json'", "workload.reference_file",
         "'[x](http://e.invalid).json'", "letters, digits"),
        ("[workload]\nreference_file = 'bench/ref.txt'", "workload.reference_file", "'bench/ref.txt'", ".json file"),
    ],
)
def test_bad_value_names_key_value_and_expectation(
    tmp_path: Path, text: str, key: str, value: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    message = info.value.message
    assert f"'{key}'" in message
    assert value in message
    assert expected in message
    assert str(tmp_path / "guard.toml") in message


def test_unknown_key_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown key 'measure.repats' in measure; did you mean 'repeats'\\?"):
        load_config(write(tmp_path, "[measure]\nrepats = 3"))


@pytest.mark.parametrize(("text", "said"), [
    ("[wrokload]\nsteps = 3", "unknown key 'wrokload' in top level; did you mean 'workload'?"),
    ("[workload]\nentyr = 'x.py:make'", "unknown key 'workload.entyr' in workload; did you mean 'entry'?"),
    ("[build]\nisolaton = 'none'", "unknown key 'build.isolaton' in build; did you mean 'isolation'?"),
])
def test_every_unknown_key_gets_a_did_you_mean(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text))
    assert said in info.value.message


def test_an_unknown_key_with_no_near_one_lists_the_sections_keys(tmp_path: Path) -> None:
    from guard.config import GuardConfig

    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "[measure]\nqqqq = 1"))
    listed = info.value.message.split("the keys there are ", 1)[1].split(", ")
    assert listed == sorted(GuardConfig.model_fields["measure"].annotation.model_fields)


def test_syntax_error_is_one_message(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[workload\nsteps = 3"))


def test_required_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml", required=True)


def test_cli_bad_config_exits_2_without_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, "[workload]\nsteps = -4")
    (tmp_path / "repo").mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(tmp_path / "repo"), "--config", str(path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "'workload.steps'" in proc.stderr and "-4" in proc.stderr
    assert proc.stderr.count("\n") == 1  # one message, one line


def test_example_config_lists_the_defaults() -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "guard.toml"
    assert load_config(example) == GuardConfig()


def test_ablation_arms_and_their_errors(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[[arms]]\nname = "no-pad"\nfrom = "head"\nenv = { X = "1" }\n'))
    assert [(a.name, a.source, a.env) for a in config.arms] == [("no-pad", "head", {"X": "1"})]
    with pytest.raises(ConfigError, match="'base' and 'head' are the built-in arms"):
        load_config(write(tmp_path, '[[arms]]\nname = "head"\nfrom = "head"\n'))
    with pytest.raises(ConfigError, match="'arms.0.from'"):
        load_config(write(tmp_path, '[[arms]]\nname = "x"\nfrom = "main"\n'))


def test_thresholds_file_round_trip_and_errors(tmp_path: Path) -> None:
    from guard.config import Thresholds, load_thresholds, write_thresholds

    path = tmp_path / "thr.toml"
    write_thresholds(path, Thresholds(gpu_ms_pct=0.4, tok_per_s_pct=1.7), "A/A on runner x\nsecond line")
    assert path.read_text().startswith("# A/A on runner x\n# second line\n")
    assert load_thresholds(path) == Thresholds(gpu_ms_pct=0.4, tok_per_s_pct=1.7)
    with pytest.raises(ConfigError, match="thresholds file not found; run `guard calibrate`"):
        load_thresholds(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("[thresholds]\ngpu_ms_pct = -1\ntok_per_s_pct = 1\n")
    with pytest.raises(ConfigError, match="thresholds.gpu_ms_pct"):
        load_thresholds(tmp_path / "bad.toml")
    # thresholds that switch the guard off: one message, what was wrong and what to do
    for gpu, tok, key, expected in ((1, 90.95, "tok_per_s_pct", "at most 90.91% (tok/s at one eleventh of itself): "
                                     "past it a runner tells no change at all"),
                                    (25, 1, "gpu_ms_pct", "a threshold under 25% in GPU ms per step (25% would let"),
                                    (279.4, 1901.8, "gpu_ms_pct", "a threshold under 25% in GPU ms per step (279.4%")):
        (tmp_path / "wide.toml").write_text(f"[thresholds]\ngpu_ms_pct = {gpu}\ntok_per_s_pct = {tok}\n")
        with pytest.raises(ConfigError, match=re.escape(f"'thresholds.{key}': {expected}")) as refused:
            load_thresholds(tmp_path / "wide.toml")
        assert "measure.cpus" in refused.value.message and "guard calibrate" in refused.value.message
    # what the user feels may be as coarse as the runner is (rule 5): a run holds it there, GPU ms guards
    (tmp_path / "wide.toml").write_text(
        "[thresholds]\ngpu_ms_pct = 24.9\ntok_per_s_pct = 90.9\nend_to_end_ms_pct = 999.9\n")
    assert load_thresholds(tmp_path / "wide.toml") == Thresholds(gpu_ms_pct=24.9, tok_per_s_pct=90.9,
                                                                 end_to_end_ms_pct=999.9)
    # end-to-end ms past its cap: the same refusal, in its own words
    (tmp_path / "wide.toml").write_text("[thresholds]\ngpu_ms_pct = 1\nend_to_end_ms_pct = 1000.5\n")
    with pytest.raises(ConfigError, match=re.escape("'thresholds.end_to_end_ms_pct': at most 1000% (a step eleven")):
        load_thresholds(tmp_path / "wide.toml")
    (tmp_path / "nan.toml").write_text("[thresholds]\ngpu_ms_pct = nan\ntok_per_s_pct = 1\n")
    with pytest.raises(ConfigError, match="'thresholds.gpu_ms_pct': Input should be a finite number"):
        load_thresholds(tmp_path / "nan.toml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = " + "[" * 100_000 + "]" * 100_000, "nested too deeply to read"),  # past the reader's recursion
        ("[workload.options" + ".a" * 40 + "]\nb = 1", "nested more than 32 deep"),  # dotted: no recursion needed
    ],
)
def test_deeply_nested_toml_is_one_message(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_config(write(tmp_path, text))


def test_a_config_that_is_not_a_small_regular_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="/dev/zero is not a regular file"):
        load_config(Path("/dev/zero"), required=True)
    big = tmp_path / "big.toml"
    big.write_text("# padding\n" * 200_000)  # 2 MB of comments: valid TOML, too large to be a config
    with pytest.raises(ConfigError, match="big.toml is 2000000 bytes, more than the 1024 KiB"):
        load_config(big, required=True)
