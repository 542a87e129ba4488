"""The demo writes its seeded runs, baselines and node-versions record to the store of the
face that asks (its History), by default to a History of the demo's own data folder: never to
the user's store, never as files."""

from __future__ import annotations

from console.core.model import Profile
from console.services import demo
from console.services.baseline_demo import DEMO_NODE, prepare_demo, seed_baselines
from console.services.data_dir import DATA_DIR_ENV
from console.services.history import History


def test_the_demos_runs_land_in_the_demos_own_store(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.delenv(demo.DEMO_DATA_MARK, raising=False)
    user = History()  # the user's history, before the demo points the data folder at its own
    user.runs.save(demo.reference_run(_row(), "user.csv"))
    folder = demo.use_demo_data_dir()
    monkeypatch.setenv(demo.DEMO_DATA_MARK, str(folder))
    stored = demo.seed_history()
    assert stored >= 5
    assert demo.seed_history() == 0  # not twice
    own = History()
    assert own.data_dir == tmp_path / "data" / "demo" and own.runs.count() == stored
    assert user.runs.count() == 1  # the user's store took nothing
    assert not list((tmp_path / "data" / "demo").glob("results/*.json"))  # no run files
    own.close()
    user.close()


def test_the_face_hands_the_demo_its_tables(sim_node, tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "elsewhere"))  # not where the face's store is
    face = History(None, tmp_path / "face")
    assert demo.seed_history(face.runs) >= 5
    assert seed_baselines(face.baselines) >= 1
    assert seed_baselines(face.baselines) == 0  # a baseline there is left alone
    node = sim_node(DEMO_NODE, seed=1, state_dir=str(tmp_path / "spx"))
    book = face.versions_book()
    line = prepare_demo(Profile(nodes=(node,)), book, baselines=face.baselines)
    assert line is not None and "7.1.0-21" in line
    assert book.last(DEMO_NODE) is not None and face.baselines.get(DEMO_NODE, "demo").name == "demo"
    assert not (tmp_path / "elsewhere").exists()  # nothing went to the data folder
    face.close()


def _row():
    from console.core.results.reference import load_reference_numbers

    return next(r for r in load_reference_numbers(demo.REFERENCE_PATH) if r.kind == "serving")
