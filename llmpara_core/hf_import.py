"""Build a :class:`~llmpara_core.model.Model` from a Hugging Face ``config.json`` (model presets,
which wrap one, are read by :mod:`llmpara_core.model_presets`).

Every architecture's implicit facts that the config does not spell out are encoded in one
table (``_FAMILIES``): Qwen2 puts biases on q/k/v without a config field, Gemma ties its
embeddings and uses GeGLU with four norms per layer from Gemma-2 on, Gemma-3 and Qwen3 add
per-head q/k norms, gpt-oss has attention sinks and biased experts, and so on. The sources are
the Hugging Face ``transformers`` modelling files of each architecture (``modeling_<arch>.py``)
and, for BitNet b1.58, the ``modeling_bitnet.py`` shipped with ``1bitLLM/bitnet_b1_58-3B``.

Malformed input never raises anything but :class:`~llmpara_core.errors.ConfigError`, whose
message names the offending field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError, require_float, require_int, short
from .model import MLA, Activation, FFNKind, Model, MoE, NormKind, PositionKind
from .limits import MODEL_INT
from .safeio import parse_json
from .units import MAX_SIZE

__all__ = ["from_hf_config"]

_MISSING = object()


# ---- architecture table -----------------------------------------------------------------------

@dataclass(frozen=True)
class _Family:
    """What an architecture implies beyond its config fields.

    bias: "field" (``attention_bias`` on q, k, v and o_proj), "qkv" (q/k/v always biased,
    o_proj not: Qwen2), "none" (no attention bias whatever the config says), "all" (GPT-2).
    sliding: "none" (no sliding-window attention), "all" (the window applies to every layer),
    "qwen" (``use_sliding_window`` switches it on for layers >= ``max_window_layers``),
    "alternate" (even layers local, starting with layer 0), "pattern" (every
    ``sliding_window_pattern``-th layer global), "chunked" (Llama-4: chunked attention of
    ``attention_chunk_size`` on the RoPE layers, see ``_chunked``). ``layer_types``, when
    present, always wins. ``ffn_keys``: the config field(s) giving the dense FFN width.
    """
    label: str
    tie_default: bool = False
    bias: str = "field"
    norms_per_layer: int = 2
    qk_norm: bool = False
    sub_norms: bool = False
    sliding: str = "none"
    act_keys: tuple[str, ...] = ("hidden_act",)
    act_default: str = "silu"
    rope_theta_default: float = 10000.0
    moe: str | None = None
    sinks: bool = False
    ffn_keys: tuple[str, ...] = ("intermediate_size",)
    defaults: dict = field(default_factory=dict)   # HF config-class defaults we rely on


_GEMMA_ACT = ("hidden_activation",)
_FAMILIES: dict[str, _Family] = {
    "llama": _Family("Llama"),
    "mistral": _Family("Mistral", bias="none", sliding="all"),
    "mixtral": _Family("Mixtral", bias="none", sliding="all", moe="mixtral"),
    "qwen2": _Family("Qwen2", bias="qkv", sliding="qwen"),
    "qwen2_moe": _Family("Qwen2-MoE", bias="qkv", sliding="qwen", moe="qwen2_moe"),
    "qwen3": _Family("Qwen3", qk_norm=True, sliding="qwen"),
    "qwen3_moe": _Family("Qwen3-MoE", qk_norm=True, sliding="qwen", moe="qwen3_moe"),
    # GemmaConfig keeps hidden_act="gelu" for backward compatibility, but the MLP uses
    # hidden_activation, which defaults to gelu_pytorch_tanh (modeling_gemma.py).
    "gemma": _Family("Gemma", tie_default=True, act_keys=_GEMMA_ACT,
                     act_default="gelu_pytorch_tanh", defaults={"head_dim": 256}),
    "gemma2": _Family("Gemma-2", tie_default=True, norms_per_layer=4, sliding="alternate",
                      act_keys=_GEMMA_ACT, act_default="gelu_pytorch_tanh",
                      defaults={"head_dim": 256, "sliding_window": 4096}),
    # Gemma3TextConfig defaults: the official multimodal config.json files omit these fields
    # from text_config (e.g. google/gemma-3-4b-pt gives only hidden/intermediate/layers).
    "gemma3": _Family("Gemma-3", tie_default=True, norms_per_layer=4, qk_norm=True,
                      sliding="pattern", act_keys=_GEMMA_ACT, act_default="gelu_pytorch_tanh",
                      rope_theta_default=1_000_000.0,
                      defaults={"vocab_size": 262_208, "num_attention_heads": 8,
                                "num_key_value_heads": 4, "head_dim": 256,
                                "max_position_embeddings": 131_072, "sliding_window": 4096,
                                "sliding_window_pattern": 6}),
    "phi3": _Family("Phi-3", bias="none", sliding="all"),
    "gpt2": _Family("GPT-2", tie_default=True, bias="all", act_keys=("activation_function",),
                    act_default="gelu_new"),
    "deepseek": _Family("DeepSeek", bias="none", moe="deepseek"),
    "bitnet": _Family("BitNet", sub_norms=True),
    "gpt_oss": _Family("gpt-oss", sliding="alternate", moe="gpt_oss", sinks=True,
                       rope_theta_default=150_000.0, defaults={"sliding_window": 128}),
    # Llama-4 (modeling_llama4.py): every interleave_moe_layer_step-th layer is MoE (routed
    # experts of intermediate_size plus one always-active shared expert of the same width), the
    # others a dense MLP of intermediate_size_mlp; q/k get a parameter-free L2 norm (not a
    # weighted norm, so qk_norm stays off). Defaults: Llama4TextConfig's.
    "llama4": _Family("Llama-4", sliding="chunked", moe="llama4", rope_theta_default=500_000.0,
                      ffn_keys=("intermediate_size_mlp", "intermediate_size"),
                      defaults={"attention_chunk_size": 8192, "no_rope_layer_interval": 4,
                                "interleave_moe_layer_step": 1}),
    # Unknown architectures: a Llama-style decoder, MoE fields picked up if present.
    "generic": _Family("Llama-style", sliding="all", moe="auto"),
}

_ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral", "Qwen2ForCausalLM": "qwen2",
    "Qwen2MoeForCausalLM": "qwen2_moe", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3",
    "Gemma3ForConditionalGeneration": "gemma3", "Phi3ForCausalLM": "phi3",
    "GPT2LMHeadModel": "gpt2", "GPT2Model": "gpt2", "DeepseekForCausalLM": "deepseek",
    "DeepseekV2ForCausalLM": "deepseek", "DeepseekV3ForCausalLM": "deepseek",
    "BitnetForCausalLM": "bitnet", "BitNetForCausalLM": "bitnet",
    "GptOssForCausalLM": "gpt_oss", "Llama4ForConditionalGeneration": "llama4",
    "Llama4ForCausalLM": "llama4",
}
_MODEL_TYPES = {
    "llama": "llama", "mistral": "mistral", "mixtral": "mixtral", "qwen2": "qwen2",
    "qwen2_moe": "qwen2_moe", "qwen3": "qwen3", "qwen3_moe": "qwen3_moe", "gemma": "gemma",
    "gemma2": "gemma2", "gemma3": "gemma3", "gemma3_text": "gemma3", "phi3": "phi3",
    "gpt2": "gpt2", "deepseek": "deepseek", "deepseek_v2": "deepseek",
    "deepseek_v3": "deepseek", "bitnet": "bitnet", "gpt_oss": "gpt_oss", "llama4": "llama4",
    "llama4_text": "llama4",
}

_ACTIVATIONS = {
    "silu": Activation.SILU, "swish": Activation.SILU, "quick_gelu": Activation.SILU,
    "gelu": Activation.GELU, "gelu_python": Activation.GELU, "gelu_10": Activation.GELU,
    "gelu_new": Activation.GELU_TANH, "gelu_pytorch_tanh": Activation.GELU_TANH,
    "gelu_fast": Activation.GELU_TANH, "gelu_tanh": Activation.GELU_TANH,
    "relu": Activation.RELU, "relu2": Activation.RELU2, "relu_squared": Activation.RELU2,
}


# ---- typed field access -----------------------------------------------------------------------

# config.json key -> limits.MODEL_INT key, where the names differ (layer counts and periods are
# bounded like the layer count).
_LIMIT_OF = {
    "n_layer": "num_hidden_layers", "n_embd": "hidden_size", "n_head": "num_attention_heads",
    "n_inner": "intermediate_size", "n_positions": "max_position_embeddings",
    "num_local_experts": "num_experts", "n_routed_experts": "num_experts",
    "num_experts_per_tok": "experts_per_token", "moe_intermediate_size": "expert_intermediate_size",
    "shared_expert_intermediate_size": "shared_intermediate_size",
    "n_shared_experts": "num_experts", "first_k_dense_replace": "num_hidden_layers",
    "max_window_layers": "num_hidden_layers", "sliding_window_pattern": "num_hidden_layers",
    "_sliding_window_pattern": "num_hidden_layers", "decoder_sparse_step": "num_hidden_layers",
    "moe_layer_freq": "num_hidden_layers", "intermediate_size_mlp": "intermediate_size",
    "attention_chunk_size": "sliding_window", "interleave_moe_layer_step": "num_hidden_layers",
    "no_rope_layer_interval": "num_hidden_layers",
}


def _show(value: Any) -> str:
    """repr for error messages, cut to one short line."""
    return short(value)


class _Cfg:
    """Typed, validating access to a config dict; JSON null counts as absent."""

    def __init__(self, data: dict, defaults: dict):
        self.data = data
        self.defaults = defaults

    def raw(self, key: str) -> Any:
        """The field's value; the family default only when the field is absent (not null)."""
        if key in self.data:
            return self.data[key]
        return self.defaults.get(key)

    def has(self, key: str) -> bool:
        return self.raw(key) is not None

    def integer(self, *keys: str, default: Any = _MISSING, lo: int = 1, hi: int = MAX_SIZE):
        """The first present field among ``keys`` (aliases), validated (against
        ``limits.MODEL_INT`` too, before any per-layer work); else ``default``."""
        for key in keys:
            value = self.raw(key)
            if value is not None:
                limit = MODEL_INT.get(_LIMIT_OF.get(key, key))
                hi = min(hi, int(limit.hi)) if limit is not None else hi
                if isinstance(value, int) and not isinstance(value, bool) \
                        and not lo <= value <= hi:
                    raise ConfigError(f"{key} must be in [{lo}, {hi}], got {_show(value)}")
                return require_int(key, value, lo, hi)
        if default is _MISSING:
            raise ConfigError(f"config is missing the required field '{keys[0]}'")
        return default

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {_show(value)}")
        return value

    def number(self, key: str, default: float | None) -> float | None:
        value = self.raw(key)
        if value is None:
            return default
        return require_float(key, value, lo=0, lo_open=True)

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string, got {_show(value)}")
        return value

    def mapping(self, key: str) -> dict | None:
        value = self.raw(key)
        if value is not None and not isinstance(value, dict):
            raise ConfigError(f"{key} must be a JSON object or null, got {_show(value)}")
        return value

    def sequence(self, key: str) -> list | None:
        value = self.raw(key)
        if value is not None and not isinstance(value, list):
            raise ConfigError(f"{key} must be a list or null, got {_show(value)}")
        return value


