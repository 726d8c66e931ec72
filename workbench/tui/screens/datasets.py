"""Datasets: what is imported, with stats; import a directory."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Static

from workbench.data.importer import FILES, check_directory, import_dataset
from workbench.paths import user_path
from workbench.store.queries import list_datasets, list_runs
from workbench.tui.base import WorkbenchScreen
from workbench.tui.dialogs import PromptDialog
from workbench.tui.markup import esc
from workbench.tui.messages import DataChanged, Loaded
from workbench.tui.widgets import KeyFooter, welcome

PATH_HINT = "a directory, e.g. sample_data/metaqa"


def _dataset_rows(store):
    return list_datasets(store)


def _import(store, path: str, name: str):
    """The import report, or the exception: a rejected input is an answer to show, not a crash."""
    try:
        return import_dataset(store, path, name)
    except Exception as exc:  # noqa: BLE001  (every failure ends the "importing …" status)
        return exc


def _latest_run_of(store, dataset: str):
    names = [r["name"] for r in list_runs(store) if r["dataset"] == dataset]
    return dataset, len(names), names[-1] if names else None


def directory_problem(path: str) -> str | None:
    """Why ``path`` cannot be imported as a dataset directory (None when it can), checked before any prompt."""
    if not path:
        return (f"Type the path of a directory holding {FILES[0]} and {FILES[1]} (and optionally {FILES[2]}), "
                "e.g. sample_data/metaqa. Esc cancels.")
    try:
        check_directory(path)
    except ValueError as exc:
        return str(exc)
    return None


class DatasetsScreen(WorkbenchScreen):
    """One row per dataset: kind, units, samples, hops, retrievers."""

    BINDINGS = [Binding("i", "import", "Import"), Binding("enter", "open", "Runs of dataset", priority=True)]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("[b]Datasets[/b]  [dim]i import a directory holding kb.jsonl, samples.jsonl, "
                     "retrieval.jsonl · enter runs of the dataset[/dim]", classes="title")
        table = DataTable(id="datasets", cursor_type="row", zebra_stripes=True)
        table.add_columns("name", "kind", "units", "outside KB", "samples", "hops", "retrievers")
        yield table
        yield Static("", id="welcome")
        yield Static("", id="status", classes="status")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#welcome", Static).display = False
        self.load("datasets", _dataset_rows)

    def on_data_changed(self, message: DataChanged) -> None:
        self.load("datasets", _dataset_rows)

    def on_loaded(self, message: Loaded) -> None:
        status = self.query_one("#status", Static)
        if message.what == "datasets":
            table = self.query_one(DataTable)
            table.clear()
            for d in message.payload:
                hops = " ".join(f"{h}:{n}" for h, n in d.get("hops", {}).items()) or "—"
                table.add_row(d["name"], d["unit_kind"], f"{d['units']:,}", f"{d['units_outside_kb']:,}",
                              f"{d['samples']:,}", hops, ", ".join(d["retrievers"]) or "—", key=d["name"])
            # An empty database: the greeting takes the empty table's place.
            welcome_shown = self.query_one("#welcome", Static)
            welcome_shown.update(welcome("[b]i[/b]"))
            welcome_shown.display, table.display = not message.payload, bool(message.payload)
        elif message.what == "import":
            r = message.payload
            if isinstance(r, Exception):
                status.update("")
                text = str(r) if isinstance(r, ValueError) or type(r).__name__ == "InputRejected" \
                    else f"{type(r).__name__}: {r}"
                self.app.show_error("Cannot import", text)
                return
            verb = "unchanged" if r.unchanged else "imported"
            warn = f" · {'; '.join(r.warnings)}" if r.warnings else ""
            status.update(esc(f"{r.dataset}: {verb}: {r.units:,} {r.unit_kind}s, {r.samples:,} samples, "
                              f"{r.retrievals:,} retrieval rows{warn}"))
            self.notify(f"{r.dataset} {verb}")
            self.load("datasets", _dataset_rows)
        elif message.what == "runs-of":
            self._show_runs_of(*message.payload)

    def action_import(self) -> None:
        def got_path(path: str | None) -> None:
            if path is None:
                return
            path = path.strip()
            problem = directory_problem(path)
            if problem:
                self.app.show_error("Cannot import", problem)
                return

            def got_name(name: str | None) -> None:
                if name and name.strip():
                    self.query_one("#status", Static).update(esc(f"importing {path} …"))
                    self.load("import", _import, path, name.strip())

            self.app.push_screen(PromptDialog("Dataset name", value=user_path(path).resolve().name,
                                              validate=lambda v: None if v.strip() else "A dataset needs a name."),
                                 got_name)

        # An empty Enter keeps the prompt open and says what it wants (see directory_problem).
        # The question on one row at 80 columns (the CLI's words): the screen's heading names the three files.
        self.app.push_screen(PromptDialog("Import a dataset directory (kb/samples/retrieval.jsonl)",
                                          placeholder=PATH_HINT,
                                          validate=lambda v: directory_problem("") if not v.strip() else None),
                             got_path)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # A mouse click on a row (enter is the screen's priority binding, shown in the footer).
        self.action_open()

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            self.notify("No dataset yet: press i to import one.")
            return
        name = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        self.load("runs-of", _latest_run_of, name)

    def _show_runs_of(self, dataset: str, count: int, latest: str | None) -> None:
        # Runs, narrowed to this dataset (RunsScreen reads app.dataset_filter), its latest run selected.
        self.app.dataset_filter = dataset
        if latest:
            self.app.run_name, self.app.cell_id = latest, None
        self.app.switch_mode("runs")
        self.app.screen.post_message(DataChanged(self.app.store.data_version()))
        if count:
            self.app.notify(f"{count} run{'s' if count != 1 else ''} of {dataset}; latest: {latest}")
        else:
            self.app.notify(f"No runs of {dataset} yet: press n to start one.")
