"""Verbs for triage: tag (or untag) a sample, export the tagged samples."""

from __future__ import annotations

import io

from workbench.cli.common import SharedParents, add_out
from workbench.cli.exit_codes import OK
from workbench.cli.shared import store_of, write_out


def cmd_tag(args) -> int:
    """Add (or with --remove, remove) a tag on a sample; print its tags and the dataset it is in.

    Without ``--dataset`` the sample's own dataset is used: the one dataset holding that id (a sample
    id in several datasets is refused, naming them, rather than tagged in whichever was imported last).
    """
    from workbench import triage
    from workbench.store.lookup import NotFound
    from workbench.store.queries import get_dataset, sample_sid

    store = store_of(args)
    dataset = args.dataset
    if dataset is None:
        holders = triage.datasets_with_sample(store, args.sample_id)
        if not holders:
            raise NotFound(f"no dataset has a sample {args.sample_id!r}")
        if len(holders) > 1:
            raise ValueError(f"sample {args.sample_id!r} is in {len(holders)} datasets ({', '.join(holders)}): "
                             "pass --dataset NAME to say which")
        dataset = holders[0]
    ds = get_dataset(store, dataset)
    sid = sample_sid(store, ds.id, args.sample_id)
    if args.remove:
        triage.remove_tag(store, ds.id, sid, args.tag)
    else:
        triage.add_tag(store, ds.id, sid, args.tag)
    print(f"{args.sample_id} (dataset {ds.name}): {' '.join(triage.tags_of(store, ds.id, sid)) or 'no tags'}")
    return OK


def cmd_tags_export(args) -> int:
    """Write the tagged samples (with their tags and notes) as JSONL."""
    from workbench.store.queries import get_dataset
    from workbench.triage import export_tagged

    store = store_of(args)
    ds = get_dataset(store, args.dataset)
    buf = io.StringIO()
    count = export_tagged(store, ds.id, buf, args.tag)
    write_out(args.out, buf.getvalue(), f"{count:,} tagged samples", force=args.force)
    return OK


def register(subparsers, parents: SharedParents) -> None:
    """Add ``tag`` and ``tags export`` to the CLI."""
    p = subparsers.add_parser("tag", parents=[parents.db], help="tag (or untag) a sample for triage")
    p.add_argument("sample_id")
    p.add_argument("tag", help="e.g. annotation-error, alias-miss, reasoning-fail, format-fail")
    p.add_argument("--dataset", help="dataset name (default: the one dataset holding SAMPLE_ID; refused, naming "
                                      "them, when several do)")
    p.add_argument("--remove", action="store_true", help="remove the tag instead")
    p.set_defaults(func=cmd_tag)

    p = subparsers.add_parser("tags", parents=[parents.db], help="triage tags: export tagged samples")
    psub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    q = psub.add_parser("export", parents=[parents.db], help="write tagged samples (with tags and notes) as JSONL")
    q.add_argument("--dataset", help="dataset name (default: the most recent import)")
    q.add_argument("--tag", action="append", help="only samples with this tag (repeatable)")
    add_out(q, "JSONL file to write, or - for stdout")
    q.set_defaults(func=cmd_tags_export, readonly=True)