# ---- public entry point -----------------------------------------------------------------------

def from_hf_config(config: dict | str | bytes, name: str | None = None,
                   fallback_name: str | None = None) -> Model:
    """Build a :class:`Model` from a Hugging Face ``config.json`` (parsed dict or JSON text).

    ``name`` overrides the display name (default: ``_name_or_path``, else ``fallback_name``,
    else the architecture).
    Unknown architectures with the standard fields are imported as Llama-style decoders and
    say so in ``Model.warnings``. Any malformed input raises :class:`ConfigError`.
    """
    data = _parse(config)
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise ConfigError(f"name must be a non-empty string, got {_show(name)}")
    try:
        return _convert(data, name, fallback_name)
    except ConfigError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError,
            ZeroDivisionError, RecursionError) as exc:
        raise ConfigError(f"could not import config: {type(exc).__name__}: {exc}") from exc


def _parse(config) -> dict:
    if isinstance(config, (bytes, bytearray)):
        try:
            config = bytes(config).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config is not UTF-8 text: {exc}") from exc
    if isinstance(config, str):
        config = parse_json(config, "config")     # size, nesting, then json.loads
    if not isinstance(config, dict):
        raise ConfigError(f"config must be a JSON object, got {type(config).__name__}")
    return config


def _architecture(data: dict) -> str:
    archs = data.get("architectures")
    if archs is None:
        return ""
    if (not isinstance(archs, list) or not all(isinstance(a, str) for a in archs)):
        raise ConfigError(f"architectures must be a list of strings, got {_show(archs)}")
    return archs[0] if archs else ""


