"""An HTTP request body -> the argument list of the same ``megasolve`` command, and the OpenAPI
description of those bodies, both read from the click options themselves so they never drift.

A body is the command's options as a JSON object under their long names with dashes as
underscores (``--top-k`` -> ``top_k``), e.g.::

    {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "top_k": 3, "fix": ["tp=2"]}

Text fields replace the CLI's file paths, because the server never reads its own files on a
client's behalf: ``model_text`` (a config.json or Megatron YAML, sent as text) instead of a
``--model`` path, ``cluster_text`` instead of ``--cluster FILE``, ``profile_text`` instead of
``--profile FILE``. Options that write files (``--plot``, ``--report``) or take a path (a
``click.Path``/``click.File`` option, or a metavar naming a file) are not offered.

>>> body_to_argv("solve", {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100", "top_k": 3, "fix": ["tp=2"]}).argv
['--model', 'llama-3.1-8b', '--gpus', '8', '--gpu', 'h100', '--top-k', '3', '--fix', 'tp=2', '--format', 'json']
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import click

from megasolve.models.errors import MegasolveError, UnknownNameError, closest_names

COMMANDS = ("solve", "estimate", "whatif")
# Text fields that stand in for a file path option: body field -> the CLI option it feeds.
TEXT_FIELDS = {"model_text": "--model", "cluster_text": "--cluster", "profile_text": "--profile",
               "precision_recipe_text": "--te-precision-config"}
TEXT_HELP = {"model_text": "A Hugging Face config.json or a YAML/JSON of Megatron argument names, as text (instead "
                           "of model).",
             "cluster_text": "A cluster YAML, as text (instead of the gpus/gpu fields).",
             "profile_text": "A calibration profile YAML written by `megasolve calibrate --out`, as text.",
             "precision_recipe_text": "A per-module precision recipe in Megatron's format (--te-precision-config-file: "
                                      "configs and glob matchers), as text."}
# A metavar that names a file: such an option takes a path on the server's disk, which a client may not
# name (new path options are refused even when they are plain strings, e.g. --profile PROFILE.yaml).
PATH_METAVAR = re.compile(r"FILE|PATH|DIR|\.(ya?ml|json|csv|png|svg|md|html|log)\b", re.IGNORECASE)
MAX_TEXT_BYTES = 256 * 1024  # a config.json is a few kB; DeepSeek-V3's is 1.7 kB
# whatif runs its points in parallel processes; on a shared server each sweep gets this many at most
DEFAULT_SWEEP_JOBS = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandRequest:
    """One command to run: its argv (without the command name) and the texts to write to files."""

    command: str
    argv: list[str]
    files: dict[str, str] = field(default_factory=dict)  # "model_text" / "cluster_text" -> text
    fmt: str = "json"


def command(name: str) -> click.Command:
    """The click command ``name`` itself (its module, not the group, so nothing here imports cli.main)."""
    if name == "solve":
        from megasolve.cli.solve_cmd import solve_command as found
    elif name == "estimate":
        from megasolve.cli.commands import estimate_command as found
    elif name == "whatif":
        from megasolve.cli.whatif_cmd import whatif_command as found
    else:
        raise KeyError(name)
    return found


def body_field(option: click.Option) -> str:
    """``--top-k`` -> ``top_k``: the option's first long name, dashes as underscores."""
    long = [o for o in option.opts if o.startswith("--")]
    return long[0][2:].replace("-", "_")


def _offered(option: click.Option) -> bool:
    """Options a web client may set: not help/version, not file paths (the server reads no paths;
    ``model`` stays, for preset names only, see ``check_model_name``)."""
    if not isinstance(option, click.Option) or option.hidden or option.name in ("help", "version"):
        return False
    if "--model" in option.opts:
        return True
    if isinstance(option.type, (click.Path, click.File)) or any(f in option.opts for f in TEXT_FIELDS.values()):
        return False
    return not PATH_METAVAR.search(option.metavar or "")


def offered_options(name: str) -> dict[str, click.Option]:
    """Body field -> click option for the command ``name`` (``model`` included: presets only)."""
    return {body_field(o): o for o in command(name).params if _offered(o)}


