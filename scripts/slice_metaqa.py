"""Cut the sample_data/metaqa slice from ../shared/data/metaqa-dev (deterministic).

Keeps the first N samples in file order, their retrieval rows, and the KB triples those
rows and gold paths reference, so the slice imports with no unknown triples.
Usage: python scripts/slice_metaqa.py SRC_DIR DEST_DIR [N]
"""

import json
import sys
from pathlib import Path

src, dest = Path(sys.argv[1]), Path(sys.argv[2])
n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
dest.mkdir(parents=True, exist_ok=True)
samples = [json.loads(line) for line in open(src / "samples.jsonl", encoding="utf-8")][:n]
ids = {s["id"] for s in samples}
retrieval = [r for r in map(json.loads, open(src / "retrieval.jsonl", encoding="utf-8")) if r["sample_id"] in ids]
needed = {tuple(u) for s in samples for p in s["gold_paths"] for u in p}
needed |= {tuple(res["triple"]) for r in retrieval for res in r["results"]}
kb = [line for line in open(src / "kb.jsonl", encoding="utf-8") if tuple(json.loads(line)["triple"]) in needed]
(dest / "kb.jsonl").write_text("".join(kb), encoding="utf-8")
for name, rows in (("samples.jsonl", samples), ("retrieval.jsonl", retrieval)):
    (dest / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
print(f"{len(samples)} samples, {len(retrieval)} retrieval rows, {len(kb)} triples")
