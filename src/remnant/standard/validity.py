"""The validity period a verdict carries (V5): void for any other model version, at most 12 months long.

V5: "A verdict MUST be treated as void for any model version other than the one assessed, and MUST carry a stated
validity period not exceeding 12 months." Months are calendar months counted from the assessment date; a day past
the target month's end clamps to its last day (31 January + 1 month = 28 February), so the period never exceeds
12 calendar months.
"""

from __future__ import annotations

import datetime as dt

#: V5's ceiling on a stated validity period.
VALIDITY_MONTHS = 12


def add_months(day: dt.date, months: int) -> dt.date:
    """``day`` plus ``months`` calendar months, clamped to the month's last day (V5's 12-month bound)."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    month += 1
    for last in (31, 30, 29, 28):
        try:
            return dt.date(year, month, min(day.day, last))
        except ValueError:
            continue
    raise ValueError(f"no valid date for {day} + {months} months")  # pragma: no cover


def validity_until(assessed_on: dt.date) -> dt.date:
    """The end of the longest validity period V5 allows: 12 months from the assessment date."""
    return add_months(assessed_on, VALIDITY_MONTHS)


def validity_problem(assessed_on: dt.date, until: dt.date) -> str | None:
    """Why a stated period breaks V5 (not after the assessment, or more than 12 months on), or None if it holds."""
    if until <= assessed_on:
        return f"validity_until {until} is not after the assessment date {assessed_on}"
    latest = add_months(assessed_on, VALIDITY_MONTHS)
    if until > latest:
        return f"validity_until {until} is more than {VALIDITY_MONTHS} months after {assessed_on} (latest {latest})"
    return None
