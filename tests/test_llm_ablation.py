"""studies/llm_ablation.ipynb with a live provider that fails: the study finishes and reports the failure.

Through `kwb study run` (the path a user takes), against the local protocol server: the first configuration's
provider refuses every call (a failure on turn 1), the second's answers. Failed steps are rows with their
cause, the summary table counts them, and nothing turns into `KeyError: 'turn'`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from llm_server import ScriptedLLMServer, failure, reply
from record_llm_sessions import honest

pytest.importorskip("papermill")
pytest.importorskip("openai")

REPO = Path(__file__).resolve().parents[1]


def test_a_turn_one_failure_is_reported_by_the_study_not_a_key_error(tmp_path):
    def route(received):
        if received.body["model"] == "broken-model":
            return failure(500, "upstream model crashed")
        return reply(honest(1024))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("KWB_", "OPENAI_", "ANTHROPIC_"))}
    with ScriptedLLMServer(router=route) as server:
        env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                   KWB_LLM_BASE_URL=server.openai_base_url, KWB_LLM_MAX_RETRIES="1", KWB_LLM_CACHE="off",
                   XDG_CONFIG_HOME=str(tmp_path / "config"))
        proc = subprocess.run(
            [sys.executable, "-m", "workbench.cli.main", "study", "run", str(REPO / "studies" / "llm_ablation.ipynb"),
             "-p", "provider", "openai", "-p", "model", '["broken-model", "working-model"]', "-p", "strategy",
             '["refine"]', "-p", "feedback", '["full"]', "-p", "max_turns", "2", "-p", "record_to",
             str(tmp_path / "live.jsonl"), "--device", "cpu", "--store", str(tmp_path / "r.db"), "--out",
             str(tmp_path / "runs")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "KeyError" not in proc.stdout + proc.stderr
    executed = next((tmp_path / "runs").rglob("*.ipynb"))
    text = "".join("".join(o.get("text", "")) + json.dumps(o.get("data", {}))
                   for c in json.loads(executed.read_text())["cells"] for o in c.get("outputs", []))
    assert "broken-model · refine · full: 2 turns, 2 failed LLM steps" in text
    assert "upstream model crashed" in text and "server is failing (HTTP 500)" in text
    from workbench.store import Store

    rows = Store(str(tmp_path / "r.db")).frame()
    by_model = rows.groupby(rows["metadata"].map(lambda m: m.get("config_model")))["status"].apply(list).to_dict()
    assert by_model == {"broken-model": ["llm_error", "llm_error"], "working-model": ["ok", "ok"]}
