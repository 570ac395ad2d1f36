"""Parameters of the vision towers of multimodal configs (counted, not planned).

megasolve plans the language model; a VLM's vision encoder and projector are counted so that
``params_total`` matches the model card, and reported apart (``ModelSpec.vision_params``). Each count
follows the module shapes of transformers' modelling code for that family (cited per function); an
unknown vision family counts 0 and says so.
"""

from __future__ import annotations

from typing import Any

from megasolve.models.errors import ConfigError


def _int(cfg: dict[str, Any], key: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(field=f"vision_config.{key}", value=value, rule="must be a positive integer",
                          fix="pass the model's full config.json")
    return value


def _encoder_layer(hidden: int, inner: int, *, bias: bool, norm_params: int, gated: bool = False,
                   fused_qkv: bool = False) -> int:
    """A pre-norm ViT block: q, k, v, o projections, a (gated) MLP and two norms."""
    b = 1 if bias else 0
    attention = 4 * hidden * hidden + (4 * hidden) * b
    mlp = (3 if gated else 2) * hidden * inner + ((2 if gated else 1) * inner + hidden) * b
    del fused_qkv  # a fused qkv holds the same weights
    return attention + mlp + 2 * norm_params * hidden


def siglip_gemma3(vision: dict[str, Any], text_hidden: int) -> int:
    """SigLIP encoder + Gemma 3 projector (transformers ``siglip/modeling_siglip.py``
    ``SiglipVisionEmbeddings``: conv patch embedding with bias and a learned position per patch;
    ``SiglipEncoderLayer``: LayerNorms, biased q/k/v/out, fc1/fc2; ``post_layernorm``;
    ``gemma3/modeling_gemma3.py`` ``Gemma3MultiModalProjector``: ``mm_input_projection_weight``
    ``[vision_hidden, text_hidden]`` and an RMSNorm over the vision width).

    >>> siglip_gemma3({"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
    ...                "patch_size": 14, "image_size": 896}, 5376)
    423060336
    """
    h, inner = _int(vision, "hidden_size"), _int(vision, "intermediate_size")
    layers, patch = _int(vision, "num_hidden_layers"), _int(vision, "patch_size")
    image, channels = _int(vision, "image_size"), _int(vision, "num_channels", 3)
    embeddings = channels * patch * patch * h + h + (image // patch) ** 2 * h
    encoder = layers * _encoder_layer(h, inner, bias=True, norm_params=2) + 2 * h
    if vision.get("vision_use_head"):
        raise ConfigError(field="vision_config.vision_use_head", value=True,
                          rule="the SigLIP pooling head is not counted", fix="Gemma 3 configs set it to false")
    return embeddings + encoder + h * text_hidden + h


def llama4_vision(vision: dict[str, Any], text_hidden: int) -> int:
    """Llama 4 vision encoder, pixel-shuffle adapter and projector (transformers
    ``llama4/modeling_llama4.py``: ``Llama4UnfoldConvolution`` a bias-free linear over
    ``channels*patch^2``, ``class_embedding``, ``positional_embedding_vlm`` of ``patches + 1`` rows,
    ``layernorm_pre`` / ``layernorm_post``; ``Llama4VisionEncoderLayer`` biased attention and MLP with
    two LayerNorms; ``Llama4VisionMLP2`` fc1 ``intermediate -> projector_input_dim`` and fc2
    ``projector_output_dim^2``, both bias-free; ``Llama4MultiModalProjector`` a bias-free
    ``vision_output_dim -> text hidden`` linear).
    """
    h, inner = _int(vision, "hidden_size"), _int(vision, "intermediate_size")
    layers, patch = _int(vision, "num_hidden_layers"), _int(vision, "patch_size")
    image, channels = _int(vision, "image_size"), _int(vision, "num_channels", 3)
    patches = (image // patch) ** 2
    embeddings = channels * patch * patch * h + h + (patches + 1) * h + 2 * 2 * h
    encoder = layers * _encoder_layer(h, inner, bias=True, norm_params=2)
    adapter = inner * _int(vision, "projector_input_dim") + _int(vision, "projector_output_dim") ** 2
    return embeddings + encoder + adapter + _int(vision, "vision_output_dim") * text_hidden


def qwen2_5_vl_vision(vision: dict[str, Any]) -> int:
    """Qwen2.5-VL vision tower (transformers ``qwen2_5_vl/modeling_qwen2_5_vl.py``:
    ``Qwen2_5_VisionPatchEmbed`` a bias-free Conv3d ``(temporal_patch, patch, patch)``;
    ``Qwen2_5_VLVisionBlock`` two RMSNorms, biased fused qkv and proj, biased gated MLP;
    ``Qwen2_5_VLPatchMerger`` an RMSNorm and ``Linear(h*m^2, h*m^2) -> Linear(h*m^2, out_hidden)`` with
    biases).

    >>> qwen2_5_vl_vision({"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "patch_size": 14,
    ...                    "temporal_patch_size": 2, "out_hidden_size": 3584, "spatial_merge_size": 2})
    676550144
    """
    h, inner, depth = _int(vision, "hidden_size"), _int(vision, "intermediate_size"), _int(vision, "depth")
    patch, temporal = _int(vision, "patch_size"), _int(vision, "temporal_patch_size", 2)
    channels, merge = _int(vision, "in_chans", 3), _int(vision, "spatial_merge_size", 2)
    out = _int(vision, "out_hidden_size")
    embed = channels * temporal * patch * patch * h
    blocks = depth * _encoder_layer(h, inner, bias=True, norm_params=1, gated=True)
    merged = h * merge * merge
    merger = h + merged * merged + merged + merged * out + out
    return embed + blocks + merger


def qwen3_5_vision(vision: dict[str, Any]) -> int:
    """Qwen3.5 vision tower (transformers 5.23 ``qwen3_5_moe/modeling_qwen3_5_moe.py``, the dense family the
    same: ``Qwen3_5MoeVisionPatchEmbed`` a biased Conv3d ``(temporal_patch, patch, patch)``; ``pos_embed``
    an ``Embedding(num_position_embeddings, h)``; ``Qwen3_5MoeVisionBlock`` two LayerNorms, biased fused
    qkv and proj, a biased fc1 / fc2 MLP; ``Qwen3_5MoeVisionPatchMerger`` a LayerNorm over ``h`` and
    ``Linear(h*m^2, h*m^2) -> Linear(h*m^2, out_hidden)`` with biases; defaults of
    ``Qwen3_5MoeVisionConfig``).

    >>> qwen3_5_vision({"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "patch_size": 16,
    ...                 "temporal_patch_size": 2, "out_hidden_size": 4096, "spatial_merge_size": 2,
    ...                 "num_position_embeddings": 2304})
    456010480
    """
    h, inner, depth = _int(vision, "hidden_size", 1152), _int(vision, "intermediate_size", 4304), _int(vision, "depth", 27)
    patch, temporal = _int(vision, "patch_size", 16), _int(vision, "temporal_patch_size", 2)
    channels, merge = _int(vision, "in_channels", 3), _int(vision, "spatial_merge_size", 2)
    out, positions = _int(vision, "out_hidden_size", 3584), _int(vision, "num_position_embeddings", 2304)
    embed = channels * temporal * patch * patch * h + h + positions * h
    blocks = depth * _encoder_layer(h, inner, bias=True, norm_params=2)
    return embed + blocks + _patch_merger(h, h * merge * merge, out)


def _patch_merger(norm_width: int, merged: int, out: int) -> int:
    """A Qwen vision ``PatchMerger``: a LayerNorm over ``norm_width`` (the patch width, or the merged width after
    the shuffle), then ``Linear(merged, merged) -> Linear(merged, out)``, all biased."""
    return 2 * norm_width + merged * merged + merged + merged * out + out


def qwen3_vl_vision(vision: dict[str, Any]) -> int:
    """Qwen3-VL vision tower (transformers ``qwen3_vl/modeling_qwen3_vl.py``): the Qwen3.5 tower above (which
    inherits it and drops DeepStack) plus one ``Qwen3VLVisionPatchMerger(use_postshuffle_norm=True)`` per
    ``deepstack_visual_indexes`` entry (default ``[8, 16, 24]``): a LayerNorm over ``h*m^2`` and the same two
    biased linears.

    >>> m2 = 1152 * 2 * 2  # the merged width h * m^2; three mergers of 2 m2 (norm) + m2^2 + m2 + m2 * 2048 + 2048
    >>> deepstack = qwen3_vl_vision({"out_hidden_size": 2048}) - qwen3_5_vision({"out_hidden_size": 2048})
    >>> deepstack == 3 * (2 * m2 + m2 * m2 + m2 + m2 * 2048 + 2048) == 92_060_160
    True
    """
    indexes = vision.get("deepstack_visual_indexes", [8, 16, 24])
    if not isinstance(indexes, list):
        raise ConfigError(field="vision_config.deepstack_visual_indexes", value=repr(indexes)[:40],
                          rule="must be a list of layer indexes", fix="pass the model's full config.json")
    h, merge = _int(vision, "hidden_size", 1152), _int(vision, "spatial_merge_size", 2)
    merged = h * merge * merge
    return qwen3_5_vision(vision) + len(indexes) * _patch_merger(merged, merged, _int(vision, "out_hidden_size", 3584))


def vision_params(model_type: str, vision: dict[str, Any] | None, text_hidden: int) -> tuple[int, str]:
    """(parameters, what was counted) of the vision tower of a ``model_type`` wrapper config."""
    if not isinstance(vision, dict):
        return 0, ""
    if model_type == "gemma3_text":
        return siglip_gemma3(vision, text_hidden), "SigLIP encoder + projector"
    if model_type == "llama4_text":
        return llama4_vision(vision, text_hidden), "Llama 4 vision encoder + adapter + projector"
    if model_type in ("qwen2_5_vl", "qwen2_5_vl_text"):
        return qwen2_5_vl_vision(vision), "Qwen2.5-VL vision encoder + merger"
    if model_type in ("qwen3_5_text", "qwen3_5_moe_text"):
        return qwen3_5_vision(vision), "Qwen3.5 vision encoder + merger"
    if model_type in ("qwen3_vl_text", "qwen3_vl_moe_text"):
        return qwen3_vl_vision(vision), "Qwen3-VL vision encoder + merger + DeepStack mergers"
    return 0, ""
