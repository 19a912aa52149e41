"""Architecture-feature link keys (a_rope_theta, a_rope_scale, a_ffn_kind, a_norm): they
round-trip through to_query/parse_query and bad values warn with their key."""

from test_links import CAT

from ui.links import ARCH_CHOICES, defaults, parse_query, to_query


def test_feature_keys_round_trip():
    state = defaults(CAT)
    state.update(a_rope_theta=500000.0, a_rope_scale=8.0, a_ffn_kind="plain", a_norm="layernorm",
                 a_shared=1408, a_kv_rank=256)
    back, warnings = parse_query(to_query(state), CAT)
    assert warnings == [] and back == state


def test_bad_feature_values_warn():
    state, warnings = parse_query({"a_rope_theta": "0", "a_ffn_kind": "swiglu",
                                   "a_norm": "<b>", "a_rope_scale": "nan"}, CAT)
    text = " ".join(warnings)
    for c in ARCH_CHOICES:
        assert f"`{c.key}`" in text, c.key
        assert state[c.key] is None
