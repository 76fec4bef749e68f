"""The ray engine on a local Ray cluster of two nodes (a head and a second node, one CPU
each, started with `ray start` as a user starts them): a manifest, a folder and Python
items give the pairs, tiers, clusters and failures the local engine gives, on SQLite and
on PostgreSQL; a rerun through it finds everything unchanged; a cluster that is not there
is one clear line. Faults: a worker killed mid-job (its block is done again), the job
killed and run again, every database connection dropped mid-job."""

from __future__ import annotations

import os
import signal
from collections import Counter
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
from PIL import Image
from sqlalchemy import create_engine, text

from mmdedup import Platform
from mmdedup.extract import clip
from mmdedup.pipeline.ingest import PixelsWanted
from mmdedup.pipeline import ray_engine
from mmdedup.pipeline.ray_engine import RayEngine, extract_block, folder_blocks, take_env

from conftest import PG_URL, write_manifest
from helpers import TINY, finish, mmdedup, pairs_by_ids, wait_for

pytest.importorskip("ray")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "bench"))
from concurrent_ingest import corpus  # noqa: E402
from hot_template import copies  # noqa: E402

RAY = str(Path(sys.executable).with_name("ray"))
# A test cluster of this machine: no token to share between its nodes and the CLI.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
# Small blocks and chunks: a few hundred items make many of each, and blocks of a chunk's
# size that end mid-chunk (bytes) as well as ids repeated across blocks.
ENV = {**RAY_ENV, "MMDEDUP_INGEST_CHUNK": "16", "MMDEDUP_TFIDF_MIN_DOCS": "100"}
COPIES = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """HOST:PORT of a head and a second node, stopped at the end of the module."""
    env = {**os.environ, **RAY_ENV}
    port = free_port()
    started = subprocess.run(
        [RAY, "start", "--head", "--port", str(port), "--num-cpus", "1", "--include-dashboard=false",
         "--node-ip-address", "127.0.0.1", "--disable-usage-stats"],
        env=env, capture_output=True, text=True, timeout=180)
    address = f"127.0.0.1:{port}"
    try:
        assert started.returncode == 0, started.stderr
        # A GPU as Ray counts them (a resource, not a device): the CLIP test's encoder
        # runs in an actor that asks for one, on this machine's CPU.
        second = subprocess.run([RAY, "start", "--address", address, "--num-cpus", "1", "--num-gpus", "1",
                                 "--node-ip-address", "127.0.0.1"],
                                env=env, capture_output=True, text=True, timeout=180)
        assert second.returncode == 0, second.stderr
        yield address
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=180)


def picture(path: Path, seed: int, quality: int | None = None) -> None:
    pixels = np.random.default_rng(seed).integers(0, 256, (12, 16, 3), dtype=np.uint8)
    image = Image.fromarray(pixels).resize((320, 240), Image.BICUBIC)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, quality=quality) if quality else image.save(path)


def mixed_manifest(folder: Path) -> Path:
    """Texts with near copies, pictures with a re-compressed copy, and bad records: a
    line that is not JSON, a picture that is not there, an id that an earlier block used."""
    first, second = corpus(COPIES)
    for i in range(3):
        picture(folder / f"img/p{i}.png", seed=i)
    picture(folder / "img/p0-copy.jpg", seed=0, quality=70)
    pictures = [{"id": f"pic{i}", "images": [f"img/p{i}.png"]} for i in range(3)]
    records: list = [*first[:60], *pictures, "{not json", *first[60:], "",
                     {"id": "pic0-copy", "images": ["img/p0-copy.jpg"]},
                     {"id": "gone", "images": ["img/missing.png"]}, *second,
                     {"id": first[3]["id"], "text": "the same id again, many blocks later"}]
    return write_manifest(folder, records)


def outcome(home: Path, url: str) -> dict:
    """Pairs, clusters and failures by item ids (pks differ between stores)."""
    with Platform.open(home, url) as p:
        clusters = sorted((c.canonical, tuple(sorted(c.members))) for c in p.clusters())
        failures = sorted((f["key"], f["reason"], f["detail"]) for f in p.failures())
    return {"pairs": pairs_by_ids(home, url), "clusters": clusters, "failures": failures}


def ingest(home: Path, url: str, source: Path, *engine: str) -> str:
    """The run's summary line (the ray engine adds a line of its own on stderr)."""
    said = finish(mmdedup(home, url, "ingest", str(source), "--no-progress", *engine, env=ENV))
    return said.splitlines()[0]


