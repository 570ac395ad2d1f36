"""``megasolve serve``: the HTTP API returns exactly the CLI's JSON, bad input gets the CLI's one-line
error with the field it names, jobs queue, cancel and time out, and the page ships its own assets.

Each test talks to a real server (uvicorn on 127.0.0.1 and an ephemeral port, stopped at the end).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install 'megasolve[web]'")
pytest.importorskip("uvicorn", reason="the web extra is not installed: pip install 'megasolve[web]'")

from click.testing import CliRunner  # noqa: E402

from megasolve.cli.main import cli  # noqa: E402
from megasolve.web.app import ServerConfig  # noqa: E402
from megasolve.web.request import body_to_argv, offered_options, openapi  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from browser import running_server  # noqa: E402

TIMING_FIELDS = ("wall_s", "build_s", "solve_s")
STATIC = Path(__file__).resolve().parent.parent / "web" / "static"


@pytest.fixture(scope="module")
def base():
    with running_server(ServerConfig(workers=2, max_queued=4, max_seconds=300)) as url:
        yield url


def request(base: str, method: str, path: str, body=None, raw: bytes | None = None):
    """(status, headers, text) of one HTTP request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read().decode()


def without_timing(data):
    if isinstance(data, dict):
        return {k: without_timing(v) for k, v in data.items() if k not in TIMING_FIELDS}
    if isinstance(data, list):
        return [without_timing(v) for v in data]
    return data


def cli_json(args: list[str]) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


# ---------------------------------------------------------------------------- the same JSON as the CLI
def test_api_solve_equals_cli_json(base):
    status, headers, text = request(base, "POST", "/api/solve",
                                    {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "top_k": 3, "fix": ["tp=2"]})
    assert status == 200 and headers["x-megasolve-exit-code"] == "0"
    _, expected = cli_json(["solve", "--model", "llama-3.1-8b", "--gpus", "8", "--gpu", "h100", "--top-k", "3",
                            "--fix", "tp=2"])
    assert without_timing(json.loads(text)) == without_timing(expected)
    assert [e["layout"]["tp"] for e in expected["layouts"]] == [2, 2, 2]


def test_api_estimate_equals_cli_json_and_launch_text(base):
    body = {"model": "llama-3.1-70b", "gpus": 64, "gpu": "h100", "tp": 4, "pp": 4, "cp": 2, "seq_len": 8192,
            "gbs": 512, "recompute": "selective"}
    args = ["estimate", "-m", "llama-3.1-70b", "-n", "64", "-g", "h100", "--tp", "4", "--pp", "4", "--cp", "2",
            "--seq-len", "8192", "--gbs", "512", "--recompute", "selective"]
    status, _, text = request(base, "POST", "/api/estimate", body)
    assert status == 200
    assert json.loads(text) == cli_json(args)[1]  # estimate has no wall-clock field
    status, headers, text = request(base, "POST", "/api/estimate", {**body, "format": "megatron"})
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert text == CliRunner().invoke(cli, [*args, "--format", "megatron"]).stdout


def test_api_whatif_equals_cli_json(base):
    body = {"model": "llama-3.1-8b", "gpus": "8,16", "gpu": "h100", "tokens": 1e12, "gpu_hour_price": 2.5}
    status, _, text = request(base, "POST", "/api/whatif", body)
    assert status == 200
    _, expected = cli_json(["whatif", "-m", "llama-3.1-8b", "-n", "8,16", "-g", "h100", "--tokens", "1e12",
                            "--gpu-hour-price", "2.5", "--jobs", "1"])
    assert without_timing(json.loads(text)) == without_timing(expected)
    assert [p["cluster"]["num_gpus"] for p in expected["points"]] == [8, 16]


