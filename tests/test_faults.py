"""The fault matrix: what each fault does to the user and to the data, and the test that proves it.

Every row states the exit code and the message the user sees, and that nothing was lost.
Kill -9 at random points, ten times each for import, run and claims run, is
``bench/bench_faults.py`` (``.venv/bin/python bench/bench_faults.py``); the import row below runs two trials of it.

| fault | exit | message (start) | nothing lost | proved by |
| --- | --- | --- | --- | --- |
| kill -9 during import | — | — | the dataset is absent or complete | tests/test_faults.py::test_kill_9_during_an_import_leaves_the_dataset_absent_or_complete |
| kill -9 during a run | — | — | done jobs untouched, resume does the rest, no prompt generated twice | tests/test_generation.py::test_kill_9_mid_run_then_resume_loses_and_recomputes_nothing |
| kill -9 during a run, holder's lease left behind | 0 | `recovered the lease of pid N, which died` | as above | tests/test_leases.py::test_a_run_whose_writer_was_killed_with_9_resumes_and_recovers_its_lease |
| kill -9 during a claims run | — | — | claims equal an uninterrupted pass | bench/bench_faults.py (claims) |
| two writers on one run | 1 | `error: run R is being written by pid N on HOST since …; use --wait or stop it` | one writer; generations == model calls | tests/test_leases.py::test_two_resumes_at_once_one_writes_the_other_refuses_and_nothing_is_generated_twice |
| two writers, the second with --wait | 0 | `waiting: run R is being written by pid N …` | the second has nothing to do | tests/test_leases.py::test_with_wait_the_second_resume_waits_for_the_first_then_has_nothing_to_do |
| disk full during import | 1 | `error: disk full while writing DB: nothing was written` | integrity ok, no unit of the import | tests/test_db_faults.py::test_a_full_disk_during_an_import_says_so_and_leaves_the_database_whole |
| a reading verb on a missing database | 1 | `error: DB: no such database` | nothing created | tests/test_two_processes.py::test_a_reader_never_creates_a_database |
| the TUI open while the CLI writes | — | — | integrity ok, every write of both sides | tests/test_two_processes.py::test_the_tui_and_the_cli_write_one_database_and_both_sides_land |
| read-only database file | 0 / 1 | reading verbs read; writers: `error: DB is read-only: …` | file bytes unchanged | tests/test_db_faults.py::test_a_read_only_file_is_read_by_reading_verbs_and_refused_by_the_others |
| read-only directory | 0 / 1 | as above | nothing created in it | tests/test_db_faults.py::test_a_read_only_directory_is_read_without_creating_anything_in_it |
| read-only filesystem | 0 / 1 | as above | file bytes unchanged | tests/test_db_faults.py::test_a_read_only_filesystem_is_read_and_refused_for_writes |
| a --db that is not SQLite | 1 | `error: DB: not a workbench database (file is not SQLite)` | file bytes unchanged | tests/test_db_faults.py::test_a_text_file_given_as_the_database_is_refused_untouched |
| a truncated database | 1 | `error: DB: not a usable workbench database (damaged or truncated: …)` | file bytes unchanged | tests/test_db_faults.py::test_a_truncated_database_is_refused_untouched |
| a directory as --db | 1 | `error: DB: not a workbench database (it is a directory)` | — | tests/test_db_faults.py::test_a_directory_given_as_the_database_is_refused |
| a database from a newer workbench | 1 | `error: DB was written by a newer workbench (schema …)` | file bytes unchanged | tests/test_db_faults.py::test_a_database_from_a_newer_workbench_is_not_written |
| an existing name given to corpus import | 2 | `error: dataset 'm' already exists …; pass --replace` | the dataset and its runs | tests/test_no_silent_loss.py::test_corpus_import_over_an_existing_dataset_is_refused_and_deletes_nothing |
| the same name imported twice at once | 2 | `error: dataset 'm' was created by another process …` | the winner's dataset | tests/test_no_silent_loss.py::test_two_processes_importing_one_name_at_once_end_in_one_dataset_and_a_clear_message |
"""

from __future__ import annotations

import ast
import importlib.util
import random
import re
import shutil
import time

import pytest

from conftest import REPO

spec = importlib.util.spec_from_file_location("bench_faults", REPO / "bench" / "bench_faults.py")
bench_faults = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_faults)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> dict:
    """An empty migrated database, and a clean import's counts and time."""
    work = tmp_path_factory.mktemp("faults")
    empty = work / "empty.db"
    bench_faults.new_database(empty)
    imported = work / "imported.db"
    shutil.copy(empty, imported)
    t0 = time.perf_counter()
    bench_faults.run_ok(imported, "import", str(bench_faults.METAQA), "--name", "m")
    seconds = time.perf_counter() - t0
    return {"empty": empty, "import_seconds": seconds, "reference": bench_faults.dataset_counts(imported, "m")}


def test_kill_9_during_an_import_leaves_the_dataset_absent_or_complete(prepared, tmp_path):
    rng = random.Random(13)
    results = [bench_faults.trial_import(prepared["empty"], tmp_path, rng, prepared["reference"],
                                         prepared["import_seconds"]) for _ in range(2)]
    for r in results:
        assert r["ok"], r
        assert r["state_after_kill"] in ("absent", "complete")


def test_every_row_of_the_matrix_names_a_test_that_exists():
    rows = [line for line in __doc__.splitlines() if line.startswith("| ") and "::" in line]
    assert len(rows) >= 15
    for row in rows:
        path, name = re.search(r"(tests/\S+\.py)::(\w+)", row).groups()
        tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
        names = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        assert name in names, f"{path} has no {name} (row: {row[:60]}…)"