def _family(arch: str, model_type: str | None, warnings: list[str]) -> str:
    if arch in _ARCHITECTURES:
        return _ARCHITECTURES[arch]
    if model_type in _MODEL_TYPES:
        if arch:
            warnings.append(f"architecture '{arch}' not recognised: imported by its model_type "
                            f"'{model_type}'")
        return _MODEL_TYPES[model_type]
    what = f"unknown architecture '{arch}'" if arch else (
        f"unknown model_type '{model_type}'" if model_type else "config names no architecture")
    warnings.append(f"{what}: imported as a Llama-style decoder; check the numbers")
    return "generic"


def _convert(data: dict, name: str | None, fallback_name: str | None = None) -> Model:
    warnings: list[str] = []
    arch = _architecture(data)
    model_type = data.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError(f"model_type must be a string, got {_show(model_type)}")
    text = data.get("text_config")
    if text is not None:
        if not isinstance(text, dict):
            raise ConfigError(f"text_config must be a JSON object, got {_show(text)}")
        # Multimodal wrapper (Gemma3ForConditionalGeneration): the decoder is text_config;
        # top-level fields (tie_word_embeddings, ...) apply unless text_config overrides them.
        if any(k in data for k in ("vision_config", "audio_config")):
            warnings.append("multimodal config: only the text decoder (text_config) is "
                            "modelled; the vision/audio encoder is not counted")
        merged = {k: v for k, v in data.items() if not k.endswith("_config")}
        merged.update({k: v for k, v in text.items() if k != "model_type"})
        data = merged
    fam_key = _family(arch, model_type, warnings)
    fam = _FAMILIES[fam_key]
    cfg = _Cfg(data, fam.defaults)
    label = arch or model_type or ""
    model_name = name or _default_name(cfg, fallback_name or label or fam.label)
    if fam_key == "gpt2":
        return _gpt2(cfg, model_name, label or "GPT2LMHeadModel", warnings)
    return _decoder(cfg, fam_key, fam, model_name, label, warnings)