def test_api_infeasible_solve_is_the_cli_json_with_exit_code_1(base):
    status, headers, text = request(base, "POST", "/api/solve", {"model": "llama-3.1-8b", "gpus": 1,
                                                                  "gpu": "a100-40g", "time_limit": 60})
    assert status == 200 and headers["x-megasolve-exit-code"] == "1"
    code, expected = cli_json(["solve", "-m", "llama-3.1-8b", "-n", "1", "-g", "a100-40g"])
    assert code == 1
    data = json.loads(text)
    assert without_timing(data) == without_timing(expected)
    assert data["layouts"] == [] and data["reasons"] and data["repairs"]


def test_api_model_text_reads_like_the_cli_reads_a_file(base, tmp_path):
    text = ("num_layers: 4\nhidden_size: 512\nnum_attention_heads: 8\nffn_hidden_size: 2048\nvocab_size: 32000\n"
            "swiglu: true\nnormalization: RMSNorm\n")
    status, _, answer = request(base, "POST", "/api/estimate", {"model_text": text, "gpus": 2, "gpu": "h100",
                                                                "tp": 2})
    assert status == 200, answer
    path = tmp_path / "model.yaml"  # the worker names the uploaded text model.yaml / model.json
    path.write_text(text)
    assert json.loads(answer) == cli_json(["estimate", "-m", str(path), "-n", "2", "-g", "h100", "--tp", "2"])[1]


def test_api_cluster_text_reads_like_the_cli_reads_a_cluster_file(base, tmp_path):
    text = "gpu: h100\nnodes: 2\ngpus_per_node: 8\nnic_gbit_per_gpu: 200\n"
    status, _, answer = request(base, "POST", "/api/solve", {"model": "llama-3.1-8b", "cluster_text": text,
                                                             "top_k": 2})
    assert status == 200, answer
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    _, expected = cli_json(["solve", "-m", "llama-3.1-8b", "--cluster", str(path), "--top-k", "2"])
    assert without_timing(json.loads(answer)) == without_timing(expected)
    assert expected["cluster"]["num_gpus"] == 16


def test_api_precision_recipe_text_reads_like_the_cli_reads_the_file(base, tmp_path):
    recipe = Path(__file__).parent / "data" / "precision" / "nemotron3_super_nvfp4.yaml"
    body = {"model": "nemotron-h-8b", "gpus": 8, "gpu": "b200", "precision": "fp4",
            "precision_recipe_text": recipe.read_text()}
    status, _, answer = request(base, "POST", "/api/estimate", body)
    assert status == 200, answer
    assert json.loads(answer) == cli_json(["estimate", "-m", "nemotron-h-8b", "-n", "8", "-g", "b200", "--precision",
                                           "fp4", "--te-precision-config", str(recipe)])[1]
    assert json.loads(answer)["workload"]["module_precision"][0] == ["*.linear_qkv", "bf16"]
    status, _, answer = request(base, "POST", "/api/estimate", {**body, "precision_recipe_text": "matchers: 3\n"})
    assert status == 400 and json.loads(answer)["field"] == "precision_recipe_text"


def test_api_profile_text_reads_like_the_cli_reads_a_profile(base, tmp_path):
    text = "base: published-megatron-runs\noverrides: {memory.other_reserve_gb: 4.0}\n"
    body = {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "profile_text": text}
    status, _, answer = request(base, "POST", "/api/estimate", body)
    assert status == 200, answer
    path = tmp_path / "profile.yaml"
    path.write_text(text)
    assert json.loads(answer) == cli_json(["estimate", "-m", "llama-3.1-8b", "-n", "8", "-g", "h100",
                                           "--profile", str(path)])[1]
    status, _, answer = request(base, "POST", "/api/estimate", {**body, "profile_text": "overrides: 3\n"})
    assert status == 400 and json.loads(answer)["field"] == "profile_text"
    assert "<profile_text>" in json.loads(answer)["error"]
    status, _, answer = request(base, "POST", "/api/estimate", {**body, "profile": "/etc/hosts"})
    assert status == 400 and json.loads(answer)["field"] == "profile"  # a path on the server: not an option


