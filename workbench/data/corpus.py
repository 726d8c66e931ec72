"""Importing a Markdown corpus (docs/design.md §5): documents, their chunks, categories.

The document id is the path relative to the corpus root; the title comes from the file
name; the category from the folder at ``category_depth``. Documents are chunked by
heading, each section then capped at ``max_chars`` with ``overlap`` characters carried
over. Chunks become the dataset's units (kind ``chunk``) with ``doc_id`` = parent.
Unreadable files, and symbolic links that lead out of the corpus root, are reported and
skipped; the rest imports in one transaction. A name that holds other content is refused
unless ``replace`` is asked for, and then the report counts what went with the old dataset.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workbench.data.fields import check_name, check_source_path
from workbench.data.importer import claim_dataset_name, count_noun, name_taken
from workbench.evidence.units import normalize_text
from workbench.store.db import Store, utcnow

_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_SKIP_NAMES = {"readme.md", "license.md"}


@dataclass(frozen=True)
class ChunkConfig:
    """How documents are cut. ``by`` is "heading" (then size) or "size" only."""

    by: str = "heading"
    max_chars: int = 500
    overlap: int = 50
    category_depth: int = 2

    def validate(self) -> None:
        if self.by not in ("heading", "size"):
            raise ValueError(f"--chunk-by: {self.by!r} is not heading or size")
        if self.max_chars < 20 or not 0 <= self.overlap < self.max_chars:
            raise ValueError("--max-chars must be ≥ 20 and --overlap in [0, max-chars)")
        if self.category_depth < 1:
            raise ValueError(f"--category-depth must be ≥ 1 (the folder level that names the category), "
                             f"got {self.category_depth}")


@dataclass
class CorpusReport:
    dataset: str
    documents: int = 0
    chunks: int = 0
    categories: dict[str, int] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    unchanged: bool = False
    skipped_links: list[str] = field(default_factory=list)   # "link -> target" of links leaving the root
    replaced: dict[str, int] | None = None   # what replacing the old dataset deleted


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    heading: str | None
    category: str
    text: str


def read_corpus(root: Path, config: ChunkConfig) -> tuple[list[Document], list[str], list[str]]:
    """Every ``*.md`` under ``root`` (README/LICENSE skipped), the files that could not be read,
    and the symbolic links skipped because they lead out of ``root``.

    A link that stays inside the root is read like any file (a linked directory is not
    descended into: its files are read under their own path). A link that leaves it (to
    ``/etc/passwd``, to another tree) is never followed: the corpus is what lies under the root.
    """
    docs, unreadable, outside = [], [], []
    real_root = root.resolve()
    paths = []

    def unreadable_folder(exc: OSError) -> None:
        unreadable.append(f"{Path(exc.filename).relative_to(root).as_posix() or '.'}/: {type(exc).__name__}: {exc}")

    for folder, dirnames, filenames in os.walk(root, onerror=unreadable_folder):
        for name in sorted(dirnames):
            link = Path(folder) / name
            if link.is_symlink() and not _inside(link, real_root):
                outside.append(f"{link.relative_to(root).as_posix()} -> {os.readlink(link)}")
        for name in filenames:
            path = Path(folder) / name
            if not name.endswith(".md") or name.lower() in _SKIP_NAMES:
                continue
            if path.is_symlink() and not _inside(path, real_root):
                outside.append(f"{path.relative_to(root).as_posix()} -> {os.readlink(path)}")
                continue
            paths.append(path)
    keys: dict[str, str] = {}     # a document id, normalized as unit keys are -> the first such id
    for path in sorted(paths):
        rel = path.relative_to(root).as_posix()
        if not path.is_file():
            if path.is_symlink():   # to nothing, or to itself: said, never silently dropped
                unreadable.append(f"{rel}: a symbolic link that leads to no file ({os.readlink(path)})")
            continue
        if not _utf8(rel):
            # os.walk decodes such bytes to lone surrogates, which a document id cannot hold.
            unreadable.append(f"{rel}: its name is not UTF-8 (rename the file)")
            continue
        key = normalize_text(rel)
        if key in keys:
            # Chunk ids are compared normalized (NFKC, whitespace), as every unit id is: two names
            # that normalize alike would be one id.
            unreadable.append(f"{rel}: its name is {keys[key]!r} once normalized (NFKC, whitespace); rename one")
            continue
        keys[key] = rel
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            unreadable.append(f"{rel}: {type(exc).__name__}: {exc}")
            continue
        folders = rel.split("/")[:-1]
        category = (folders[config.category_depth - 1] if len(folders) >= config.category_depth
                    else folders[-1] if folders else "")
        heading = next((m.group(2) for m in map(_HEADING.match, text.splitlines()) if m), None)
        docs.append(Document(rel, path.stem, heading, category, text))
    return docs, unreadable, sorted(outside)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _inside(link: Path, real_root: Path) -> bool:
    """Whether the link's final target (every hop resolved) lies under the corpus root.

    A loop resolves nowhere: it counts as inside, and is then said to lead to no file.
    """
    try:
        return link.resolve().is_relative_to(real_root)
    except (OSError, RuntimeError):
        return True


def chunk_document(text: str, config: ChunkConfig) -> list[str]:
    """Cut a document into chunks: by heading (each chunk keeps its section title), then by size."""
    text = _IMAGE.sub("", text)
    sections: list[str] = []
    if config.by == "heading":
        current: list[str] = []
        for line in text.splitlines():
            if _HEADING.match(line) and current:
                sections.append("\n".join(current))
                current = []
            current.append(line)
        sections.append("\n".join(current))
    else:
        sections = [text]
    chunks = []
    step = config.max_chars - config.overlap
    for section in sections:
        section = re.sub(r"\n{3,}", "\n\n", section).strip()
        if not section:
            continue
        for start in range(0, max(1, len(section) - config.overlap), step):
            piece = section[start:start + config.max_chars].strip()
            if piece:
                chunks.append(piece)
            if start + config.max_chars >= len(section):
                break
    return chunks


def import_corpus(store: Store, root: str | Path, name: str, config: ChunkConfig | None = None, *,
                  replace: bool = False) -> CorpusReport:
    """Import a Markdown tree as dataset ``name`` (idempotent for the same files and config).

    A dataset of that name holding anything else raises :class:`DatasetExists` unless
    ``replace``, which deletes it (with its runs) in the import's transaction.
    """
    check_name(name, "dataset name")
    check_source_path(root, "the directory's path")
    config = config or ChunkConfig()
    config.validate()
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory of Markdown files")
    docs, unreadable, outside = read_corpus(root, config)
    if not docs:
        raise ValueError(f"{root}: no readable .md files" + (f" ({len(unreadable)} unreadable)" if unreadable else "")
                         + (f" ({count_noun(len(outside), 'link')} leaving the root skipped)" if outside else ""))
    digest = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode())
    for d in docs:
        digest.update(d.doc_id.encode() + b"\0" + d.text.encode() + b"\0")
    sha = digest.hexdigest()
    report = CorpusReport(dataset=name, unreadable=unreadable, skipped_links=outside)
    existing = store.conn.execute("SELECT id, content_sha256 FROM datasets WHERE name = ?", (name,)).fetchone()
    if existing and existing[1] == sha:
        return _unchanged(store, report, existing[0])
    if existing and not replace:
        raise name_taken(store.conn, name, existing[0])
    with store.transaction() as conn:
        replaced = claim_dataset_name(conn, name, existing, sha)
        if isinstance(replaced, int):   # another process imported this very corpus meanwhile
            return _unchanged(store, report, replaced)
        report.replaced = replaced
        ds_id = conn.execute(
            "INSERT INTO datasets (name, unit_kind, source, content_sha256, created_at) VALUES (?, 'chunk', ?, ?, ?)",
            (name, str(root), sha, utcnow())).lastrowid
        uid = 0
        units, documents = [], []
        for d in docs:
            documents.append((ds_id, d.doc_id, d.title, d.heading, d.category, len(d.text),
                              hashlib.sha256(d.text.encode()).hexdigest()))
            for i, piece in enumerate(chunk_document(d.text, config)):
                uid += 1
                chunk_id = f"{d.doc_id}#{i}"
                units.append((ds_id, uid, normalize_text(chunk_id), chunk_id, d.doc_id, piece))
            report.categories[d.category] = report.categories.get(d.category, 0) + 1
        conn.executemany("INSERT INTO documents (dataset_id, doc_id, title, heading, category, chars, sha256)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?)", documents)
        conn.executemany("INSERT INTO units (dataset_id, uid, key, chunk_id, doc_id, text) VALUES (?, ?, ?, ?, ?, ?)",
                         units)
    report.documents, report.chunks = len(docs), len(units)
    return report


def _unchanged(store: Store, report: CorpusReport, dataset_id: int) -> CorpusReport:
    report.unchanged = True
    report.documents = store.conn.execute("SELECT count(*) FROM documents WHERE dataset_id = ?",
                                          (dataset_id,)).fetchone()[0]
    report.chunks = store.conn.execute("SELECT count(*) FROM units WHERE dataset_id = ?", (dataset_id,)).fetchone()[0]
    return report
