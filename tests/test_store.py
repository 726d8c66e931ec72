"""The store: numbered migrations applied once and recorded, WAL, foreign keys, busy timeout."""

import sqlite3

from workbench.store import default_db_path, open_store
from workbench.store.schema import MIGRATIONS_DIR, apply_migrations


def test_every_migration_is_recorded_once(tmp_path):
    path = tmp_path / "wb.db"
    open_store(path).close()
    open_store(path).close()  # reopening applies nothing again
    conn = sqlite3.connect(path)
    names = [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY id")]
    assert names == sorted(p.stem for p in MIGRATIONS_DIR.glob("[0-9][0-9][0-9][0-9]_*.sql"))
    assert names[0] == "0001_initial"
    assert apply_migrations(conn) == []


def test_connection_uses_wal_foreign_keys_and_a_busy_timeout(store):
    q = lambda sql: store.conn.execute(sql).fetchone()[0]  # noqa: E731
    assert q("PRAGMA journal_mode") == "wal"
    assert q("PRAGMA foreign_keys") == 1
    assert q("PRAGMA busy_timeout") >= 5000


def test_a_failed_migration_leaves_no_trace(tmp_path):
    mig = tmp_path / "migs"
    mig.mkdir()
    (mig / "0001_ok.sql").write_text("CREATE TABLE a (x INTEGER);\n")
    (mig / "0002_broken.sql").write_text("CREATE TABLE b (y INTEGER);\nTHIS IS NOT SQL;\n")
    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    try:
        apply_migrations(conn, mig)
    except sqlite3.OperationalError:
        pass
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "a" in tables and "b" not in tables
    assert [r[0] for r in conn.execute("SELECT name FROM _migrations")] == ["0001_ok"]


def test_db_path_comes_from_the_environment_then_the_user_data_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "env.db"))
    assert default_db_path() == tmp_path / "env.db"
    monkeypatch.delenv("WORKBENCH_DB")
    assert default_db_path().name == "workbench.db"
    assert "dissipation-workbench" in str(default_db_path())


def test_cli_db_flag_wins_over_the_environment(monkeypatch, tmp_path, capsys):
    from workbench.cli import main

    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "env.db"))
    assert main(["--db", str(tmp_path / "flag.db"), "tag", "q1", "x"]) == 2        # a writing verb creates it
    assert (tmp_path / "flag.db").exists() and not (tmp_path / "env.db").exists()
    assert main(["tag", "q1", "x", "--db", str(tmp_path / "flag2.db")]) == 2
    assert (tmp_path / "flag2.db").exists()
    capsys.readouterr()
    assert main(["datasets", "--db", str(tmp_path / "flag3.db")]) == 1            # a reading verb names it, creates nothing
    assert capsys.readouterr().err == f"error: {tmp_path / 'flag3.db'}: no such database\n"
    assert not (tmp_path / "env.db").exists() and not (tmp_path / "flag3.db").exists()