def body_to_argv(name: str, body: Any, *, max_sweep_jobs: int = DEFAULT_SWEEP_JOBS,
                 max_seconds: float | None = None) -> CommandRequest:
    """Check a request body and turn it into ``megasolve NAME`` arguments (``--format json`` unless
    the body asks for another format). Every rejection is a one-line ``MegasolveError`` naming the
    body field. ``max_sweep_jobs``: the most processes a what-if may ask for; ``max_seconds``: the
    server stops a command after this long, so a longer ``time_limit`` is refused (a search that
    reaches its own limit returns its best layouts; a killed one returns nothing)."""
    if name not in COMMANDS:
        raise MegasolveError(field="command", value=name, rule="not a command the server runs",
                             fix=f"use one of {', '.join(COMMANDS)}")
    if not isinstance(body, dict):
        raise MegasolveError(field="body", value=type(body).__name__, rule="must be a JSON object of options",
                             fix='send e.g. {"model": "llama-3.1-8b", "gpus": 8, "gpu": "h100"}')
    options = offered_options(name)
    body = dict(body)
    files: dict[str, str] = {}
    for text_field, flag in TEXT_FIELDS.items():
        if text_field not in body or body[text_field] is None:
            body.pop(text_field, None)
            continue
        if not any(flag in o.opts for o in command(name).params):
            continue  # reported below as an unknown field
        files[text_field] = _text(text_field, body.pop(text_field))
    if "model_text" in files and body.get("model") not in (None, ""):
        raise MegasolveError(field="model", value=body["model"], rule="both model and model_text are given",
                             fix="send one: a preset name as model, or a model file's text as model_text")
    if "model_text" in files:
        body.pop("model", None)  # an empty model field next to an upload
    if name == "whatif":
        body.setdefault("jobs", max_sweep_jobs)
        jobs = _number(body["jobs"])
        if jobs is not None and jobs > max_sweep_jobs:
            raise MegasolveError(field="jobs", value=body["jobs"],
                                 rule=f"this server runs a sweep on at most {max_sweep_jobs} process(es)",
                                 fix=f"send jobs <= {max_sweep_jobs}, or run `megasolve whatif` locally")
    limit = _number(body.get("time_limit"))
    if max_seconds is not None and limit is not None and limit > max_seconds:
        raise MegasolveError(field="time_limit", value=body["time_limit"],
                             rule=f"longer than this server's limit of {max_seconds:g} s per command",
                             fix=f"send time_limit <= {max_seconds:g} (the best layouts found by then come back)")
    fmt = body.pop("format", "json")
    if "format" not in options or not isinstance(fmt, str):
        raise MegasolveError(field="format", value=fmt, rule="must be a string format name", fix="send json")
    unknown = [k for k in body if k not in options]
    if unknown:
        hint = closest_names(unknown[0], [*options, *TEXT_FIELDS])
        raise MegasolveError(field=unknown[0], value=_short(body[unknown[0]]),
                             rule=f"not an option of {name}",
                             fix=(f"did you mean {', '.join(hint)}? " if hint else "")
                             + f"see /api/openapi.json for the {name} fields")
    if "model" in body:
        check_model_name(body["model"])
    argv: list[str] = []
    for key, value in body.items():
        argv += _option_args(key, options[key], value)
    for text_field in files:
        argv += [TEXT_FIELDS[text_field], "@" + text_field]  # the worker writes the text to a file there
    argv += ["--format", fmt]
    return CommandRequest(command=name, argv=argv, files=files, fmt=fmt)


