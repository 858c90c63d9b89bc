"""How numbers are written (scaling/numerics/fmt.py), against hand-written strings."""

import pytest

from chinchax.scaling.numerics import fmt


@pytest.mark.parametrize("x, digits, written", [
    (1.2e12, 3, "1.2e12"), (5e10, 3, "5e10"), (1.234e-5, 3, "1.23e-5"), (0.4521, 3, "0.452"),
    (1000.0, 3, "1000"), (9999.0, 3, "1e4"), (12345.0, 3, "1.23e4"), (0.001, 3, "0.001"),
    (0.00099, 3, "9.9e-4"), (0.0009996, 3, "0.001"), (-3.5e20, 2, "-3.5e20"), (2.0, 3, "2"), (0.0, 3, "0"),
    (None, 3, "-"), (float("inf"), 3, "inf"), (6.789e11, 2, "6.8e11"), (3072.0, 4, "3072"),
])
def test_num(x, digits, written):
  assert fmt.num(x, digits) == written


@pytest.mark.parametrize("x, written", [
    (1e12, "1e12"), (6e-4, "6e-4"), (6.0000001e-4, "6.0000001e-4"), (0.0012, "0.0012"), (3.5e-5, "3.5e-5"),
    (123456789012.0, "1.23456789012e11"), (1500.0, "1500"), (12345.0, "1.2345e4"),
    (0.1 + 0.2, "0.30000000000000004"), (-4.2e-7, "-4.2e-7"), (2.0, "2"), (0.0, "0"),
    (1e300, "1e300"), (5e-324, "5e-324"),
])
def test_exact_keeps_every_digit_and_reads_back(x, written):
  assert fmt.exact(x) == written
  assert float(written) == x


def test_count_interval_factor():
  assert fmt.count(1.4e12) == "1.4e12 (1.4T)" and fmt.count(6.3e5) == "6.3e5 (630k)"
  assert fmt.count(5e22) == "5e22"
  assert fmt.interval((0.4312, 0.4701)) == "[0.431, 0.47]" and fmt.interval(None) == ""
  assert fmt.factor(17.2) == "17.2x" and fmt.factor(2.54) == "2.5x"


def test_clock():
  assert [fmt.clock(s) for s in (0, 59.9, 65, 3599, 3600, 3723.5, 90061)] == [
      "0:00", "0:59", "1:05", "59:59", "1:00:00", "1:02:03", "25:01:01"]