def _default_name(cfg: _Cfg, fallback: str) -> str:
    path = cfg.data.get("_name_or_path")
    if isinstance(path, str) and path.strip():
        path = path.strip().rstrip("/\\")
        # a local checkpoint directory says nothing useful beyond its last component
        if path.startswith(("/", ".", "~")) or "\\" in path or path.count("/") > 1:
            path = path.replace("\\", "/").rsplit("/", 1)[-1]
        if path:
            return path
    return fallback


# ---- builders ---------------------------------------------------------------------------------

def _activation(cfg: _Cfg, fam: _Family, warnings: list[str]) -> Activation:
    act = None
    for key in fam.act_keys:
        act = cfg.text(key)
        if act is not None:
            break
    act = act or fam.act_default
    if act.lower() in _ACTIVATIONS:
        return _ACTIVATIONS[act.lower()]
    warnings.append(f"unknown activation '{act}': costed as SiLU")
    return Activation.SILU


def _rope(cfg: _Cfg, fam: _Family) -> tuple[float | None, float]:
    """(rope_theta, scaling factor). transformers v5 moved both into ``rope_parameters``
    (per layer type for Gemma-3); the global-attention entry is used then."""
    theta = cfg.number("rope_theta", None)
    scaling, where = cfg.mapping("rope_scaling"), "rope_scaling"
    params = cfg.mapping("rope_parameters")
    if params is not None:
        if isinstance(params.get("full_attention"), dict):
            params = params["full_attention"]
        if theta is None and params.get("rope_theta") is not None:
            theta = require_float("rope_parameters.rope_theta", params["rope_theta"], lo=0,
                                  lo_open=True)
        if scaling is None:
            scaling, where = params, "rope_parameters"
    factor = 1.0
    if scaling is not None and scaling.get("factor") is not None:
        kind = scaling.get("rope_type", scaling.get("type"))
        if kind != "default":
            factor = require_float(f"{where}.factor", scaling["factor"], lo=0, lo_open=True)
    return (theta if theta is not None else fam.rope_theta_default), factor


