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


@pytest.mark.parametrize("machine_gib,container_gib,expected_mb", [
    (24, None, 4096),  # a quarter, at most 4 GB
    (8, None, 2048),
    (24, 4, 1024),  # a container's limit counts, not the machine's memory
    (0.25, None, 128),  # never below PostgreSQL's default
])
def test_shared_buffers_are_a_quarter_of_the_memory_there_is(monkeypatch, machine_gib, container_gib, expected_mb):
    monkeypatch.setattr(services.os, "sysconf", lambda name: {"SC_PAGE_SIZE": 4096,
                                                              "SC_PHYS_PAGES": int(machine_gib * 2**30) // 4096}[name])
    limit = str(int(container_gib * 2**30)) if container_gib else "max"
    monkeypatch.setattr(services.Path, "read_text", lambda self, *a, **k: limit)
    assert services.shared_buffers_mb() == expected_mb
