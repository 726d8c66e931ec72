"""Markdown corpus import: documents with path ids, titles, categories, and chunks with parents."""

import os

import pytest

from oneparser import one_parser  # noqa: F401  (autouse: this module's CLI calls parse with one tree)
from workbench.cli import main
from workbench.data.corpus import ChunkConfig, chunk_document, import_corpus
from workbench.store import open_store

from conftest import REPO, copy_db

HOWTOCOOK = REPO / "sample_data" / "howtocook"


@pytest.fixture(scope="module")
def howtocook(tmp_path_factory, empty_template):
    """The sample corpus imported once as ``howtocook``: the closed database and the import's report."""
    path = copy_db(empty_template, tmp_path_factory.mktemp("howtocook") / "wb.db")
    s = open_store(path)
    try:
        report = import_corpus(s, HOWTOCOOK, "howtocook")
    finally:
        s.close()
    return path, report


@pytest.fixture
def imported(howtocook, tmp_path):
    """A store holding a copy of that import, and its report."""
    s = open_store(copy_db(howtocook[0], tmp_path / "wb.db"))
    yield s, howtocook[1]
    s.close()


def test_the_sample_corpus_imports_with_path_ids_titles_and_categories(imported):
    store, report = imported
    assert report.documents == 65 and report.chunks > report.documents and not report.unreadable
    assert report.categories["meat_dish"] >= 6 and report.categories["advanced"] == 3  # tips/advanced/…
    row = store.conn.execute("SELECT title, heading, category FROM documents WHERE doc_id = ?",
                             ("dishes/meat_dish/红烧肉/简易红烧肉.md",)).fetchone()
    assert row == ("简易红烧肉", "简易红烧肉的做法", "meat_dish")
    parents = {r[0] for r in store.conn.execute("SELECT DISTINCT doc_id FROM units")}
    assert parents == {r[0] for r in store.conn.execute("SELECT doc_id FROM documents")}
    assert store.conn.execute("SELECT max(length(text)) FROM units").fetchone()[0] <= 500


def test_reimport_is_idempotent(imported):
    store, first = imported
    again = import_corpus(store, HOWTOCOOK, "howtocook")
    assert again.unchanged and (again.documents, again.chunks) == (first.documents, first.chunks)
    assert store.count("documents") == first.documents


def test_unreadable_files_are_reported_and_the_rest_imports(store, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "好.md").write_text("# 好的做法\n\n内容", encoding="utf-8")
    (tmp_path / "a" / "bad.md").write_bytes(b"# bad\n\xff\xfe")
    report = import_corpus(store, tmp_path, "mini")
    assert report.documents == 1 and len(report.unreadable) == 1 and "a/bad.md" in report.unreadable[0]


def test_chunking_by_heading_then_size_with_overlap():
    text = "# T\nintro\n## A\n" + "甲" * 130 + "\n## B\nshort"
    chunks = chunk_document(text, ChunkConfig(max_chars=60, overlap=10))
    assert chunks[0] == "# T\nintro"
    a_chunks = [c for c in chunks if "甲" in c]
    assert len(a_chunks) == 3 and all(len(c) <= 60 for c in a_chunks)
    assert a_chunks[0][-10:] == a_chunks[1][:10]  # the overlap is carried over
    assert chunks[-1] == "## B\nshort"
    with pytest.raises(ValueError, match="--overlap"):
        ChunkConfig(max_chars=50, overlap=50).validate()


def test_an_image_whose_file_name_holds_parentheses_leaves_no_tail():
    # HowToCook's 冰粉: ![石凉粉(冰粉)成品1](./石凉粉(冰粉)成品1.jpg) once left "成品1.jpg)" in the chunk.
    text = "# 冰粉\n![石凉粉(冰粉)成品1](./石凉粉(冰粉)成品1.jpg)\n![x](./plain.png)\n## 必备原料和工具\n- 冰粉粉"
    assert chunk_document(text, ChunkConfig()) == ["# 冰粉", "## 必备原料和工具\n- 冰粉粉"]


def test_cli_corpus_import(tmp_path, capsys):
    assert main(["--db", str(tmp_path / "c.db"), "corpus", "import", str(HOWTOCOOK), "--name", "hc"]) == 0
    out = capsys.readouterr().out
    assert "hc: imported: 65 documents" in out and "meat_dish" in out


def test_entries_that_are_not_regular_files_are_named_one_line_each_and_never_opened(tmp_path, capsys):
    # Once: a FIFO named f.md was passed over without a word (and reading it would wait for a writer).
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "soup.md").write_text("# Soup\nboil water", encoding="utf-8")
    os.mkfifo(corpus / "f.md")
    os.mkfifo(corpus / "pipe")                       # not Markdown by name, but no file either: said too
    os.mkfifo(corpus / "two\nlines.md")
    (corpus / "gone.md").symlink_to("nowhere.md")
    (corpus / "zero.md").symlink_to("/dev/zero")     # leaves the root: said as such, not followed

    assert main(["--db", str(tmp_path / "c.db"), "corpus", "import", str(corpus), "--name", "c"]) == 0
    out, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if line.startswith("warning: not a regular file, skipped: ")]
    assert [w.removeprefix("warning: not a regular file, skipped: ") for w in warnings] == [
        "f.md: is a FIFO", "gone.md: is a symbolic link to nothing (nowhere.md)", "pipe: is a FIFO",
        "two\\u000alines.md: is a FIFO"]
    assert "warning: symbolic link leaves the corpus root, skipped: zero.md -> /dev/zero" in err
    assert "c: imported: 1 document, 1 chunk" in out and "4 entries not a regular file skipped" in out


def test_a_corpus_with_no_chunk_is_refused_and_nothing_is_written(tmp_path, capsys):
    # Once: a corpus whose only file was an empty .md imported as a dataset of 0 chunks.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "empty.md").write_text("", encoding="utf-8")
    (corpus / "blank.md").write_text("\n\n  \n![](a.png)\n", encoding="utf-8")
    db = tmp_path / "c.db"

    assert main(["--db", str(db), "corpus", "import", str(corpus), "--name", "c"]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: {corpus}: no text to import: 2 documents without a chunk "
                   "(empty, or only blank lines and images)\n")
    assert main(["--db", str(db), "datasets"]) == 0
    assert "no datasets yet" in capsys.readouterr().out
