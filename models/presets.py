"""Built-in presets (``presets.yaml``, shipped in the package) and the ``--model`` resolver.

``--model`` accepts a preset name, a preset's Hugging Face id, a path to a ``config.json`` (or a
directory holding one), or a YAML/JSON file of Megatron argument names.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from megasolve.models.errors import ConfigError, UnknownNameError, closest_names
from megasolve.models.shipped_yaml import load_shipped_yaml
from megasolve.models.hf import spec_from_hf_config
from megasolve.models.megatron_args import MAX_LAYERS, spec_from_megatron_args
from megasolve.models.spec import ModelSpec

MAX_FILE_BYTES = 16 * 1024 * 1024


@functools.cache
def _catalog() -> dict[str, Any]:
    text = resources.files("megasolve.models").joinpath("presets.yaml").read_text(encoding="utf-8")
    return load_shipped_yaml(text)


def preset_names() -> list[str]:
    return list(_catalog()["presets"])


def alias_names() -> list[str]:
    return list(_catalog()["aliases"])


def alias_targets() -> dict[str, str]:
    """Each alias and the preset it resolves to."""
    return {name: entry["resolves_to"] for name, entry in _catalog()["aliases"].items()}


def preset_info(name: str) -> dict[str, Any]:
    return _catalog()["presets"][name]


@functools.cache
def load_preset(name: str) -> ModelSpec:
    """The ``ModelSpec`` of a built-in preset (exact name; see ``resolve_model`` for aliases)."""
    entry = _catalog()["presets"][name]
    return spec_from_hf_config(entry["hf"], name=name, source=entry["source"])


@dataclass(frozen=True, slots=True)
class ResolvedModel:
    spec: ModelSpec
    note: str | None = None  # printed to the user (e.g. what an alias resolved to)


def _read_file(path: Path) -> Any:
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ConfigError(field="--model", value=str(path), rule="file is larger than 16 MiB",
                          fix="pass the model's config.json")
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as exc:
        raise ConfigError(field="--model", value=str(path), rule=f"cannot be read ({exc.__class__.__name__})",
                          fix="pass a UTF-8 JSON or YAML file") from None
    if not text.strip():
        raise ConfigError(field="--model", value=str(path), rule="file is empty",
                          fix="pass a config.json or a Megatron model YAML")
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        where = f"line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else "syntax"
        raise ConfigError(field="--model", value=str(path), rule=f"is not valid {path.suffix or 'YAML'} ({where})",
                          fix="check the file's syntax") from None
    except RecursionError:  # thousands of nested [ or {: no model file is that deep
        raise ConfigError(field="--model", value=str(path), rule="is nested too deeply to be a model file",
                          fix="pass a config.json or a flat Megatron model YAML") from None


def spec_from_file(path: Path) -> ModelSpec:
    """A ``config.json`` (HF: has ``model_type``) or a Megatron-argument file (has ``num_layers``)."""
    if path.is_dir():
        candidate = path / "config.json"
        if not candidate.is_file():
            raise ConfigError(field="--model", value=str(path), rule="directory holds no config.json",
                              fix="point --model at the checkpoint folder that has config.json")
        path = candidate
    data = _read_file(path)
    if not isinstance(data, dict):
        raise ConfigError(field="--model", value=str(path), rule="must hold a mapping (JSON object)",
                          fix="pass a config.json or a Megatron model YAML")
    name = path.parent.name if path.name == "config.json" else path.stem
    if "model_type" in data:
        return _check_scale(spec_from_hf_config(data, name=name or "hf-model", source=str(path.name)))
    if "num_layers" in data or "num-layers" in data or "--num-layers" in data:
        return _check_scale(spec_from_megatron_args(data, name=name, source=str(path.name)))
    raise ConfigError(field="--model", value=str(path),
                      rule="has neither model_type (Hugging Face) nor num_layers (Megatron arguments)",
                      fix="add model_type to a config.json, or num_layers to a Megatron model file")


def _check_scale(spec: ModelSpec) -> ModelSpec:
    for field, value in (("num_layers", spec.num_layers), ("mtp_num_layers", spec.mtp_num_layers)):
        if value > MAX_LAYERS:
            raise ConfigError(field=field, value=value, rule=f"more than {MAX_LAYERS:,} layers",
                              fix="check the file: the deepest trained models have about 200 layers")
    return spec


def _compact(name: str) -> str:
    """A model name without separators, to match spellings that differ only in them.

    >>> _compact("llama3.1-405b") == _compact("Llama-3.1-405B") == _compact("llama_3.1_405b")
    True
    """
    return re.sub(r"[-_\s]", "", name.lower())


def resolve_model(ref: str) -> ResolvedModel:
    """Resolve ``--model``: preset, alias, HF id of a preset, or a file/directory path."""
    catalog = _catalog()
    key = ref.strip().lower()
    if not key:  # Path("") is the working directory: never read it by accident
        raise UnknownNameError(field="--model", value=repr(ref), rule="is empty",
                               fix="pass a preset name (see `megasolve models`) or a config.json path")
    if key in catalog["presets"]:
        return ResolvedModel(load_preset(key))
    if key in catalog["aliases"]:
        alias = catalog["aliases"][key]
        return ResolvedModel(load_preset(alias["resolves_to"]), note=alias["note"])
    for name, entry in catalog["presets"].items():
        if entry.get("hf_id") and entry["hf_id"].lower() == key:
            return ResolvedModel(load_preset(name))
    path = Path(ref).expanduser()
    if path.exists():
        return ResolvedModel(spec_from_file(path))
    # the same name spelled without (or with other) separators: llama3.1-405b, qwen3_30b_a3b, Llama-3.1-8B
    same = sorted({name for name in preset_names() + alias_names() if _compact(name) == _compact(key)})
    if len(same) == 1:
        resolved = resolve_model(same[0])
        note = f"--model {ref} read as {same[0]}"
        return ResolvedModel(resolved.spec, note=f"{note}; {resolved.note}" if resolved.note else note)
    hint = closest_names(key, preset_names() + alias_names())
    fix = f"did you mean {', '.join(hint)}?" if hint else "run `megasolve models` for the list"
    raise UnknownNameError(field="--model", value=ref,
                           rule="not a preset, an alias, a preset's HF id, or an existing file",
                           fix=fix + " (downloads are never attempted: pass a local config.json)")