def test_api_alias_note_goes_to_a_header(base):
    status, headers, text = request(base, "POST", "/api/estimate", {"model": "deepseek-v3-lite", "gpus": 8,
                                                                    "gpu": "h100", "ep": 8})
    assert status == 200
    assert "Moonlight" in headers["x-megasolve-notes"]
    assert json.loads(text)["model"] == "moonlight-16b-a3b"


# ---------------------------------------------------------------------------- bad input: the CLI's one line
def error(base: str, path: str, body=None, raw: bytes | None = None) -> tuple[int, dict]:
    status, _, text = request(base, "POST", path, body, raw=raw)
    return status, json.loads(text)


def test_malformed_upload_gets_one_line_and_the_server_keeps_serving(base):
    status, answer = error(base, "/api/solve", {"model_text": '{"model_type": "llama", "hidden_size": 4096,',
                                                "gpus": 8, "gpu": "h100"})
    assert status == 400
    assert answer == {"error": "--model=<model_text>: is not valid .json (line 1); fix: check the file's syntax",
                      "field": "model_text"}
    status, answer = error(base, "/api/solve", {"model_text": "num_layers: [unclosed\n", "gpus": 8, "gpu": "h100"})
    assert status == 400 and answer["field"] == "model_text" and "\n" not in answer["error"]
    assert "is not valid .yaml" in answer["error"]
    status, answer = error(base, "/api/solve", {"model_text": '{"model_type": "llama"}', "gpus": 8, "gpu": "h100"})
    assert status == 400 and answer["field"] == "model_text", answer  # a required key is missing
    assert request(base, "GET", "/api/health")[0] == 200
    assert request(base, "POST", "/api/solve", {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100"})[0] == 200


def test_yaml_upload_cannot_run_code(base):
    """The model text goes through yaml.safe_load, as a --model file does: python tags are refused."""
    status, answer = error(base, "/api/solve", {"model_text": "num_layers: !!python/object/apply:os.system ['true']\n",
                                                "gpus": 8, "gpu": "h100"})
    assert status == 400 and answer["field"] == "model_text"
    assert "is not valid .yaml" in answer["error"]


@pytest.mark.parametrize("body, field, words", [
    ({"model": "llama-3.1-8b", "gpus": "x", "gpu": "h100"}, "gpus", "'x' is not a valid integer"),
    ({"model": "llama-3.1-8b", "gpus": 8, "gpu": "h1000"}, "gpu", "h1000"),
    ({"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "precision": "fp6"}, "precision", "fp6"),
    ({"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "fix": ["tp"]}, "fix", "must be AXIS=VALUE"),
    ({"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "top_k": 0}, "top_k", "0"),
    ({"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "tp": 2}, "tp", "not an option of solve"),
    ({"model": "/etc/passwd", "gpus": 8, "gpu": "h100"}, "model", "the server reads no paths"),
    ({"model": "lama-3.1-8b", "gpus": 8, "gpu": "h100"}, "model", "did you mean llama-3.1-8b"),
    ({"model": "llama-3.1-8b", "model_text": "num_layers: 2", "gpus": 8, "gpu": "h100"}, "model", "both"),
    ({"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "plot": "x.png"}, "plot", "not an option of solve"),
    ({"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "cluster": "/etc/hosts"}, "cluster", "not an option"),
    ({"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "allow_cross_domain_tp": "yes"}, "allow_cross_domain_tp",
     "must be true or false"),
])
def test_bad_solve_input_names_the_field(base, body, field, words):
    status, answer = error(base, "/api/solve", body)
    assert status == 400, answer
    assert answer["field"] == field
    assert words in answer["error"] and "\n" not in answer["error"]


def test_bad_estimate_layout_is_the_cli_error(base):
    status, answer = error(base, "/api/estimate", {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "tp": 3})
    assert status == 400
    cli_result = subprocess.run([sys.executable, "-c", "from megasolve.cli.main import main; main()", "estimate",
                                 "-m", "llama-3.1-8b", "--gpus", "8", "--gpu", "h100", "--tp", "3"],
                                capture_output=True, text=True, timeout=120)
    assert cli_result.returncode == 2
    assert cli_result.stderr.strip() == f"error: {answer['error']}"
    assert answer["field"] == "gpus"


def test_body_must_be_a_small_json_object(base):
    assert error(base, "/api/solve", raw=b"{not json")[1]["field"] == "body"
    assert error(base, "/api/solve", body=[1, 2])[1]["field"] == "body"
    status, answer = error(base, "/api/solve", raw=b'{"model_text": "' + b"x" * (2 * 1024 * 1024) + b'"}')
    assert status == 400 and answer["field"] == "body" and "1 MiB" in answer["error"]
    status, answer = error(base, "/api/solve", {"model_text": "a: 1\n" * 60_000, "gpus": 8, "gpu": "h100"})
    assert status == 400 and answer["field"] == "model_text" and "256 KiB" in answer["error"]
    status, answer = error(base, "/api/nothing", {"model": "llama-3.1-8b"})
    assert status == 400 and answer["field"] == "command"


def test_time_limit_cannot_outlast_the_server(base):
    status, answer = error(base, "/api/solve", {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100",
                                                "time_limit": "301"})  # the page sends the URL's text
    assert status == 400 and answer == {
        "error": "time_limit=301: longer than this server's limit of 300 s per command; "
                 "fix: send time_limit <= 300 (the best layouts found by then come back)", "field": "time_limit"}


def test_whatif_jobs_are_bounded_by_the_server(base):
    for jobs in (64, "2"):
        status, answer = error(base, "/api/whatif", {"model": "llama-3.1-8b", "gpus": "8", "gpu": "h100",
                                                     "jobs": jobs})
        assert status == 400 and answer["field"] == "jobs" and "at most 1 process" in answer["error"]


# ---------------------------------------------------------------------------- jobs: queue, progress, cancel, timeout
def wait_state(base: str, job_id: str, states: tuple[str, ...], timeout_s: float = 240) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        job = json.loads(request(base, "GET", f"/api/jobs/{job_id}")[2])
        if job["state"] in states:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


LONG_SWEEP = {"model": "deepseek-v3", "gpus": "64..8192", "gpu": "h100,b200,a100-80g", "seq_len": "4096,8192,32768"}


def test_jobs_queue_report_progress_and_cancel():
    with running_server(ServerConfig(workers=1, max_queued=1, max_seconds=300)) as url:
        status, _, text = request(url, "POST", "/api/jobs", {"command": "whatif", "options": LONG_SWEEP})
        assert status == 202
        first = json.loads(text)
        status, _, text = request(url, "POST", "/api/jobs", {"command": "solve", "options": {
            "model": "llama-3.1-8b", "gpus": 8, "gpu": "h100"}})
        second = json.loads(text)
        assert status == 202 and second["state"] == "queued" and second["position"] == 1
        status, _, text = request(url, "POST", "/api/jobs", {"command": "solve", "options": {
            "model": "llama-3.1-8b", "gpus": 8, "gpu": "h100"}})
        assert status == 503 and "queue" in json.loads(text)["error"]
        running = wait_state(url, first["id"], ("running",))
        assert running["position"] is None
        deadline = time.monotonic() + 240
        while running["progress"] is None and running["state"] == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
            running = json.loads(request(url, "GET", f"/api/jobs/{first['id']}")[2])
        assert running["state"] == "running" and running["progress"][1] >= 8 * 3 * 3  # 8 sizes x 3 GPUs x 3 seqs (+ min-GPU searches)
        cancelled = json.loads(request(url, "DELETE", f"/api/jobs/{first['id']}")[2])
        assert cancelled["state"] == "cancelled"
        done = wait_state(url, second["id"], ("done",))
        assert done["runs"][0]["data"]["layouts"] and done["runs"][0]["labels"][0].startswith("tp")
        assert done["runs"][0]["why"].startswith("fastest predicted step")


def test_a_command_past_the_limit_is_stopped():
    with running_server(ServerConfig(workers=1, max_seconds=1)) as url:
        status, _, text = request(url, "POST", "/api/whatif", LONG_SWEEP)
        assert status == 504
        assert "ran past the server's limit of 1 s" in json.loads(text)["error"]
        assert request(url, "GET", "/api/health")[0] == 200


def test_job_with_launch_formats(base):
    status, _, text = request(base, "POST", "/api/jobs", {"command": "estimate", "formats": ["json", "megatron"],
                                                          "options": {"model": "llama-3.1-8b", "gpus": 8,
                                                                      "gpu": "h100", "tp": 2}})
    assert status == 202
    job = wait_state(base, json.loads(text)["id"], ("done", "failed"))
    report, flags = job["runs"]
    assert report["label"] == "tp2 pp1 dp4 mbs1"
    assert "--tensor-model-parallel-size 2" in flags["text"]


# ---------------------------------------------------------------------------- OpenAPI, page, assets
def test_openapi_describes_every_cli_option(base):
    spec = json.loads(request(base, "GET", "/api/openapi.json")[2])
    assert {"/api/solve", "/api/estimate", "/api/whatif", "/api/jobs"} <= set(spec["paths"])
    solve = spec["components"]["schemas"]["solve"]["properties"]
    assert {"model", "model_text", "gpus", "gpu", "top_k", "fix", "seq_len", "precision", "time_limit"} <= set(solve)
    assert solve["fix"] == {"type": "array", "items": {"type": "string"}, "description": solve["fix"]["description"]}
    assert solve["top_k"]["minimum"] == 1 and solve["top_k"]["default"] == 5
    assert "plot" not in solve and "report" not in solve and "cluster" not in solve
    flags = {k: v["default"] for k, v in solve.items() if v["type"] == "boolean" and not k.endswith("_parallel")}
    assert flags and all(v is False for v in flags.values()), flags  # true = pass the flag
    assert set(offered_options("estimate")) <= set(spec["components"]["schemas"]["estimate"]["properties"])
    assert openapi("0")["components"] == spec["components"]


def test_doctests_of_the_request_module_pass():
    import doctest

    from megasolve.web import request as request_module

    result = doctest.testmod(request_module)
    assert result.attempted >= 1 and result.failed == 0


@pytest.mark.parametrize("line, files, field", [
    ("error: --gpus=8: world size (8) is not divisible by tp(3)", {}, "gpus"),
    ("error: Invalid value for '--gpus' / '-n': 'x' is not a valid integer. (see `megasolve solve --help`)", {},
     "gpus"),
    ("error: Invalid value for '--top-k' / '-k': 0 is not in the range 1<=x<=100.", {}, "top_k"),
    ("error: --model=<model_text>: is not valid .json (line 1); fix: check the file's syntax",
     {"model_text": "{"}, "model_text"),
    ("error: num_layers=0: must be >= 1; fix: ...", {"model_text": "num_layers: 0"}, "model_text"),
    ("error: --profile overrides.x=3: must be a number >= 0; fix: ...", {"profile_text": "x"}, "profile_text"),
    ("error: no command or options given", {}, None),
])
def test_error_field_names_the_body_field(line, files, field):
    from megasolve.web.jobs import error_field
    from megasolve.web.request import CommandRequest

    assert error_field(f"note: x\n{line}\n", CommandRequest(command="solve", argv=[], files=files)) == field


def test_body_to_argv_uses_the_long_option_names():
    req = body_to_argv("estimate", {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "sequence_parallel": False,
                                    "distributed_optimizer": True, "account_for_loss": True, "nic_gbps": 400.0})
    assert req.argv == ["--model", "llama-3.1-8b", "--gpus", "8", "--gpu", "h100", "--no-sequence-parallel",
                        "--distributed-optimizer", "--account-for-loss", "--nic-gbps", "400.0", "--format", "json"]


def test_page_and_assets_are_served_with_a_same_origin_policy(base):
    status, headers, html = request(base, "GET", "/")
    assert status == 200 and 'src="/static/app.js"' in html
    assert "default-src 'self'" in headers["content-security-policy"]
    for name in ("app.js", "style.css"):
        status, _, text = request(base, "GET", f"/static/{name}")
        assert status == 200 and len(text) > 1000


def test_the_page_loads_nothing_from_elsewhere():
    """No CDN, no web font, no remote script: every asset ships in the package."""
    for path in STATIC.iterdir():
        text = path.read_text()
        urls = set(re.findall(r"https?://[^\s\"'`)]+", text)) - {"http://www.w3.org/2000/svg"}
        assert not urls, f"{path.name} refers to {urls}"


def test_the_page_marks_an_mfu_beyond_the_measured_as_the_cli_does():
    """The page's speed line repeats the CLI's (cli/render.py speed_basis_line) with the same threshold; the browser
    test checks the text, this the constant."""
    from megasolve.cli.render import MFU_BEYOND_MEASURED

    found = re.findall(r"^const MFU_BEYOND_MEASURED = ([\d.]+);$", (STATIC / "app.js").read_text(), re.M)
    assert [float(v) for v in found] == [MFU_BEYOND_MEASURED]


# ---------------------------------------------------------------------------- the command
def test_serve_help():
    # that `megasolve --help` imports no web module is checked with the other heavy imports in test_cli.py
    result = CliRunner().invoke(cli, ["serve", "--help"])
    assert result.exit_code == 0 and "--port" in result.output and "127.0.0.1" in result.output


def test_serve_without_the_extra_is_one_line_exit_2():
    code = ("import sys; sys.modules['starlette'] = None; from megasolve.cli.main import main; "
            "main(['serve', '--port', '0'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr == ("error: serve=starlette not installed: needs the web extra; "
                           "fix: pip install 'megasolve[web]'\n")


def test_serve_starts_and_answers():
    """The real command: starts, serves the page and the API, stops on SIGINT without leaving workers."""
    import signal
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "from megasolve.cli.main import main; main()", "serve",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if request(base, "GET", "/api/health")[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else ""
            time.sleep(0.1)
        status, _, text = request(base, "POST", "/api/estimate", {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100"})
        assert status == 200 and json.loads(text)["feasible"] is True
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    assert proc.returncode == 0, err
    assert f"serving on http://127.0.0.1:{port}/" in err


def test_a_killed_worker_leaves_no_files(tmp_path, monkeypatch):
    """The texts of a job stopped by its time limit or a cancel are removed with the worker: the folder is the
    server's, not the killed process's."""
    import asyncio
    import tempfile

    from megasolve.web.jobs import JobQueue
    from megasolve.web.request import CommandRequest

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model = json.dumps({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
                        "max_position_embeddings": 8192})
    sweep = ["--model", "@model_text", "--gpus", "64..8192", "--gpu", "h100,b200,a100-80g",
             "--seq-len", "4096,8192,32768", "--format", "json"]

    async def scenario() -> tuple[str, str, list[str]]:
        queue = JobQueue(workers=2, max_seconds=3)
        timed = queue.submit([CommandRequest(command="whatif", argv=list(sweep), files={"model_text": model})])
        cancelled = queue.submit([CommandRequest(command="whatif", argv=list(sweep), files={"model_text": model})])
        deadline = time.monotonic() + 120
        while cancelled.state != "running" or not any(tmp_path.glob("megasolve-web-*/model.json")):
            assert time.monotonic() < deadline, "the worker never wrote the model text into the server's folder"
            await asyncio.sleep(0.05)
        queue.cancel(cancelled)
        await asyncio.gather(timed.task, cancelled.task, return_exceptions=True)
        return timed.state, cancelled.state, sorted(p.name for p in tmp_path.iterdir())

    timed, cancelled, left = asyncio.run(scenario())
    assert (timed, cancelled) == ("timeout", "cancelled")
    assert left == []