def _sliding(cfg: _Cfg, fam: _Family, layers: int, warnings: list[str]):
    """(sliding_window, sliding_layers) following the family's rule; see ``_Family``."""
    if fam.sliding == "none":
        return None, None
    if fam.sliding == "chunked":
        return _chunked(cfg, layers)
    if fam.sliding == "qwen" and not cfg.flag("use_sliding_window", False):
        return None, None
    window = cfg.integer("sliding_window", default=None)
    if window is None:
        return None, None
    types = cfg.sequence("layer_types")
    if types is not None:
        if len(types) != layers:
            raise ConfigError(f"layer_types has {len(types)} entries for {layers} layers "
                              f"(num_hidden_layers)")
        flags = []
        for t in types:
            if not isinstance(t, str):
                raise ConfigError(f"layer_types entries must be strings, got {_show(t)}")
            flags.append(t == "sliding_attention")
        unknown = sorted({t for t in types if t not in ("sliding_attention", "full_attention")})
        if unknown:
            warnings.append(f"layer_types {unknown} not modelled: treated as full attention")
    elif fam.sliding == "qwen":
        first = cfg.integer("max_window_layers", default=28, lo=0)
        flags = [i >= first for i in range(layers)]
    elif fam.sliding == "alternate":
        flags = [i % 2 == 0 for i in range(layers)]
    elif fam.sliding == "pattern":
        period = cfg.integer("sliding_window_pattern", "_sliding_window_pattern", default=6)
        flags = [(i + 1) % period != 0 for i in range(layers)]
    else:
        return window, None
    if not any(flags):
        return None, None
    return window, (None if all(flags) else tuple(flags))


def _layer_flags(cfg: _Cfg, key: str, layers: int) -> list[bool] | None:
    """A per-layer 0/1 (or true/false) list ``key`` as booleans; None when absent."""
    values = cfg.sequence(key)
    if values is None:
        return None
    if len(values) != layers:
        raise ConfigError(f"{key} has {len(values)} entries for {layers} layers "
                          f"(num_hidden_layers)")
    if not all(v in (0, 1) and not isinstance(v, float) for v in values):
        raise ConfigError(f"{key} entries must be 0 or 1, got {_show(values)}")
    return [bool(v) for v in values]


def _chunked(cfg: _Cfg, layers: int):
    """Llama-4 chunked attention as (window, per-layer flags). A chunked layer attends within
    fixed, non-overlapping blocks of ``attention_chunk_size`` tokens (configuration_llama4.py:
    layer_types "chunked_attention" on the RoPE layers, ``no_rope_layers`` entry 1; every
    ``no_rope_layer_interval``-th layer is global NoPE). The nearest feature modelled here is a
    sliding window of the same size: identical below one chunk of context; beyond it the window
    keeps and reads up to ``chunk`` tokens where a chunk reads between 0 and ``chunk`` (the
    model presets say so in their notes; no import warning, as this is the documented rule)."""
    window = cfg.integer("attention_chunk_size", default=None)
    if window is None:
        return None, None
    types = cfg.sequence("layer_types")
    if types is not None:
        if len(types) != layers or not all(isinstance(t, str) for t in types):
            raise ConfigError(f"layer_types must list one string per layer ({layers}), got "
                              f"{_show(types)}")
        flags = [t == "chunked_attention" for t in types]
    else:
        flags = _layer_flags(cfg, "no_rope_layers", layers)
        if not flags:     # null or [] -> derived from the interval (Llama4TextConfig)
            period = cfg.integer("no_rope_layer_interval")
            flags = [(i + 1) % period != 0 for i in range(layers)]
    if not any(flags):
        return None, None
    return window, (None if all(flags) else tuple(flags))


def _dense_layers(flags_moe: list[bool], why: str, warnings: list[str]) -> int:
    """Number of dense layers; ``Model`` places them first. Totals stay exact either way."""
    dense = flags_moe.count(False)
    if any(flags_moe[:dense]):
        idx = [i for i, m in enumerate(flags_moe) if not m]
        warnings.append(f"{why} make layers {idx} dense: modelled as the first {dense} layers "
                        f"(parameter totals are exact, per-layer order is not)")
    return dense


