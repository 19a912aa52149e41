"""ui/format.py, the one formatter of every page (issue 15, defect 8): human units, no
12-digit numbers, no nine-digit percentages."""

import pytest

from ui.format import (fmt_bytes, fmt_count, fmt_int, fmt_pct, fmt_rate, fmt_sci, fmt_time,
                       fmt_times, sig)


@pytest.mark.parametrize("seconds, shown", [
    (84_978_343_778, "2,693 years"), (3 * 86_400, "3.00 days"), (5 * 3600, "5.00 h"),
    (150, "2.50 min"), (75, "75.0 s"), (0.0116, "11.6 ms"), (3.4e-6, "3.40 µs"),
    (2e-9, "2.00 ns"), (3e20, "9.51 × 10¹² years")])
def test_time_in_human_units(seconds, shown):
    assert fmt_time(seconds) == shown


def test_percentages_and_ratios():
    assert fmt_pct(0.41) == "41 %" and fmt_pct(0.2063, 1) == "20.6 %"
    assert fmt_pct(3_804_816.78) == "3.80 × 10⁶ ×"          # was "380481678 %"
    assert fmt_pct(12.5) == "12.5×" and fmt_times(2.5) == "2.50×"


def test_big_numbers_are_powers_of_ten_or_units():
    assert sig(123_456) == "123,456" and sig(1_234_567) == "1.23 × 10⁶"
    assert sig(86.25) == "86.2" or sig(86.25) == "86.3"
    assert fmt_sci(9.9996e5) == "1.00 × 10⁶"
    assert fmt_count(46_702_792_704) == "46.7 B"           # was 46702792704
    assert fmt_int(486_475) == "486,475" and fmt_int(46_702_792_704) == "46.7 B"
    assert fmt_rate(2.5e6) == "2.50 M tok/s" and fmt_rate(86.3) == "86.3 tok/s"
    assert fmt_bytes(302e6) == "302 MB" and fmt_bytes(16.06e9) == "16.1 GB"
    assert max(len(f(1e30)) for f in (sig, fmt_count, fmt_time, fmt_rate)) < 24
