"""Fixtures: every store-backed test runs on SQLite, and on PostgreSQL as well when
MMDEDUP_TEST_DATABASE_URL names a server (each test gets a schema of its own there)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from sqlalchemy import create_engine, make_url, text

from mmdedup import Platform
from mmdedup.cli import main

from helpers import TINY, TINY_CFG, rgb

PG_URL = os.environ.get("MMDEDUP_TEST_DATABASE_URL")
# A query leaves no server behind it in a test (one that means to sets this itself).
os.environ["MMDEDUP_QUERY_SERVER_IDLE"] = "0"
BACKENDS = ["sqlite"] + (["postgresql"] if PG_URL else [])


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'test.db'}"
        return
    assert PG_URL is not None
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield schema_store(schema)
    finally:
        drop_schemas([schema])


def schema_store(schema: str) -> str:
    """The URL of a new, empty store in its own PostgreSQL schema. No connection is held
    after: a test may end every one."""
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    url = make_url(PG_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


def drop_schemas(schemas: list[str]) -> None:
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        for schema in schemas:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture
def new_store(db_url: str, tmp_path: Path) -> Iterator[Callable[[str], tuple[Path, str]]]:
    """Makes further empty stores beside the test's own: (home, database URL), each with
    its own SQLite file or PostgreSQL schema."""
    schemas: list[str] = []

    def make(name: str) -> tuple[Path, str]:
        home = tmp_path / f"home-{name}"
        home.mkdir()
        if db_url.startswith("sqlite"):
            return home, f"sqlite:///{home / 'store.db'}"
        schema = f"{make_url(db_url).query['options'].split('=')[1]}_{name}"
        url = schema_store(schema)
        schemas.append(schema)
        return home, url

    yield make
    if schemas:
        drop_schemas(schemas)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def platform(home: Path, db_url: str) -> Iterator[Platform]:
    with Platform.open(home, db_url) as p:
        yield p


@pytest.fixture(scope="module")
def photos() -> dict[str, np.ndarray]:
    """scikit-image's bundled photos as RGB arrays, by name: what the test videos are made of."""
    from skimage import data  # a test extra: imported only where a test asks for photos

    return {"astronaut": rgb(data.astronaut()), "coffee": rgb(data.coffee()),
            "rocket": rgb(data.rocket()), "camera": rgb(data.camera()),
            "chelsea": rgb(data.chelsea())}


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised tiny CLIP, registered with open_clip and saved as a file."""
    open_clip = pytest.importorskip("open_clip")
    torch = pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("tiny_clip")
    cfg_dir = folder / "configs"
    cfg_dir.mkdir()
    (cfg_dir / f"{TINY}.json").write_text(json.dumps(TINY_CFG))
    other = {**TINY_CFG, "embed_dim": 16}
    (cfg_dir / f"{TINY}-other.json").write_text(json.dumps(other))
    open_clip.add_model_config(cfg_dir)
    torch.manual_seed(0)
    model = open_clip.create_model(TINY, pretrained=None)
    path = folder / "tiny.pt"
    torch.save(model.state_dict(), path)
    return path


@pytest.fixture
def cli(home: Path, db_url: str, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run the mmdedup command in-process; returns (exit status, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        rc = main(["--home", str(home), "--db", db_url, *args])
        out, err = capsys.readouterr()
        return rc, out, err

    return run


def write_manifest(folder: Path, records: list[Any], name: str = "manifest.jsonl") -> Path:
    """A manifest with one line per record; str records are written verbatim."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with path.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write((record if isinstance(record, str) else json.dumps(record, ensure_ascii=False)) + "\n")
    return path
