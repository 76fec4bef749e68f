"""Settings are checked where they are read: every setting has a declared type and range, a
bad value from config.toml, the environment or Python is one line naming where it came
from, the key, the value and what is allowed (exit status 2 from every command, nothing
run); the README lists every setting with its range; a signal weighted 0 is left out of
the fused score while the others still score its pairs."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mmdedup.config import NOT_CONFIGURED, Settings, SettingsError, SignalSettings, Windows, _show, declared_check
from mmdedup.learn.fusion_fit import fit_fusion
from mmdedup.signals import registry
from mmdedup.signals.scorer import fusion_of
from mmdedup.signals.text import TextSettings

from conftest import write_manifest

ROOT = Path(__file__).resolve().parents[1]
CONTENT = [s.name for s in registry.SIGNALS if s.medium]


def settings_classes() -> dict[str, type]:
    """Settings and every registered signal's settings class, by the table they are read from."""
    signals = registry.settings_types()
    return {"": Settings, **{f"[signals.{name}] ": kind for name, kind in signals.items()}}


# --- every setting declares its check ----------------------------------------------------


def test_every_setting_declares_its_type_and_range() -> None:
    missing = [f"{prefix}{f.name}" for prefix, kind in settings_classes().items()
               for f in dataclasses.fields(kind)
               if f.name not in NOT_CONFIGURED and declared_check(kind, f.name) is None]
    assert missing == []
    # and every default passes its own check
    Settings()
    for kind in registry.settings_types().values():
        kind()


def readme_rows() -> list[str]:
    """The README's table rows as config.py declares them: key, default, allowed."""
    rows = []
    for prefix, kind in settings_classes().items():
        for f in dataclasses.fields(kind):
            if f.name not in NOT_CONFIGURED:
                default = f.default_factory() if f.default is dataclasses.MISSING else f.default
                rows.append(f"| `{prefix}{f.name}` | `{_show(default)}` | "
                            f"{declared_check(kind, f.name).describe()} |")
    return rows


def test_readme_lists_every_setting_with_its_range() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = [line for line in readme.splitlines() if re.match(r"\| `(\[signals\.\w+\] )?\w+` \| `", line)]
    expected = readme_rows()
    assert listed == expected, "the README's settings table, as config.py has it:\n" + "\n".join(expected)


# --- bad values, through the command -----------------------------------------------------

RANGE_CASES = [
    ("ingest_chunk = 0", "ingest_chunk = 0", "an integer >= 1"),
    ("tier_weak = 0", "tier_weak = 0", "a number in (0, 1]"),
    ("tier_strong = -0.5", "tier_strong = -0.5", "a number in (0, 1]"),
    ("tier_strong = 0.75", "tier_weak = 0.7, tier_medium = 0.8, tier_strong = 0.75",
     "tier_weak <= tier_medium <= tier_strong"),
    ('tier_strong = "high"', 'tier_strong = "high"', "a number in (0, 1]"),
    ("review_claim_minutes = 0", "review_claim_minutes = 0", "a number > 0"),
    ('review_tiers = ["medium", "maybe"]', 'review_tiers = ["medium", "maybe"]',
     'a list of one or more of "strong", "medium", "weak"'),
    ("[signals.text]\nweight = -0.2", "[signals.text] weight = -0.2", "a number >= 0"),
    ("[signals.image]\nradius = 1.5", "[signals.image] radius = 1.5", "an integer in [0, 64]"),
    ("[signals.video]\ncalibration = [[0, 0], [0.5, 1.5], [1, 1]]",
     "[signals.video] calibration = [[0, 0], [0.5, 1.5], [1, 1]]",
     "two or more [raw, score] pairs, raw increasing within [0, 1], score in [0, 1]"),
    ('[signals.semantic]\nenabled = "yes"', '[signals.semantic] enabled = "yes"',
     'one of "auto", "on", "off"'),
    ("image_radius = -3", "[signals.image] radius = -3", "an integer in [0, 64]"),  # an old key
    ("".join(f"[signals.{name}]\nweight = 0\n" for name in CONTENT),
     ", ".join(f"[signals.{name}] weight = 0.0" for name in CONTENT),
     f"a weight above 0 on at least one content signal ({', '.join(CONTENT)})"),
]


def one_line_error(rc: int, out: str, err: str) -> str:
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("mmdedup: error: "), err
    assert "Traceback" not in err
    return err.strip()


@pytest.mark.parametrize("config,shown,allowed", RANGE_CASES, ids=[c[1][:40] for c in RANGE_CASES])
def test_a_bad_value_in_config_toml_names_the_file_key_value_and_range(cli, home, config, shown, allowed):
    path = home / "config.toml"
    path.write_text(config + "\n")
    err = one_line_error(*cli("stats"))
    assert err == f"mmdedup: error: {path}: {shown}: expected {allowed}"


