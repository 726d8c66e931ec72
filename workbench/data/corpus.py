"""Importing a Markdown corpus (docs/design.md §5): documents, their chunks, categories.

The document id is the path relative to the corpus root; the title comes from the file
name; the category from the folder at ``category_depth``. Documents are chunked by
heading, each section then capped at ``max_chars`` with ``overlap`` characters carried
over. Chunks become the dataset's units (kind ``chunk``) with ``doc_id`` = parent.
Unreadable files, symbolic links that lead out of the corpus root, and entries that are not
regular files (a FIFO, a device, a link to nothing: never opened) are reported and skipped;
the rest imports in one transaction. A corpus that yields no chunk at all is refused. A
name that holds other content is refused unless ``replace`` is asked for, and then the
report counts what went with the old dataset.
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
from workbench.data.infile import check_input, entry_kind, read_input, refuse_database
from workbench.errors import BadInput
from workbench.evidence.units import normalize_text
from workbench.store.db import Store, utcnow

_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")
# A link target may hold one level of parentheses (HowToCook: "./石凉粉(冰粉)成品1.jpg").
_IMAGE = re.compile(r"!\[[^\]]*\]\((?:[^()]|\([^()]*\))*\)")
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
    not_regular: list[str] = field(default_factory=list)   # "path: is a FIFO" of entries that are no file


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    heading: str | None
    category: str
    text: str


def read_corpus(root: Path, config: ChunkConfig) -> tuple[list[Document], list[str], list[str], list[str]]:
    """Every ``*.md`` under ``root`` (README/LICENSE skipped), the files that could not be read,
    the symbolic links skipped because they lead out of ``root``, and the entries skipped
    because they are not regular files (``"path: is a FIFO"``).

    A link that stays inside the root is read like any file (a linked directory is not
    descended into: its files are read under their own path). A link that leaves it (to
    ``/etc/passwd``, to another tree) is never followed: the corpus is what lies under the root.
    """
    docs, unreadable, outside, special = [], [], [], []
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
            wanted = name.endswith(".md") and name.lower() not in _SKIP_NAMES
            if path.is_symlink() and not _inside(path, real_root):
                if wanted:
                    outside.append(f"{path.relative_to(root).as_posix()} -> {os.readlink(path)}")
                continue
            # A FIFO, a socket, a device, a link to nothing: looked at, never opened (a FIFO
            # would wait for a writer), and named whatever its name, as nothing else tells of it.
            kind = entry_kind(path)
            if kind is not None:
                special.append(f"{path.relative_to(root).as_posix()}: {kind}")
            elif wanted:
                refuse_database(path)   # a hard link to the database, named notes.md: never read
                paths.append(path)
    keys: dict[str, str] = {}     # a document id, normalized as unit keys are -> the first such id
    for path in sorted(paths):
        rel = path.relative_to(root).as_posix()
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
            text = read_input(path).decode("utf-8")
        except (OSError, UnicodeDecodeError, BadInput) as exc:
            unreadable.append(f"{rel}: {type(exc).__name__}: {exc}")
            continue
        folders = rel.split("/")[:-1]
        category = (folders[config.category_depth - 1] if len(folders) >= config.category_depth
                    else folders[-1] if folders else "")
        heading = next((m.group(2) for m in map(_HEADING.match, text.splitlines()) if m), None)
        docs.append(Document(rel, path.stem, heading, category, text))
    return docs, unreadable, sorted(outside), sorted(special)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _inside(link: Path, real_root: Path) -> bool:
    """Whether the link's final target (every hop resolved) lies under the corpus root.

    A loop resolves nowhere: it counts as inside, and is then named as a loop and skipped.
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
    ``replace``, which deletes it (with its runs) in the import's transaction. A root that is
    not a directory, or a tree with no chunk to import, is :class:`BadInput`; nothing is written.
    """
    check_name(name, "dataset name")
    check_source_path(root, "the directory's path")
    config = config or ChunkConfig()
    config.validate()
    root = check_input(root, directory=True, hint="expected a directory of Markdown files")
    docs, unreadable, outside, special = read_corpus(root, config)
    skipped = ((f" ({len(unreadable)} unreadable)" if unreadable else "")
               + (f" ({count_noun(len(outside), 'link')} leaving the root skipped)" if outside else "")
               + (f" ({count_noun(len(special), 'entry', 'entries')} not a regular file)" if special else ""))
    if not docs:
        raise BadInput(f"{root}: no readable .md files{skipped}")
    pieces = [chunk_document(d.text, config) for d in docs]
    if not any(pieces):
        # A dataset of no units could be neither searched nor evaluated: refused, not stored empty.
        raise BadInput(f"{root}: no text to import: {count_noun(len(docs), 'document')} without a chunk "
                       f"(empty, or only blank lines and images){skipped}")
    digest = hashlib.sha256(json.dumps(asdict(config), sort_keys=True).encode())
    for d in docs:
        digest.update(d.doc_id.encode() + b"\0" + d.text.encode() + b"\0")
    sha = digest.hexdigest()
    report = CorpusReport(dataset=name, unreadable=unreadable, skipped_links=outside, not_regular=special)
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
        for d, chunks in zip(docs, pieces):
            documents.append((ds_id, d.doc_id, d.title, d.heading, d.category, len(d.text),
                              hashlib.sha256(d.text.encode()).hexdigest()))
            for i, piece in enumerate(chunks):
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
