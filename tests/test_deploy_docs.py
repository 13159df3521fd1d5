"""Every answer of the README and docs query examples launches on every engine, or the engine says which decision it
cannot express: each emitted command parses with its engine's own parser (where dumped), each flag is in the table of
the version named, each manifest validates.

The answers are saved in tests/data/doc_answers.json by ``tools/doc_answers.py --write`` (re-running every example
costs minutes; launching a saved answer costs none). A query example with no saved answer fails here: run the tool.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import engine_parsers
import jsonschema
import pytest
import yaml

from roofline_opt.cli import main
from roofline_opt.deploy import flags

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import doc_answers  # noqa: E402

SAVED = json.loads(doc_answers.SAVED.read_text(encoding="utf-8"))
SCHEMAS = json.loads((Path(__file__).parent / "data" / "k8s" / "schemas.json").read_text())
ANSWERED = {text: entry for text, entry in SAVED.items() if entry["exit"] == 0}


def test_every_query_example_of_the_pages_has_its_answer_saved():
    assert [t for t in doc_answers.queries() if t not in SAVED] == []


def _launch(entry: dict, folder: Path) -> dict | None:
    """recipe.json of the launched answer; None when no engine can express it (exit 1, nothing written)."""
    answer = folder / "answer.json"
    answer.write_text(json.dumps(entry["answer"]), encoding="utf-8")
    lengths = [w for k in ("isl", "osl") if k in entry for w in (f"--{k}", str(entry[k]))]
    code = main(["launch", str(answer), "--out", str(folder / "recipes"), *lengths])
    assert code in (0, 1)
    return json.loads((folder / "recipes" / "recipe.json").read_text(encoding="utf-8")) if code == 0 else None


def _commands(script: str) -> list[list[str]]:
    """The commands of a serve script, without its srun launcher (a TensorRT-LLM instance spanning nodes)."""
    out = []
    for line in script.splitlines():
        if line and not line.startswith("#"):
            words = shlex.split(line)
            if words[0] == "srun":
                words = words[words.index("trtllm-llmapi-launch") + 1 :]
            out.append(words)
    return out


@pytest.mark.parametrize("text", ANSWERED)
def test_a_doc_example_answer_launches_on_every_engine_or_says_why(text, tmp_path, capsys):
    index = _launch(ANSWERED[text], tmp_path)
    asked_for_2d = "--tp-modes" in text and "2d" in text
    if index is None:  # only an answer asked for with 2-D TP is refused by every engine, each saying why
        notes = capsys.readouterr().err
        assert asked_for_2d and all(f"note: {e}: 2-D tensor parallelism" in notes for e in ("vllm", "sglang", "trtllm"))
        return
    recipes = tmp_path / "recipes"
    for dep in index["deployments"]:
        assert {"vllm", "sglang", "trtllm"} <= set(dep["engines"])
        for engine, got in dep["engines"].items():
            if "unsupported" in got:
                assert got["unsupported"].startswith(f"{engine}: ")
                assert asked_for_2d or "2-D tensor parallelism" not in got["unsupported"]  # only on request
                continue
            assert got["version"] == flags.TABLES[engine].version
    for script in recipes.glob("*.serve.sh"):
        for argv in _commands(script.read_text(encoding="utf-8")):
            if engine_parsers.program_of(argv) is not None:
                engine_parsers.parse(argv)
    for manifest in recipes.glob("*.k8s.yaml"):
        for doc in yaml.safe_load_all(manifest.read_text(encoding="utf-8")):
            if doc is not None:
                jsonschema.Draft202012Validator({**SCHEMAS, "$ref": f"#/$defs/{doc['kind']}"}).validate(doc)
    for predicted in recipes.glob("*.predicted.json"):
        record = json.loads(predicted.read_text(encoding="utf-8"))
        assert record["flags"] and all(record["flags"].values())  # every emitted flag named with its source
