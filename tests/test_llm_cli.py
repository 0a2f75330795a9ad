"""`kwb agent run|resume|list` as a user runs them: real subprocesses, a local protocol server, real evaluation,
Ctrl-C as a real SIGINT (usage mistakes and --help through `main()` in this process). No traceback ever reaches
the terminal."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from llm_server import NO_CODE, ScriptedLLMServer, failure, hang, reply
from record_llm_sessions import WRAPPER, honest

from workbench.cli.agent import PROVIDER_OPTIONS, SETTING_OPTIONS
from workbench.llm.agent import list_runs
from workbench.llm.runs import AgentSettings

pytest.importorskip("openai")

REPO = Path(__file__).resolve().parents[1]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KWB_LLM", "OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")])),
               XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    return env


def kwb(tmp_path: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench.cli.main", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=timeout, env=_env(tmp_path))


@pytest.fixture
def kwb_in(tmp_path, kwb_here, monkeypatch):
    """`kwb ARGS` in this process, with the environment `kwb` gets above (no LLM settings, its own config)."""
    for name in [k for k in os.environ if k.startswith(("KWB_LLM", "OPENAI_", "ANTHROPIC_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return lambda *args: kwb_here(*args, cwd=tmp_path)


def _run_args(server: ScriptedLLMServer, *extra: str) -> list[str]:
    return ["agent", "run", "--task", "vector_add", "--model", "scripted", "--base-url", server.openai_base_url,
            "--store", "r.db", "--no-time", "--retry-delay", "0.001", *extra]


def test_run_prints_a_progress_line_and_a_summary_then_list_shows_it(tmp_path):
    with ScriptedLLMServer([reply(WRAPPER), reply(honest(1024))]) as server:
        done = kwb(tmp_path, *_run_args(server, "--turns", "2", "--concurrency", "1", "--transcript", "t.jsonl",
                                        "--instructions", "Be brief."))
        sent = [r.text for r in server.requests]
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Be brief." in sent[0]
    progress = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert progress[0].startswith("[1/2] n00 rejected") and progress[1].startswith("[2/2] n01 ok")
    assert "best n01" in progress[1] and "tok" in progress[1]
    assert "stopped: max-turns" in done.stdout and "best: n01 refine <- n00: ok" in done.stdout
    (run,) = list_runs(tmp_path / "r.db")
    assert run["status"] == "finished" and AgentSettings.from_dict(run["settings"]).instructions == "Be brief."
    listing = kwb(tmp_path, "agent", "list", "--store", "r.db")
    assert listing.returncode == 0 and run["run_id"] in listing.stdout and "finished" in listing.stdout


def test_a_provider_that_always_fails_ends_with_its_cause_not_a_traceback(tmp_path):
    with ScriptedLLMServer([failure(500, "internal error")] * 10) as server:
        done = kwb(tmp_path, *_run_args(server, "--turns", "5", "--max-retries", "1", "--max-failed-steps", "2",
                                        "--concurrency", "1"))
    assert done.returncode == 1 and "Traceback" not in done.stderr + done.stdout
    assert "the run stopped on LLM errors" in done.stderr and "server is failing (HTTP 500)" in done.stderr
    assert "2 steps failed (max_failed_steps=2)" in done.stderr
    assert "[1/5] n00 llm_error [llm-server]" in done.stderr and "2 failed steps" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["agent", "run", "--task", "no_such_task", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"],
     "no_such_task"),
    (["agent", "run", "--task", "vector_add", "--base-url", "http://127.0.0.1:9/v1"], "$KWB_LLM_MODEL"),
    (["agent", "run", "--task", "vector_add", "--model", "m", "--concurrency", "0"], "must be positive"),
    (["agent", "run", "--task", "vector_add", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--strategy",
      "beam"], "known strategy names"),
    (["agent", "run", "--task", "vector_add", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--feedback",
      "loud"], "feedback preset"),
    (["agent", "resume", "agent-nope", "--store", "missing.db"], "no results store at missing.db"),
    (["agent", "list", "--store", "missing.db"], "no results store at missing.db"),
    (["agent"], "required: {run,resume,list}"),
])
def test_usage_errors_exit_2_with_one_message(kwb_in, args, message):
    done = kwb_in(*args)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_records_the_call_in_flight_and_resume_finishes_the_run(tmp_path):
    with ScriptedLLMServer([NO_CODE, hang(60)]) as server:
        proc = subprocess.Popen([sys.executable, "-m", "workbench.cli.main",
                                 *_run_args(server, "--turns", "3", "--concurrency", "1", "--transcript", "t.jsonl")],
                                cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        assert server.wait_for_requests(2, timeout=60), proc.stderr.read() if proc.poll() is not None else ""
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        started = time.monotonic()
        out, err = proc.communicate(timeout=20)
        assert time.monotonic() - started < 5
        assert proc.returncode == 130 and "Traceback" not in err + out, err
        (run,) = list_runs(tmp_path / "r.db")
        assert run["status"] == "interrupted" and run["nodes"] == 1
        assert f"kwb agent resume {run['run_id']} --store r.db" in err
        records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
        calls = [r for r in records if r["kind"] == "call"]
        assert [c["error_kind"] for c in calls] == ["", "interrupted"] and calls[1]["reply"] is None
        assert records[-1]["kind"] == "end" and records[-1]["stop_reason"] == "interrupted"

        server.add(reply(honest(1024)), NO_CODE)
        resumed = kwb(tmp_path, "agent", "resume", run["run_id"], "--store", "r.db")
    assert resumed.returncode == 0, resumed.stderr
    assert "[2/3] n01 ok" in resumed.stderr and "[3/3] n02" in resumed.stderr and "stopped: max-turns" in resumed.stdout
    assert list_runs(tmp_path / "r.db")[0]["status"] == "finished"


def test_every_setting_of_the_python_api_has_an_option(kwb_in):
    from workbench.llm.config import LLMConfig

    assert set(SETTING_OPTIONS) == {f.name for f in dataclasses.fields(AgentSettings)}
    assert set(PROVIDER_OPTIONS) <= {f.name for f in dataclasses.fields(LLMConfig)}
    help_text = kwb_in("agent", "run", "--help").stdout
    for option in [*SETTING_OPTIONS.values(), *PROVIDER_OPTIONS.values()]:
        assert option in help_text, option
