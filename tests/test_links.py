"""Shareable-link format (ui.links, no Streamlit): encode -> decode is the identity for every
valid scenario, and no query string, however hostile, raises or slips through unvalidated."""

from hypothesis import given, settings
from hypothesis import strategies as st

from ui.links import (ARCH_EDITS, BATCH_RANGE, BITS_RANGE, DTYPES, FRAMEWORK_OPTIONS, OVERRIDES,
                      SCENARIO_KEYS, TOKENS_RANGE, Catalog, defaults, parse_query, to_query)

MODELS = {"llama-3-8b", "mixtral-8x7b"}
HARDWARE = {"nvidia-h100-sxm", "apple-m4"}
PRECISIONS = {"FP16": 16.0, "W4A16": 4.0}


def _bits(name: str) -> dict:
    w = PRECISIONS[name]
    return {"wbits": w, "wattn": w, "wffn": w, "wemb": 16.0, "abits": 16.0, "kvbits": 16.0,
            "dtype": "fp16"}


CAT = Catalog(resolve_model=lambda s: s if s in MODELS else None,
              resolve_hardware=lambda s: s if s in HARDWARE else None,
              resolve_precision=lambda s: next((k for k in PRECISIONS if k.lower() == s.lower()),
                                               None),
              precision_bits=_bits, default_model="llama-3-8b", default_hardware="nvidia-h100-sxm")

bits = st.floats(*BITS_RANGE, allow_nan=False).map(lambda b: round(b * 4) / 4).filter(
    lambda b: b >= BITS_RANGE[0])


@st.composite
def states(draw):
    s = defaults(CAT)
    s.update(model=draw(st.sampled_from(sorted(MODELS))),
             hardware=draw(st.sampled_from(sorted(HARDWARE))),
             prec=draw(st.sampled_from(sorted(PRECISIONS))))
    s.update(_bits(s["prec"]))
    for k in ("wattn", "wffn", "wemb", "abits", "kvbits"):
        s[k] = draw(bits)
    s["wbits"] = s["wffn"]
    s["dtype"] = draw(st.sampled_from(DTYPES))
    s["batch"] = draw(st.integers(*BATCH_RANGE))
    s["prompt"] = draw(st.integers(*TOKENS_RANGE))
    s["gen"] = draw(st.integers(1, TOKENS_RANGE[1]))
    s["flash"] = draw(st.booleans())
    s["fw"] = draw(st.sampled_from(FRAMEWORK_OPTIONS))
    for o in OVERRIDES:
        if draw(st.booleans()):
            s[o.key] = draw(st.floats(o.lo, o.hi, allow_nan=False, exclude_min=o.lo_open))
    for a in ARCH_EDITS:
        if draw(st.booleans()):
            s[a.key] = draw(st.integers(*a.range))
    return s


@given(states())
@settings(max_examples=300, deadline=None)
def test_encode_decode_is_identity(state):
    query = to_query(state)
    back, warnings = parse_query(query, CAT)
    assert warnings == []
    assert back == state
    assert query["v"] == "1"
    assert set(query) <= set(SCENARIO_KEYS)


def test_defaults_are_spelled_out_in_full():
    q = to_query(defaults(CAT))
    for key in ("v", "model", "hardware", "prec", "wbits", "abits", "kvbits", "batch", "prompt",
                "gen", "flash"):
        assert key in q, key


@given(st.dictionaries(st.sampled_from(SCENARIO_KEYS + ("junk", "embed")),
                       st.lists(st.text(max_size=200), min_size=1, max_size=3)))
@settings(max_examples=500, deadline=None)
def test_hostile_queries_never_raise_and_stay_valid(raw):
    state, warnings = parse_query(raw, CAT)
    assert state["model"] in MODELS and state["hardware"] in HARDWARE
    assert BATCH_RANGE[0] <= state["batch"] <= BATCH_RANGE[1]
    assert state["prompt"] + state["gen"] >= 1
    for o in OVERRIDES:
        v = state[o.key]
        assert v is None or o.lo <= v <= o.hi
    for w in warnings:
        assert "<" not in w.replace("\\<", "")      # quoted values are escaped


def test_bad_values_warn_with_their_key():
    state, warnings = parse_query({"batch": "-7", "prompt": "1e999", "model": "<b>x</b>",
                                   "a_layers": "0", "bw": "abc", "v": "9"}, CAT)
    text = " ".join(warnings)
    for key in ("`batch`", "`prompt`", "`model`", "`a_layers`", "`bw`", "v=9"):
        assert key in text, key
    assert state["batch"] == 1 and state["prompt"] == 2048 and state["a_layers"] is None
