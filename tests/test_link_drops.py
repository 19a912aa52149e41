"""Issue 29, class 4 (silent drops): a link that repeats a single-valued key, or carries values a
multi-select does not know, says what it dropped instead of losing it silently."""

from apptest_util import open_page


def _warnings(at) -> list[str]:
    return [w.value for w in at.warning]


def test_repeated_key_names_what_was_dropped():
    at = open_page(None, batch=[str(b) for b in range(1, 501)])
    assert not at.exception
    hits = [w for w in _warnings(at) if "`batch` appears 500 times" in w]
    assert hits and "'500'" in hits[0] and "dropping the other 499" in hits[0], _warnings(at)
    assert at.number_input(key="batch").value == 500        # the last value is the one used


def test_unknown_multiselect_values_are_named_and_known_ones_kept():
    at = open_page("app_pages/operators_page.py", okind=["<script>", "attention", "bogus"])
    assert not at.exception
    hits = [w for w in _warnings(at) if "`okind`" in w and "dropped 2 unknown values" in w]
    assert hits, _warnings(at)
    # named, markdown-escaped (shown as text, never as HTML)
    assert "'\\<script\\>'" in hits[0] and "'bogus'" in hits[0] and "kept 1 known" in hits[0]


def test_a_single_value_warns_about_nothing():
    at = open_page(None, batch="8")
    assert not at.exception
    assert not [w for w in _warnings(at) if "appears" in w or "dropped" in w]
