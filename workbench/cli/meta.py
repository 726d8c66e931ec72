"""Verbs for meta-evaluation: meta run / report (how far each checker agrees with people)."""

from __future__ import annotations

import sys

from workbench.cli.claims import claims_config, verification_parent
from workbench.cli.common import SharedParents, add_bootstrap, add_json, model_options
from workbench.cli.exit_codes import OK
from workbench.models.embedders import LONG_ANSWERS
from workbench.cli.shared import emit_json, run_pass, store_of
from workbench.cli.shared import print_tables
from workbench.tables import fmt_estimate, table

#: What ``meta run`` checks with unless told otherwise: the offline checker every laptop runs in minutes, its
#: thresholds and tie rule chosen on the shared half of RAGChecker's preference data (docs/checkers.md):
#: a claim holds when either verifier finds it (lexical coverage 0.5, or a sentence at the embedder's cosine
#: threshold for long answers, workbench.models.embedders).
OFFLINE_CHECKER = dict(decomposer="rule", verifiers="lexical,embedding", ties="supported", lexical_threshold=0.5,
                       threshold_use=LONG_ANSWERS)


def cmd_meta_run(args) -> int:
    """Claim-check both responses of every instance against its reference, then the whole-answer similarity."""
    from workbench.meta.run import run_meta
    from workbench.meta.sets import get_meta_set
    from workbench.models.cached import default_llm

    config = claims_config(args)
    store = store_of(args)
    meta = get_meta_set(store, args.name)
    llm = default_llm(store, config.model, **model_options(args)) if config.needs_llm else None
    reports = []

    def execute(**kwargs):
        reports.append(run_meta(store, meta, config, llm=llm, similarity=not args.no_similarity,
                                retry_errors=args.retry_errors, model_options=model_options(args), **kwargs))
        return reports[-1]

    code = run_pass("meta", "responses", execute, as_json=args.json, resume_hint=f"workbench meta run {meta.name}",
                    llm=llm, wait=args.wait)
    if reports and not args.json:
        r = reports[-1]
        similarity = (f"; similarity with {r.similarity_model}: {r.embedded or 0:,} texts embedded, "
                      f"{r.embeddings_cached or 0:,} from the store") if r.similarity_model else ""
        print(f"meta run over {meta.name}: claim runs {', '.join(map(str, r.claim_runs))}{similarity} · "
              f"`workbench meta report {meta.name}` correlates them with the annotators", file=sys.stderr)
    return code


def cmd_meta_report(args) -> int:
    """Each scorer's Pearson and Spearman ×100 with every human label, 95% bootstrap CIs over instances."""
    from workbench.meta.report import meta_report, rows_json
    from workbench.meta.sets import LABELS, get_meta_set

    store = store_of(args)
    meta = get_meta_set(store, args.name)
    rows = meta_report(store, meta, resamples=args.resamples, seed=args.seed)
    if args.json:
        emit_json(rows_json(rows))
        return OK
    instances = store.conn.execute("SELECT count(*) FROM samples WHERE dataset_id = ?", (meta.dataset_id,)).fetchone()[0]
    print(f"meta set {meta.name}: {instances:,} instances · each scorer's score of response 2 minus response 1 "
          f"against each annotator's label\nPearson and Spearman ×100, 95% bootstrap CI over instances "
          f"({args.resamples} resamples, seed {args.seed}); n = (instance, annotator) pairs")
    for label in LABELS:
        mine = [r for r in rows if r.label == label]
        print(f"\n{label}")
        print_tables(table(["scorer", "pearson", "spearman", "n"],
                    [[r.scorer, fmt_estimate(r.pearson, 2), fmt_estimate(r.spearman, 2), str(r.n)] for r in mine],
                    left=1))
    if not any(r.kind == "claims" for r in rows):
        print(f"\nno checker run yet: `workbench meta run {meta.name}` scores both responses with the claims pipeline")
    return OK


def register(subparsers, parents: SharedParents) -> None:
    """Add ``meta run|report`` to the CLI."""
    p = subparsers.add_parser("meta", parents=[parents.db],
                              help="meta-evaluation: how far each checker agrees with human preference labels")
    psub = p.add_subparsers(dest="meta_verb", metavar="VERB", required=True)
    verify = verification_parent(parents, **OFFLINE_CHECKER)
    q = psub.add_parser("run", parents=[parents.db, verify],
                        help="score both responses of every instance against its reference with the claims "
                             "pipeline (precision, recall, F1; resumable, cached) and the whole-answer similarity")
    q.add_argument("name", nargs="?", help="meta set name (default: the latest imported)")
    q.add_argument("--no-similarity", action="store_true", help="skip the whole-answer similarity baseline")
    q.set_defaults(func=cmd_meta_run)

    q = psub.add_parser("report", parents=[parents.db],
                        help="each scorer's Pearson and Spearman ×100 with the human labels, 95%% CIs")
    q.add_argument("name", nargs="?", help="meta set name (default: the latest imported)")
    add_bootstrap(q)
    add_json(q, "a list of rows: label, scorer, kind, pearson, spearman, low, high (Pearson's 95%% CI), "
                "spearman_low, spearman_high, n")
    q.set_defaults(func=cmd_meta_report, readonly=True)