def _moe(cfg: _Cfg, fam: _Family, layers: int, warnings: list[str]) -> MoE | None:
    kind = fam.moe
    if kind is None:
        return None
    if kind == "auto":
        if not (cfg.has("num_local_experts") or cfg.has("num_experts")):
            return None
        kind = "mixtral"
        warnings.append("mixture-of-experts fields found: read Mixtral-style (experts of "
                        "intermediate_size, no shared expert)")
    if kind == "mixtral":
        experts = cfg.integer("num_local_experts", "num_experts")
        return MoE(experts, cfg.integer("num_experts_per_tok"), cfg.integer("intermediate_size"))
    if kind == "llama4":
        return _llama4_moe(cfg, layers, warnings)
    if kind == "gpt_oss":
        return MoE(cfg.integer("num_local_experts"),
                   cfg.integer("num_experts_per_tok", "experts_per_token"),
                   cfg.integer("intermediate_size"), router_bias=True, expert_bias=True)
    if kind in ("qwen2_moe", "qwen3_moe"):
        experts = cfg.integer("num_experts", default=0, lo=0)
        if experts == 0:
            return None
        step = cfg.integer("decoder_sparse_step", default=1)
        only = cfg.sequence("mlp_only_layers") or []
        dense_idx = {require_int("mlp_only_layers entry", i, 0, MAX_SIZE) for i in only}
        flags = [i not in dense_idx and (i + 1) % step == 0 for i in range(layers)]
        if not any(flags):
            return None
        shared = cfg.integer("shared_expert_intermediate_size", default=0, lo=0) \
            if kind == "qwen2_moe" else 0
        return MoE(experts, cfg.integer("num_experts_per_tok"),
                   cfg.integer("moe_intermediate_size"),
                   shared_intermediate_size=shared, shared_expert_gate=shared > 0,
                   first_dense_layers=_dense_layers(flags, "decoder_sparse_step/mlp_only_layers",
                                                    warnings))
    # DeepSeek V1/V2/V3
    experts = cfg.integer("n_routed_experts", default=0, lo=0)
    if experts == 0:
        return None
    first_k = cfg.integer("first_k_dense_replace", default=0, lo=0)
    freq = cfg.integer("moe_layer_freq", default=1)
    flags = [i >= first_k and i % freq == 0 for i in range(layers)]
    if not any(flags):
        return None
    size = cfg.integer("moe_intermediate_size")
    shared = cfg.integer("n_shared_experts", default=0, lo=0) * size
    # DeepSeek-V3's aux-loss-free routing keeps a learned per-expert score bias
    # (gate.e_score_correction_bias) in the checkpoint.
    router_bias = cfg.text("topk_method") == "noaux_tc"
    return MoE(experts, cfg.integer("num_experts_per_tok"), size, shared_intermediate_size=shared,
               first_dense_layers=_dense_layers(flags, "first_k_dense_replace/moe_layer_freq",
                                                warnings),
               router_bias=router_bias)


def _llama4_moe(cfg: _Cfg, layers: int, warnings: list[str]) -> MoE | None:
    """Llama-4 MoE (modeling_llama4.py Llama4TextMoe): ``num_local_experts`` routed experts and
    one shared expert (Llama4TextMLP(config)), all of ``intermediate_size``; a sigmoid-scored
    top-k router without bias. MoE layers: ``moe_layers`` if given, else every
    ``interleave_moe_layer_step``-th layer (range(step - 1, layers, step))."""
    experts = cfg.integer("num_local_experts", default=0, lo=0)
    if experts == 0:
        return None
    listed = cfg.sequence("moe_layers")
    if listed is not None:
        idx = {require_int("moe_layers entry", i, 0, layers - 1) for i in listed}
        flags = [i in idx for i in range(layers)]
    else:
        step = cfg.integer("interleave_moe_layer_step")
        flags = [(i + 1) % step == 0 for i in range(layers)]
    if not any(flags):
        return None
    size = cfg.integer("intermediate_size")
    return MoE(experts, cfg.integer("num_experts_per_tok"), size, shared_intermediate_size=size,
               first_dense_layers=_dense_layers(flags, "interleave_moe_layer_step/moe_layers",
                                                warnings))