def _number(value: Any) -> float | None:
    """A body value as a number, whether sent as 60 or "60" (click parses both); None if it is neither
    (click then reports the bad value)."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise MegasolveError(field=name, value=type(value).__name__, rule="must be the file's text (a string)",
                             fix="send the config.json or YAML contents as a JSON string")
    if len(value.encode("utf-8")) > MAX_TEXT_BYTES:
        raise MegasolveError(field=name, value=f"{len(value.encode('utf-8')):,} bytes",
                             rule=f"larger than {MAX_TEXT_BYTES // 1024} KiB",
                             fix="send the model's config.json (a few kB), not weights or a whole checkpoint")
    if not value.strip():
        raise MegasolveError(field=name, value="''", rule="is empty", fix="paste or upload the file's text")
    return value


def check_model_name(ref: Any) -> None:
    """``model`` on the server names a preset, an alias or a preset's Hugging Face id, never a path:
    the server reads no files for a client (send the file's text as ``model_text``)."""
    from megasolve.models.presets import _catalog

    if not isinstance(ref, str):
        raise MegasolveError(field="model", value=_short(ref), rule="must be a preset name (a string)",
                             fix="e.g. llama-3.1-8b (see /api/models)")
    catalog = _catalog()
    key = ref.strip().lower()
    names = {*catalog["presets"], *catalog["aliases"],
             *(e["hf_id"].lower() for e in catalog["presets"].values() if e.get("hf_id"))}
    if key not in names:
        hint = closest_names(key, [*catalog["presets"], *catalog["aliases"]]) if key else []
        raise UnknownNameError(field="model", value=ref or "''",
                               rule="not a preset, an alias or a preset's HF id (the server reads no paths)",
                               fix=(f"did you mean {', '.join(hint)}? " if hint else "see /api/models; ")
                               + "or send a config.json / Megatron YAML as model_text")


def _option_args(key: str, option: click.Option, value: Any) -> list[str]:
    """The argv words for one body field; ``None`` means "not given" (the CLI default)."""
    if value is None:
        return []
    flag = [o for o in option.opts if o.startswith("--")][0]
    if option.is_flag or option.is_bool_flag:
        if not isinstance(value, bool):
            raise MegasolveError(field=key, value=_short(value), rule="must be true or false", fix=f'"{key}": true')
        if value:
            return [flag]
        if option.secondary_opts:
            return [option.secondary_opts[0]]
        return []
    if option.multiple:
        values = value if isinstance(value, list) else [value]
        return [word for item in values for word in (flag, _scalar(key, item))]
    return [flag, _scalar(key, value)]


def _scalar(key: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise MegasolveError(field=key, value=_short(value), rule="must be a string or a number",
                             fix=f"see /api/openapi.json for the type of {key}")
    if isinstance(value, float) and not math.isfinite(value):
        raise MegasolveError(field=key, value=value, rule="must be finite", fix="send a number")
    return repr(value) if isinstance(value, float) else str(value)


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------------------- OpenAPI
def _schema(option: click.Option) -> dict[str, Any]:
    """JSON schema of one option, from its click type."""
    kind = option.type
    if option.is_flag or option.is_bool_flag:
        schema: dict[str, Any] = {"type": "boolean"}
    elif isinstance(kind, click.Choice):
        schema = {"type": "string", "enum": list(kind.choices)}
    elif isinstance(kind, (click.IntRange, click.FloatRange)) or kind in (click.INT, click.FLOAT):
        schema = {"type": "integer" if isinstance(kind, click.IntRange) or kind is click.INT else "number"}
        if getattr(kind, "min", None) is not None:
            schema["minimum"] = kind.min
        if getattr(kind, "max", None) is not None:
            schema["maximum"] = kind.max
    else:
        schema = {"type": "string"}
    if option.multiple:
        schema = {"type": "array", "items": schema}
    default = option.default  # click >= 8.2 marks "no default" with a sentinel object
    if option.is_flag and not option.secondary_opts:
        # the field says whether to pass the flag (--no-dp-comm-overlap: true passes it), so false is its
        # default whatever value the flag stores
        schema["default"] = False
    elif isinstance(default, (str, int, float, bool)):
        schema["default"] = default
    if option.help:
        schema["description"] = " ".join(option.help.split())
    return schema


def request_schema(name: str) -> dict[str, Any]:
    """The JSON schema of a ``POST /api/NAME`` body."""
    properties = {key: _schema(o) for key, o in offered_options(name).items()}
    properties["model"] = {**properties.get("model", {}), "type": "string",
                           "description": "A preset name, alias or preset's Hugging Face id (see /api/models)."}
    for text_field, flag in TEXT_FIELDS.items():
        if any(flag in o.opts for o in command(name).params):
            properties[text_field] = {"type": "string", "maxLength": MAX_TEXT_BYTES,
                                      "description": TEXT_HELP[text_field]}
    properties["format"] = {**properties["format"], "default": "json",
                            "description": "json (the default here): the command's JSON document; any other of "
                                           "the command's formats comes back as its text."}
    if name == "whatif":
        properties["jobs"]["default"] = DEFAULT_SWEEP_JOBS
    return {"type": "object", "properties": properties, "additionalProperties": False}


def openapi(version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 description of the server's HTTP API."""
    error = {"type": "object", "properties": {"error": {"type": "string"}, "field": {"type": ["string", "null"]}},
             "required": ["error"]}
    paths: dict[str, Any] = {}
    for name in COMMANDS:
        paths[f"/api/{name}"] = {"post": {
            "summary": command(name).get_short_help_str(limit=200),
            "description": f"Runs `megasolve {name}` with these options and returns exactly its `--format json` "
                           "output (another `format` returns the command's text). Header X-Megasolve-Exit-Code "
                           "holds the CLI's exit code (1: nothing fits / does not fit); X-Megasolve-Notes its notes.",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{name}"}}}},
            "responses": {
                "200": {"description": f"The `megasolve {name} --format json` document (or text)."},
                "400": {"description": "Bad input: the CLI's one-line error and the field it names.",
                        "content": {"application/json": {"schema": error}}},
                "503": {"description": "The job queue is full; retry later."},
                "504": {"description": "The command ran past the server's time limit."}}}}
    paths["/api/jobs"] = {"post": {
        "summary": "Queue a command; poll GET /api/jobs/{id} for queue position, progress and the result; "
                   "DELETE it to cancel.",
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "properties": {"command": {"type": "string", "enum": list(COMMANDS)},
                                             "options": {"type": "object"},
                                             "formats": {"type": "array", "items": {"type": "string"}}},
            "required": ["command", "options"]}}}},
        "responses": {"202": {"description": "Queued."}, "400": {"description": "Bad input."},
                      "503": {"description": "The queue is full."}}}}
    paths["/api/jobs/{id}"] = {"get": {"summary": "A job's state, progress and result."},
                               "delete": {"summary": "Cancel a queued or running job."}}
    paths["/api/models"] = {"get": {"summary": "`megasolve models --format json`."}}
    paths["/api/gpus"] = {"get": {"summary": "`megasolve gpus --format json`."}}
    return {"openapi": "3.1.0",
            "info": {"title": "megasolve", "version": version,
                     "description": "Plan Megatron-LM / Megatron-Core parallel layouts over HTTP: the same JSON "
                                    "as the megasolve CLI."},
            "paths": paths,
            "components": {"schemas": {name: request_schema(name) for name in COMMANDS}}}