def test_a_manifest_through_the_ray_engine_gives_what_the_local_engine_gives(
        new_store, tmp_path: Path, cluster: str) -> None:
    manifest = mixed_manifest(tmp_path / "corpus")
    local_home, local_url = new_store("local")
    said = ingest(local_home, local_url, manifest)
    expected = outcome(local_home, local_url)
    assert len(expected["pairs"]) >= COPIES and len(expected["failures"]) == 3
    assert any("pic0-copy" in pair for pair in expected["pairs"])

    home, url = new_store("ray")
    ran = finish(mmdedup(home, url, "ingest", str(manifest), "--no-progress", "--engine", "ray",
                         "--ray-address", cluster, env=ENV))
    assert ran.splitlines()[0] == said
    lines = manifest.read_text().splitlines()
    blocks, records = -(-len(lines) // 16), sum(1 for line in lines if line.strip())
    texts = sum(1 for line in lines if '"text"' in line)
    # Every text signed where it was read (those signed before the TF-IDF refresh this run
    # crosses are signed again here, under the new version: the pairs say so).
    assert (f"ray engine: {blocks} blocks, {records} records read and extracted on 2 CPUs "
            f"(values made there: {texts} text)") in ran, ran
    # Their pairs searched and scored there too, once every chunk was written (less the
    # text whose id an earlier record took).
    assert f"ray engine: {texts - 1} items searched by text in {-(-(texts - 1) // 16)} tasks: " in ran, ran  # (chunks of 16)
    assert outcome(home, url) == expected

    # A rerun: every item read, hashed and found unchanged where it was read, nothing written.
    again = ingest(home, url, manifest, "--engine", "ray", "--ray-address", cluster)
    stored = sum(1 for line in manifest.open() if '"id"' in line) - 2  # (the missing picture, the repeated id)
    assert f" 0 new, 0 updated, {stored} unchanged, 3 failed" in again, again
    assert outcome(home, url) == expected


def test_a_page_repeated_through_the_ray_engine_is_cut_where_the_local_engine_cuts_it(
        new_store, tmp_path: Path, cluster: str) -> None:
    first, second = corpus(10)
    hot = [{"id": f"hot{i:03d}", "text": t} for i, t in enumerate(copies(50))]
    manifest = write_manifest(tmp_path, [*first, *hot[:25], *second, *hot[25:]])
    # (no TF-IDF refresh in this run: the cap alone is compared)
    env = {**ENV, "MMDEDUP_TFIDF_MIN_DOCS": "100000", "MMDEDUP_MAX_CANDIDATES_PER_ITEM": "4"}
    said, found = [], []
    for name, engine in (("local", ()), ("ray", ("--engine", "ray", "--ray-address", cluster))):
        home, url = new_store(name)
        said.append(finish(mmdedup(home, url, "ingest", str(manifest), "--no-progress", *engine,
                                   env=env)).splitlines()[0])
        found.append(outcome(home, url))
    assert found[1] == found[0]
    later = Counter(b for a, b in found[0]["pairs"] if a.startswith("hot"))  # (ids in their order)
    assert len(later) >= 40 and max(later.values()) <= 4
    # Both cut the copies' searches, and wrote the same pairs (the ray engine's search
    # reads the whole run's index, so it passes over more bucket entries).
    assert [line.split("; text:")[0] for line in said] == [said[0].split("; text:")[0]] * 2
    assert all("searches met max_candidates_per_item" in line for line in said), said


def test_a_folder_and_python_items_through_the_ray_engine(new_store, tmp_path: Path,
                                                          cluster: str, monkeypatch) -> None:
    folder = tmp_path / "folder"
    first, second = corpus(40)
    for record in first + second:
        (folder / "texts").mkdir(parents=True, exist_ok=True)
        (folder / "texts" / f"{record['id']}.txt").write_text(record["text"])
    for i in range(2):
        picture(folder / f"p{i}.png", seed=i)
    picture(folder / "p0.jpg", seed=0, quality=70)
    (folder / "notes.bin").write_bytes(b"\x00\x01")

    local_home, local_url = new_store("local")
    said = ingest(local_home, local_url, folder)
    home, url = new_store("ray")
    assert ingest(home, url, folder, "--engine", "ray", "--ray-address", cluster) == said
    assert outcome(home, url) == outcome(local_home, local_url)

    # Python items, relative paths resolved against this process's working directory (the
    # workers take it), as the local engine resolves them.
    monkeypatch.chdir(folder)
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    items = [*first, {"id": "pic", "images": ["p0.png"]}, {"id": "pic-copy", "images": ["p0.jpg"]},
             {"id": "gone", "images": ["missing.png"]}, *second]
    import ray

    homes = [new_store("api-local"), new_store("api-ray")]
    try:
        for (h, u), engine in zip(homes, ({}, {"engine": "ray", "ray_address": cluster})):
            with Platform.open(h, u) as p:
                report = p.ingest(items, source_name="batch", **engine)
                assert (report.new, report.failed) == (len(items) - 1, 1)
                # The writer takes the workers' sketches of every text it writes before the
                # TF-IDF refresh (at 100 texts); those in flight then it signs again.
                signed = p.signal("text").signed
                assert signed.total() == len(first + second)
                assert signed["worker" if engine else "here"] >= 100
                # The ray engine searched every text and picture for pairs on the workers,
                # after writing.
                assert report.searched == (len(first + second) + 2 if engine else 0)
    finally:
        ray.shutdown()
    assert outcome(*homes[1]) == outcome(*homes[0])
    assert ("pic", "pic-copy") in outcome(*homes[1])["pairs"]


def test_texts_signed_by_the_workers_across_tf_idf_refreshes_in_steps(new_store, cluster: str,
                                                                      monkeypatch) -> None:
    """A refresh in steps, begun and switched within the run: while it signs, the workers
    sign new texts under its pending version too, and the writer takes those sketches;
    the pairs are the local engine's."""
    first, second = corpus(300)
    items = first + second
    for key, value in {**ENV, "MMDEDUP_TFIDF_REFRESH_AT_ONCE": "0"}.items():
        monkeypatch.setenv(key, value)
    import ray

    homes, signed, written = [new_store("steps-local"), new_store("steps-ray")], [], []
    try:
        for (h, u), engine in zip(homes, ({}, {"engine": "ray", "ray_address": cluster})):
            with Platform.open(h, u) as p:
                report = p.ingest(items, source_name="batch", **engine)
                text = p.signal("text")
                assert text.refreshes == 1
                signed.append(text.signed)
                written.append(report.near_pairs)
                # The refresh signed the stored texts again a batch a step; through the ray
                # engine the workers signed each next batch while the chunk between was
                # written (never the first batch). The writer never waits for them: how many
                # are ready in time follows the machine's load (over half of them on an idle
                # machine of two cores, a third with a second job using both cores).
                work = text.refresher.work
                assert work["signed"] > 0
                if engine:
                    assert work["signed"] > work["signed ahead"] > 0
                else:
                    assert work["signed ahead"] == 0
    finally:
        ray.shutdown()
    assert outcome(*homes[1]) == outcome(*homes[0])
    # (the ray engine searched each text in the active and the pending index after
    # writing; a pair both find is one pair written, as at a chunk)
    assert written[1] == written[0] > 0
    local, remote = signed
    assert set(local) == {"here", "pending, here"}
    assert remote["worker"] + remote["here"] == len(items)
    assert remote["worker"] > 3 * remote["here"]
    # Only the blocks already sent when the refresh began to sign lack its sketches: four
    # blocks of 16 in flight on two CPUs.
    assert remote["pending, worker"] > 3 * remote["pending, here"]
    assert 0 < remote["pending, here"] <= 4 * 16


def unsearched(url: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        left = conn.execute(text("SELECT count(*) FROM unsearched")).scalar_one()
    engine.dispose()
    return left


def test_a_run_cut_short_in_its_search_leaves_its_items_to_the_next_ingest(
        new_store, cluster: str, monkeypatch) -> None:
    """The ray engine writes a run's texts, then searches them on the workers: a run that
    stops in between (its driver lost) leaves the items it had not searched listed in the
    store, and the next ingest, whatever its engine, searches them first."""
    first, second = corpus(60)
    items = first + second
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    (local_home, local_url), (home, url) = new_store("cut-local"), new_store("cut-ray")
    with Platform.open(local_home, local_url) as p:
        p.ingest(items, source_name="batch")
    whole = RayEngine.search

    def cut_short(engine: RayEngine, name: str, pks: np.ndarray, on: tuple[str, ...]) -> Iterator:
        found = whole(engine, name, pks, on)
        yield next(found)
        found.close()
        raise RuntimeError("the driver lost")

    import ray

    try:
        with monkeypatch.context() as m, Platform.open(home, url) as p:
            m.setattr(RayEngine, "search", cut_short)
            with pytest.raises(RuntimeError, match="the driver lost"):
                p.ingest(items, source_name="batch", engine="ray", ray_address=cluster)
    finally:
        ray.shutdown()
    left = unsearched(url)
    assert left == len(items) - 16  # (one task of 16 searched and written)
    with Platform.open(home, url) as p:
        report = p.ingest(items, source_name="batch")
    assert (report.unchanged, report.searched) == (len(items), left)
    assert unsearched(url) == 0
    assert outcome(home, url) == outcome(local_home, local_url)


def test_the_ray_engine_where_no_cluster_answers_says_so_in_one_line(home: Path, db_url: str,
                                                                    tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, [{"id": "a", "text": "a text"}])
    proc = mmdedup(home, db_url, "ingest", str(manifest), "--engine", "ray",
                   "--ray-address", f"127.0.0.1:{free_port()}", env=RAY_ENV)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert err.startswith("mmdedup: error: no Ray cluster answers at 127.0.0.1:") and err.count("\n") == 1
    proc = mmdedup(home, db_url, "ingest", str(manifest), "--workers", "2", "--engine", "ray", env=RAY_ENV)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "workers is for the local engine" in err


# --- faults ---------------------------------------------------------------------------


def pictures(folder: Path, n: int) -> Path:
    """A folder of `n` pictures large enough that a block takes a while to decode, every
    tenth a re-compressed copy of the one before."""
    for i in range(n):
        if i % 10 == 9:
            picture(folder / f"p{i:04d}.jpg", seed=i - 1, quality=70)
        else:
            picture(folder / f"p{i:04d}.png", seed=i)
    return folder


def stored_items(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM items")).scalar_one()
    except Exception:  # (not created yet)
        return 0
    finally:
        engine.dispose()


def extracting() -> list[int]:
    """Ray worker processes running a block now (a worker names itself after its task)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes().startswith(b"ray::extract_block"):
                found.append(int(proc.name))
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def picture_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pictures(tmp_path_factory.mktemp("pictures"), 240)


@pytest.fixture
def expected_pictures(new_store, picture_folder: Path) -> dict:
    home, url = new_store("local")
    ingest(home, url, picture_folder)
    return outcome(home, url)


def test_a_worker_killed_mid_job_has_its_block_done_again(
        new_store, picture_folder: Path, expected_pictures: dict, cluster: str) -> None:
    home, url = new_store("ray")
    proc = mmdedup(home, url, "ingest", str(picture_folder), "--no-progress", "--engine", "ray",
                   "--ray-address", cluster, env=ENV)
    killed: list[int] = []

    def kill_one() -> bool:
        for pid in extracting():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return bool(killed) or proc.poll() is not None

    wait_for(kill_one, 120)
    finish(proc)
    assert killed, "no worker was caught extracting"
    assert outcome(home, url) == expected_pictures


def test_a_driver_killed_mid_job_and_run_again_leaves_what_one_run_leaves(
        new_store, picture_folder: Path, expected_pictures: dict, cluster: str) -> None:
    home, url = new_store("ray")
    args = ("ingest", str(picture_folder), "--no-progress", "--engine", "ray", "--ray-address", cluster)
    proc = mmdedup(home, url, *args, env=ENV)
    wait_for(lambda: stored_items(url) >= 48 or proc.poll() is not None, 120)
    proc.kill()
    proc.wait()
    assert 48 <= stored_items(url) < 240, "the run was not cut short"
    finish(mmdedup(home, url, *args, env=ENV))
    assert outcome(home, url) == expected_pictures


@pytest.mark.skipif(not PG_URL, reason="needs a PostgreSQL server")
def test_the_database_dropping_every_connection_mid_job_leaves_a_consistent_store(
        new_store, picture_folder: Path, expected_pictures: dict, cluster: str, db_url: str) -> None:
    """What a restart of PostgreSQL does to a job: every connection of the database
    ends. The job goes on (its pool reconnects) or stops with one line saying so, and
    a rerun leaves what one run leaves."""
    if not db_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only")
    home, url = new_store("ray")
    args = ("ingest", str(picture_folder), "--no-progress", "--engine", "ray", "--ray-address", cluster)
    proc = mmdedup(home, url, *args, env=ENV)
    wait_for(lambda: stored_items(url) >= 48 or proc.poll() is not None, 120)
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        ended = conn.execute(text("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                  "WHERE datname = current_database() AND pid <> pg_backend_pid()")).scalar_one()
    admin.dispose()
    assert ended >= 1
    out, err = proc.communicate(timeout=300)
    if proc.returncode:
        said = [line for line in err.splitlines() if line.startswith("mmdedup: error: ")]
        assert proc.returncode == 2 and len(said) == 1 and "database" in said[0], err
        assert "Traceback" not in err and "rror" not in err.replace(said[0], ""), err
        finish(mmdedup(home, url, *args, env=ENV))
    assert outcome(home, url) == expected_pictures


# --- encoders where the pictures are read --------------------------------------------


def tiny_registry(folder: Path, checkpoint: Path) -> Path:
    """A registry naming the tiny CLIP by its checkpoint and its model config, as a
    deployment names an architecture open_clip does not ship: what a worker loads."""
    path = folder / "registry.toml"
    config = checkpoint.parent / "configs" / f"{TINY}.json"
    path.write_text(f'[clip]\nmodel = "{TINY}"\ncheckpoint = "{checkpoint}"\nconfig = "{config}"\n')
    return path


def test_clip_vectors_made_where_a_block_is_read_are_the_writers(
        tmp_path: Path, tiny_checkpoint: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "pictures"
    for i in range(3):
        picture(folder / f"p{i}.png", seed=i)
    monkeypatch.setenv("MMDEDUP_MODEL_REGISTRY", str(tiny_registry(tmp_path, tiny_checkpoint)))
    monkeypatch.setattr(clip, "_default", None)
    with Platform.open(tmp_path / "home") as p:
        signal = p.signal("clip")
        pixels = PixelsWanted([signal])
        assert pixels(None)
        extractors = pixels.extractors()
        block = folder_blocks(folder, sorted(folder.iterdir()), p.settings)[0]
        records = extract_block(block, folder, str(tmp_path), p.settings, "", True, p.url, extractors)
    loaded = [got for _, _, got in records]
    assert all(li.pictures is None and "clip" in li.extracted for li in loaded)
    again = extract_block(block, folder, str(tmp_path), p.settings, "", True, p.url)
    here = signal.extract([li for _, _, li in again])
    for li, vectors in zip(loaded, here):
        assert vectors is not None and np.allclose(li.extracted["clip"], vectors, atol=1e-5)


def test_a_worker_scores_in_the_writers_environment_of_this_run_not_of_an_earlier_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Search tasks carry the writer's variables as an argument (a runtime_env would start
    worker processes of their own), and a worker outlives a run of its job."""
    monkeypatch.setenv("MMDEDUP_WORKER_OWN", "own")
    monkeypatch.setenv("MMDEDUP_MODEL_REGISTRY", "worker.toml")
    monkeypatch.delenv("MMDEDUP_LATER", raising=False)
    monkeypatch.setattr(ray_engine, "_WORKER_OWN_ENV", None)
    take_env({"MMDEDUP_MODEL_REGISTRY": "writer.toml", "MMDEDUP_LATER": "1"})
    assert os.environ["MMDEDUP_MODEL_REGISTRY"] == "writer.toml" and os.environ["MMDEDUP_LATER"] == "1"
    take_env({})
    assert "MMDEDUP_LATER" not in os.environ
    assert os.environ["MMDEDUP_MODEL_REGISTRY"] == "worker.toml" and os.environ["MMDEDUP_WORKER_OWN"] == "own"


def test_pictures_encoded_by_an_actor_that_holds_a_gpu_give_the_local_engines_pairs(
        new_store, tmp_path: Path, tiny_checkpoint: Path, cluster: str) -> None:
    folder = tmp_path / "posts"
    for i in range(6):
        picture(folder / f"p{i}.png", seed=i)
    picture(folder / "p0-copy.jpg", seed=0, quality=60)
    env = {**ENV, "MMDEDUP_MODEL_REGISTRY": str(tiny_registry(tmp_path, tiny_checkpoint)),
           "MMDEDUP_INGEST_CHUNK": "3"}
    found = []
    for name, engine in (("local", ()), ("ray", ("--engine", "ray", "--ray-address", cluster))):
        home, url = new_store(name)
        said = finish(mmdedup(home, url, "ingest", str(folder), "--no-progress", *engine, env=env))
        assert "CLIP signal off" not in said
        assert ("on 2 CPUs and 1 GPU encoding pictures" in said) == (name == "ray"), said
        with Platform.open(home, url) as p:
            found.append({tuple(sorted((x.a, x.b))): x for x in p.pairs("weak")})
    local, ray_pairs = found
    assert ("p0-copy.jpg", "p0.png") in local and local.keys() == ray_pairs.keys()
    for key, pair in local.items():
        assert "clip" in pair.signals and ray_pairs[key].tier == pair.tier
        assert ray_pairs[key].signals["clip"] == pytest.approx(pair.signals["clip"], abs=1e-4)