def _mla(cfg: _Cfg, warnings: list[str]) -> MLA | None:
    if not cfg.has("kv_lora_rank"):
        return None
    if "q_lora_rank" in cfg.data:
        q_rank = cfg.integer("q_lora_rank", default=None)
    else:
        q_rank = 1536
        warnings.append("q_lora_rank missing: assumed 1536 (the DeepseekV2Config default)")
    return MLA(kv_lora_rank=cfg.integer("kv_lora_rank"),
               qk_nope_head_dim=cfg.integer("qk_nope_head_dim"),
               qk_rope_head_dim=cfg.integer("qk_rope_head_dim", lo=0),
               v_head_dim=cfg.integer("v_head_dim"), q_lora_rank=q_rank)


def _decoder(cfg: _Cfg, fam_key: str, fam: _Family, name: str, arch: str,
             warnings: list[str]) -> Model:
    hidden = cfg.integer("hidden_size")
    layers = cfg.integer("num_hidden_layers")
    heads = cfg.integer("num_attention_heads")
    kv_heads = cfg.integer("num_key_value_heads", default=heads)
    inter = cfg.integer(*fam.ffn_keys)
    vocab = cfg.integer("vocab_size")
    head_dim = cfg.integer("head_dim", default=None)
    attn_bias = cfg.flag("attention_bias", False)
    if fam.bias == "qkv":
        qkv_bias, o_bias = True, False
    elif fam.bias == "none":
        if attn_bias:
            warnings.append(f"attention_bias=true is not used by {fam.label}: ignored")
        qkv_bias = o_bias = False
    else:
        qkv_bias = o_bias = attn_bias
    mla = _mla(cfg, warnings) if fam_key == "deepseek" else None
    if mla is not None:
        head_dim = mla.qk_head_dim
    moe = _moe(cfg, fam, layers, warnings)
    window, sliding_layers = _sliding(cfg, fam, layers, warnings)
    theta, factor = _rope(cfg, fam)
    act = _activation(cfg, fam, warnings)
    return Model(
        name=name, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads, intermediate_size=inter, vocab_size=vocab,
        head_dim=head_dim,
        tie_word_embeddings=cfg.flag("tie_word_embeddings", fam.tie_default),
        attention_bias=qkv_bias, attention_out_bias=o_bias,
        mlp_bias=cfg.flag("mlp_bias", False), ffn_kind=FFNKind.GATED,
        hidden_act=act, norm_kind=NormKind.RMS,
        norms_per_layer=fam.norms_per_layer, ffn_sub_norm=fam.sub_norms,
        attn_sub_norm=fam.sub_norms, qk_norm=fam.qk_norm, position=PositionKind.ROPE,
        rope_theta=theta, rope_scaling_factor=factor,
        max_position_embeddings=cfg.integer("max_position_embeddings", default=None),
        sliding_window=window, sliding_layers=sliding_layers, attention_sinks=fam.sinks,
        moe=moe, mla=mla, architecture=arch, warnings=tuple(warnings))


def _gpt2(cfg: _Cfg, name: str, arch: str, warnings: list[str]) -> Model:
    """GPT-2: learned positions, LayerNorm with bias, biases on every linear, plain GELU MLP of
    width n_inner (default 4 * n_embd), tied LM head (modeling_gpt2.py)."""
    hidden = cfg.integer("n_embd", "hidden_size")
    heads = cfg.integer("n_head", "num_attention_heads")
    act = _activation(cfg, _FAMILIES["gpt2"], warnings)
    return Model(
        name=name, hidden_size=hidden,
        num_hidden_layers=cfg.integer("n_layer", "num_hidden_layers"),
        num_attention_heads=heads, num_key_value_heads=heads,
        intermediate_size=cfg.integer("n_inner", "intermediate_size", default=4 * hidden),
        vocab_size=cfg.integer("vocab_size"),
        tie_word_embeddings=cfg.flag("tie_word_embeddings", True),
        attention_bias=True, attention_out_bias=True, mlp_bias=True, ffn_kind=FFNKind.PLAIN,
        hidden_act=act, norm_kind=NormKind.LAYER,
        norms_per_layer=2, position=PositionKind.LEARNED, rope_theta=None,
        max_position_embeddings=cfg.integer("n_positions", "max_position_embeddings",
                                            "n_ctx", default=1024),
        architecture=arch, warnings=tuple(warnings))
