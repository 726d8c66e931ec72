"""Datasets: what is imported, with stats; import a directory."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Static

from workbench.tui.app import WorkbenchScreen
from workbench.tui.dialogs import PromptDialog
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded


def _dataset_rows(store):
    from workbench.store.queries import list_datasets

    return list_datasets(store)


def _import(store, path: str, name: str):
    from workbench.data.importer import import_dataset

    return import_dataset(store, path, name)


class DatasetsScreen(WorkbenchScreen):
    """One row per dataset: kind, units, samples, hops, retrievers."""

    BINDINGS = [Binding("i", "import", "Import"), Binding("enter", "open", "Runs", show=False)]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("[b]Datasets[/b]  [dim]i import a directory holding kb.jsonl, samples.jsonl, "
                     "retrieval.jsonl[/dim]", classes="title")
        table = DataTable(id="datasets", cursor_type="row", zebra_stripes=True)
        table.add_columns("name", "kind", "units", "outside KB", "samples", "hops", "retrievers")
        yield table
        yield Static("", id="status", classes="status")
        yield Footer()

    def on_mount(self) -> None:
        self.load("datasets", _dataset_rows)

    def on_data_changed(self, message: DataChanged) -> None:
        self.load("datasets", _dataset_rows)

    def on_loaded(self, message: Loaded) -> None:
        if message.what == "datasets":
            table = self.query_one(DataTable)
            table.clear()
            for d in message.payload:
                hops = " ".join(f"{h}:{n}" for h, n in d.get("hops", {}).items()) or "—"
                table.add_row(d["name"], d["unit_kind"], f"{d['units']:,}", f"{d['units_outside_kb']:,}",
                              f"{d['samples']:,}", hops, ", ".join(d["retrievers"]) or "—", key=d["name"])
            if not message.payload:
                self.query_one("#status", Static).update("No dataset yet: press [b]i[/b] to import one, e.g. "
                                                         "sample_data/metaqa")
        elif message.what == "import":
            r = message.payload
            verb = "unchanged" if r.unchanged else "imported"
            warn = f" · {'; '.join(r.warnings)}" if r.warnings else ""
            self.query_one("#status", Static).update(esc(
                f"{r.dataset}: {verb}: {r.units:,} {r.unit_kind}s, {r.samples:,} samples, "
                f"{r.retrievals:,} retrieval rows{warn}"))
            self.notify(f"{r.dataset} {verb}")
            self.load("datasets", _dataset_rows)

    def action_import(self) -> None:
        def got_path(path: str | None) -> None:
            if not path:
                return
            from pathlib import Path

            default = Path(path).resolve().name

            def got_name(name: str | None) -> None:
                if name:
                    self.query_one("#status", Static).update(esc(f"importing {path} …"))
                    self.load("import", _import, path.strip(), name.strip())

            self.app.push_screen(PromptDialog("Dataset name", value=default), got_name)

        self.app.push_screen(PromptDialog("Import a dataset directory (kb.jsonl, samples.jsonl, retrieval.jsonl)",
                                          placeholder="sample_data/metaqa"), got_path)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # Enter on the focused table arrives as RowSelected, not as the screen's binding.
        self.action_open()

    def action_open(self) -> None:
        self.app.switch_mode("runs")