# Every command reads the settings before it does anything (those that only read too).
COMMANDS = [["ingest", "missing.jsonl"], ["pairs"], ["clusters"], ["label", "a", "b", "--duplicate"], ["serve"],
            ["labels"], ["review"], ["failures"], ["query", "--text", "x"], ["stats"],
            ["report", "--out", "r.html"], ["retrain"], ["delete", "x"], ["expire"], ["thresholds"]]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_refuses_bad_settings_in_one_line(cli, home, command):
    (home / "config.toml").write_text("ingest_chunk = 0\n")
    err = one_line_error(*cli(*command))
    assert err == f"mmdedup: error: {home / 'config.toml'}: ingest_chunk = 0: expected an integer >= 1"


def test_the_list_above_is_every_command() -> None:
    from mmdedup.cli.commands import COMMANDS as ALL

    assert {c[0] for c in COMMANDS} == set(ALL)


@pytest.mark.parametrize("variable,value,shown,allowed", [
    ("MMDEDUP_INGEST_CHUNK", "0", "ingest_chunk = 0", "an integer >= 1"),
    ("MMDEDUP_INGEST_CHUNK", "many", 'ingest_chunk = "many"', "an integer >= 1"),
    ("MMDEDUP_TIER_STRONG", "high", 'tier_strong = "high"', "a number in (0, 1]"),
    ("MMDEDUP_REVIEW_CLAIM_MINUTES", "-5", "review_claim_minutes = -5.0", "a number > 0"),
    ("MMDEDUP_TEXT_WEIGHT", "-1", "[signals.text] weight = -1.0", "a number >= 0"),
    ("MMDEDUP_CLIP_DOWNLOAD", "perhaps", '[signals.clip] download = "perhaps"', "true or false"),
    ("MMDEDUP_WINDOWS", '{news = {window = "7 days"}}', 'windows = {"news": {"window": "7 days"}}',
     Windows().describe()),
])
def test_a_bad_environment_variable_names_the_variable_key_value_and_range(cli, monkeypatch, variable,
                                                                          value, shown, allowed):
    monkeypatch.setenv(variable, value)
    err = one_line_error(*cli("pairs"))
    assert err == f"mmdedup: error: environment variable {variable}: {shown}: expected {allowed}"


def test_values_from_the_file_and_the_environment_checked_together(cli, home, monkeypatch):
    path = home / "config.toml"
    path.write_text("tier_strong = 0.85\n")
    monkeypatch.setenv("MMDEDUP_TIER_MEDIUM", "0.9")
    err = one_line_error(*cli("stats"))
    assert err == (f"mmdedup: error: {path}, environment variable MMDEDUP_TIER_MEDIUM: "
                   "tier_weak = 0.7, tier_medium = 0.9, tier_strong = 0.85: "
                   "expected tier_weak <= tier_medium <= tier_strong")


def test_environment_sets_words_lists_and_flags_too(cli, home, monkeypatch):
    from mmdedup import Platform

    monkeypatch.setenv("MMDEDUP_REVIEW_TIERS", "weak, medium")
    monkeypatch.setenv("MMDEDUP_CLIP_DOWNLOAD", "true")
    monkeypatch.setenv("MMDEDUP_TEXT_CALIBRATION", "[[0, 0], [0.5, 0.9], [1, 1]]")
    with Platform.open(home) as p:
        assert p.settings.review_tiers == ("weak", "medium")
        assert p.signal("clip").config.download is True
        assert p.signal("text").config.calibration == ((0.0, 0.0), (0.5, 0.9), (1.0, 1.0))


def test_invalid_toml_names_the_file_line_and_column(cli, home):
    path = home / "config.toml"
    path.write_text("tier_medium = 0.8\ntier_strong = \n")
    err = one_line_error(*cli("clusters"))
    assert err.startswith(f"mmdedup: error: {path}: not valid TOML: ")
    assert "line 2, column 15" in err
    path.write_bytes(b"tier_medium = \xff\n")
    assert f"{path}: not valid TOML" in one_line_error(*cli("stats"))


def test_unknown_keys_and_tables_name_the_file(cli, home):
    path = home / "config.toml"
    path.write_text("tier_stronk = 0.9\n")
    assert one_line_error(*cli("stats")) == f"mmdedup: error: {path}: unknown settings tier_stronk"
    path.write_text("[signals]\ntext = 3\n")
    assert one_line_error(*cli("stats")) == \
        f"mmdedup: error: {path}: [signals.text] must be a table of settings, not 3"


def test_good_values_are_kept_as_their_type(cli, home):
    from mmdedup import Platform

    (home / "config.toml").write_text('tier_strong = 1\ntier_medium = 0.95\nreview_tiers = ["medium", "weak"]\n'
                                      "[signals.image]\ncalibration = [[0, 1], [16, 0]]\n")
    with Platform.open(home) as p:
        assert p.settings.tier_strong == 1.0 and isinstance(p.settings.tier_strong, float)
        assert p.settings.review_tiers == ("medium", "weak")
        assert p.signal("image").config.calibration == ((0.0, 1.0), (16.0, 0.0))


