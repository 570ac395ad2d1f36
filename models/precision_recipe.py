"""A per-module precision recipe (Megatron-LM ``--te-precision-config-file``, Megatron-Bridge ``model.quant_recipe``)
as ``Workload.module_precision``: the enabled glob matchers in order, each with the format its config gives.

The file (``megatron/core/quantization/quant_config.py`` ``RecipeConfig.from_config_dict`` @d98e8a6; example:
``extensions/TransformerEngineMixedPrecision.md``, Megatron-Bridge ``perf_recipes/nemotronh/te_quant.cfg``)::

    configs:
      bf16: {transformer_engine_config_type: TEQuantizationParams, training_recipe: {}}
      mxfp8: {transformer_engine_config_type: TEQuantizationParams,
              training_recipe: {fp8_quantization_recipe: mxfp8}}
    matchers:
      attn_qkv_bf16: {config: bf16, type: glob, pattern: "*.linear_qkv", enabled: true}
      mamba_outproj_mxfp8: {config: mxfp8, type: glob, pattern: "*mixer.out_proj", enabled: true}

A config's ``training_recipe`` (``TEQuantizationRecipe``, ``extensions/transformer_engine.py`` L132-200) is bf16
when it names no recipe, else its ``fp8_quantization_recipe`` (tensorwise, blockwise, mxfp8; delayed scaling is
refused there) or ``fp4_quantization_recipe`` (nvfp4). What the cost model does not model is refused with the
reason: kitchen configs, custom recipes, ``override_nonquantized_autocast`` (quantizing modules the run keeps in
bf16), and matcher types other than glob (Megatron implements only glob).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from megasolve.models.errors import MegasolveError

FIELD = "--te-precision-config"
_FP8 = ("tensorwise", "blockwise", "mxfp8")


def _error(value: Any, rule: str, fix: str) -> MegasolveError:
    return MegasolveError(field=FIELD, value=value, rule=rule, fix=fix)


def config_format(name: str, config: Any) -> str:
    """The format one ``configs`` entry runs its modules in: ``bf16``, an FP8 recipe or ``nvfp4``.

    >>> config_format("mxfp8", {"transformer_engine_config_type": "TEQuantizationParams",
    ...                         "training_recipe": {"fp8_quantization_recipe": "mxfp8"}})
    'mxfp8'
    >>> config_format("bf16", {"transformer_engine_config_type": "TEQuantizationParams", "training_recipe": {}})
    'bf16'
    """
    if not isinstance(config, dict):
        raise _error(f"configs.{name}", "a config is a mapping", "e.g. {transformer_engine_config_type: "
                     "TEQuantizationParams, training_recipe: {}}")
    kind = config.get("transformer_engine_config_type")
    if kind != "TEQuantizationParams":
        raise _error(f"configs.{name}: {kind or config.get('kitchen_config_type')}",
                     "only Transformer Engine configs (TEQuantizationParams) are modelled; kitchen recipes are not",
                     "use a TEQuantizationParams config")
    recipe = config.get("training_recipe") or {}
    if not isinstance(recipe, dict):
        raise _error(f"configs.{name}.training_recipe", "is a mapping", "e.g. {fp8_quantization_recipe: mxfp8}")
    if recipe.get("override_nonquantized_autocast"):
        raise _error(f"configs.{name}.training_recipe.override_nonquantized_autocast",
                     "quantizing modules the run keeps in bf16 is not modelled",
                     "drop override_nonquantized_autocast")
    fp8, fp4 = recipe.get("fp8_quantization_recipe"), recipe.get("fp4_quantization_recipe")
    if fp8 is not None and fp4 is not None:
        raise _error(f"configs.{name}", "fp8 and fp4 quantization settings are mutually exclusive "
                     "(transformer_engine.py L193-196)", "keep one of them")
    if fp8 is not None:
        if fp8 not in _FP8:
            raise _error(f"configs.{name}.training_recipe.fp8_quantization_recipe: {fp8}",
                         "one of tensorwise, blockwise, mxfp8 (delayed scaling is not in scope of a per-module "
                         "config, transformer_engine.py L190-191; custom recipes are not modelled)",
                         "use tensorwise, blockwise or mxfp8")
        return str(fp8)
    if fp4 is not None:
        if fp4 != "nvfp4":
            raise _error(f"configs.{name}.training_recipe.fp4_quantization_recipe: {fp4}",
                         "only nvfp4 is modelled (custom recipes are not)", "use nvfp4")
        return "nvfp4"
    return "bf16"


def parse_precision_recipe(recipe: Any) -> tuple[tuple[str, str], ...]:
    """``Workload.module_precision`` from a recipe's mapping: the enabled matchers in file order.

    >>> parse_precision_recipe({"configs": {"bf16": {"transformer_engine_config_type": "TEQuantizationParams",
    ...                                              "training_recipe": {}}},
    ...                         "matchers": {"qkv": {"config": "bf16", "type": "glob", "pattern": "*.linear_qkv",
    ...                                              "enabled": True},
    ...                                      "off": {"config": "bf16", "type": "glob", "pattern": "*"}}})
    (('*.linear_qkv', 'bf16'),)
    """
    if not isinstance(recipe, dict) or not isinstance(recipe.get("matchers") or {}, dict):
        raise _error(type(recipe).__name__, "a recipe is a mapping with 'configs' and 'matchers'",
                     "see Megatron-LM megatron/core/extensions/TransformerEngineMixedPrecision.md")
    configs = recipe.get("configs") or {}
    out = []
    for name, matcher in (recipe.get("matchers") or {}).items():
        if not isinstance(matcher, dict):
            raise _error(f"matchers.{name}", "a matcher is a mapping", "e.g. {config: bf16, type: glob, "
                         "pattern: '*.linear_qkv', enabled: true}")
        if not matcher.get("enabled", False):  # RecipeConfig._build_matchers skips disabled ones
            continue
        if matcher.get("type") != "glob":
            raise _error(f"matchers.{name}.type: {matcher.get('type')}", "Megatron implements only glob matchers "
                         "(quant_config.py _build_matchers)", "use type: glob")
        pattern, config = matcher.get("pattern"), matcher.get("config")
        if not isinstance(pattern, str) or config not in configs:
            raise _error(f"matchers.{name}", "needs a pattern and a config named under configs",
                         f"configs defined: {', '.join(map(str, configs)) or 'none'}")
        out.append((pattern, config_format(str(config), configs[config])))
    return tuple(out)


def load_precision_recipe(path: str | Path) -> tuple[tuple[str, str], ...]:
    """``parse_precision_recipe`` of a YAML file."""
    import yaml

    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise _error(str(path), f"cannot be read ({exc.strerror or exc})", "give the recipe's YAML file") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _error(str(path), f"is not valid YAML ({str(exc).splitlines()[0]})", "fix the file") from None
    return parse_precision_recipe(data)


def recipe_text(module_precision: tuple[tuple[str, str], ...], *, one_line: bool = False) -> str:
    """The recipe as a file Megatron loads (one config per format, the matchers in order): what the launch exports
    point ``--te-precision-config-file`` at; ``one_line``: the same YAML as one flow mapping.

    >>> print(recipe_text((("*.linear_qkv", "bf16"),)))
    configs:
      bf16: {transformer_engine_config_type: TEQuantizationParams, training_recipe: {}}
    matchers:
      m0_bf16: {config: bf16, type: glob, pattern: '*.linear_qkv', enabled: true}
    >>> import yaml
    >>> parse_precision_recipe(yaml.safe_load(recipe_text((("*.linear_qkv", "bf16"),), one_line=True)))
    (('*.linear_qkv', 'bf16'),)
    """
    configs = []
    for fmt in dict.fromkeys(f for _, f in module_precision):
        recipe = "{}" if fmt == "bf16" else "{fp4_quantization_recipe: nvfp4}" if fmt == "nvfp4" else \
            f"{{fp8_quantization_recipe: {fmt}}}"
        configs.append(f"{fmt}: {{transformer_engine_config_type: TEQuantizationParams, training_recipe: {recipe}}}")
    matchers = [f"m{i}_{fmt}: {{config: {fmt}, type: glob, pattern: '{pattern.replace(chr(39), chr(39) * 2)}', "
                "enabled: true}" for i, (pattern, fmt) in enumerate(module_precision)]
    if one_line:
        return f"{{configs: {{{', '.join(configs)}}}, matchers: {{{', '.join(matchers)}}}}}"
    return "\n".join(["configs:"] + ["  " + c for c in configs] + ["matchers:"] + ["  " + m for m in matchers])
