"""The local stack meets a data directory from an older PostgreSQL (issue 12: 16 -> 18)."""
import pytest

from localstack import services


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setattr(services, "STATE", tmp_path)
    return tmp_path


def test_an_older_data_directory_is_refused_with_the_steps_and_kept(state):
    pgdata = state / "pgdata"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("16\n")
    (pgdata / "base").mkdir()
    with pytest.raises(SystemExit) as raised:
        services.postgres_up()
    message = str(raised.value)
    assert "PostgreSQL 16 data" in message and f"runs PostgreSQL {services.POSTGRES_MAJOR}" in message
    assert "pip install pgserver==0.1.4" in message and f"mv {pgdata} {pgdata}-16" in message
    assert sorted(p.name for p in pgdata.iterdir()) == ["PG_VERSION", "base"]  # nothing touched


def test_the_data_directory_major_version(state):
    assert services.data_major() is None
    (state / "pgdata").mkdir()
    (state / "pgdata" / "PG_VERSION").write_text("18\n")
    assert services.data_major() == 18