# --- the Python API ----------------------------------------------------------------------


def test_settings_built_in_python_are_checked() -> None:
    with pytest.raises(SettingsError, match=r"^Settings: ingest_chunk = 0: expected an integer >= 1$"):
        Settings(ingest_chunk=0)
    with pytest.raises(SettingsError, match=r"^Settings: tier_strong = \"high\""):
        Settings(tier_strong="high")
    with pytest.raises(SettingsError, match=r"^TextSettings: weight = -1: expected a number >= 0$"):
        TextSettings(weight=-1)
    with pytest.raises(SettingsError, match=r"tier_weak <= tier_medium <= tier_strong"):
        dataclasses.replace(Settings(), tier_medium=0.95)
    with pytest.raises(SettingsError, match="expected a SignalSettings"):
        Settings(signals={"text": {"weight": 0.5}})
    with pytest.raises(SettingsError, match="weight = nan"):
        TextSettings(weight=float("nan"))
    assert isinstance(SignalSettings(weight=1).weight, float)


# --- a zero weight ------------------------------------------------------------------------


def zero_text_fusion():
    settings = Settings(signals={"text": TextSettings(weight=0.0)})
    return fusion_of(registry.SIGNALS, settings)


def test_a_zero_weight_signal_is_left_out_and_the_others_still_score_the_pair() -> None:
    fusion = zero_text_fusion()
    assert fusion.fuse({"text": 0.95, "image": 0.85}) == pytest.approx(0.85)
    assert fusion.kind({"text": 0.95, "image": 0.85}, 0.8) == "image-reuse"
    mean = (0.3 * 0.85 + 0.2 * 0.9) / (0.3 + 0.2)  # image and dom, text left out
    assert fusion.fuse({"text": 0.2, "image": 0.85, "dom": 0.9}) == pytest.approx(mean)
    assert fusion.fuse({"text": 0.95}) == 0.0
    # with text left out, a page pair's template (dom) alone still never makes a duplicate
    assert fusion.fuse({"text": 0.3, "dom": 1.0}) == 0.0


def test_fitted_weights_are_never_zero() -> None:
    """A tiny default weight fitted and rounded stays above 0: a fit never switches a
    signal out of fusion (nor can it leave every content signal at 0)."""
    rng = np.random.default_rng(3)
    examples = []
    for _ in range(200):
        dup = bool(rng.random() < 0.5)
        examples.append(({"text": float(np.clip(rng.normal(0.8 if dup else 0.4, 0.1), 0, 1)),
                          "dom": float(rng.uniform(0, 1))}, dup))
    model = fit_fusion(examples, {"text": 0.5, "dom": 1e-6}, (0.9, 0.8, 0.7), content=["text"])
    assert model.fitted and model.weights["text"] > 0 and model.weights["dom"] > 0
    Settings().with_weights(model.weights, registry.settings_types())  # valid settings


def picture(path: Path, seed: int, size: int = 256) -> str:
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)
    Image.fromarray(blocks).resize((size, size), Image.Resampling.BILINEAR).save(path)
    return path.name


STORY = ("The city council approved the new budget for public libraries on Tuesday, adding "
         "funds for longer opening hours and a mobile library serving the northern districts.")


@pytest.mark.parametrize("text_weight", [0.5, 0.0])
def test_ingest_with_text_weighted_zero(cli, home, tmp_path, text_weight):
    folder = tmp_path / "corpus"
    folder.mkdir()
    a, b = picture(folder / "a.png", 1), picture(folder / "b.png", 1, size=200)  # one picture, resized
    items = [{"id": "pic-a", "text": "Harbour ferry timetable changes this winter.", "images": [a]},
             {"id": "pic-b", "text": "A recipe for apple pie with cinnamon and butter.", "images": [b]},
             {"id": "txt-c", "text": STORY},
             {"id": "txt-d", "text": STORY.replace("Tuesday", "Wednesday")}]
    manifest = write_manifest(folder, items)
    (home / "config.toml").write_text(f"[signals.text]\nweight = {text_weight}\n")
    rc, _, err = cli("ingest", str(manifest), "--no-progress")
    assert rc == 0, err
    rc, out, _ = cli("pairs", "--format", "jsonl")
    pairs = {(p["a"], p["b"]): p for p in map(json.loads, out.splitlines())}
    pics = pairs[("pic-a", "pic-b")]  # found and scored by the picture whatever text weighs
    assert pics["kind"] == "image-reuse" and pics["signals"]["image"] >= 0.9
    assert pics["signals"]["text"] is not None and pics["signals"]["text"] < 0.7
    assert pics["score"] == pytest.approx(pics["signals"]["image"])
    # weighted 0, text does not count, and nothing else pairs the two texts
    assert (("txt-c", "txt-d") in pairs) == bool(text_weight)
