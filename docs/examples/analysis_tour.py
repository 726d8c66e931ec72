"""The analysis API on a workbench database.

    python docs/examples/analysis_tour.py .workbench/demo.db
"""

import sys

from workbench import analysis

db = sys.argv[1]                        # opened read-only (mode=ro): never written
led = analysis.ledger(db, "recorded")   # one row per retrieval cell; CIs as <term>_lo, <term>_hi
shown = ["cell_id", "S_vis", "S_llm", "S_llm_lo", "S_llm_hi", "D_mass"]
print(led[shown].head(5).to_string(index=False))
ev = analysis.events(db, "recorded")    # one row per (sample, cell)
print(ev[ev.kind == "retrieval"].groupby("budget")[["h_vis", "score"]].mean())
# the samples that saw the gold and were answered wrong
lost = analysis.samples(db, "recorded", "k5-b128-linear", "dissipation")
print(len(lost), "dissipated answers in k5-b128-linear")
print(lost[["sample_id", "question", "prediction"]].head(3).to_string(index=False))
