//! `retry-after`: delay-seconds, or an HTTP-date (IMF-fixdate) turned into seconds from now.

/// Seconds to wait according to a `retry-after` value, given the current Unix time; `None`
/// when the value is neither form. A date in the past gives 0; a fractional delay rounds up.
pub fn retry_after_seconds(value: &str, now_unix: u64) -> Option<u64> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // An absurdly long digit string still means "a long time".
        return Some(v.parse().unwrap_or(u64::MAX));
    }
    if let Some((whole, frac)) = v.split_once('.') {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if digits(whole) && digits(frac) {
            let w: u64 = whole.parse().unwrap_or(u64::MAX);
            let up = u64::from(frac.bytes().any(|b| b != b'0'));
            return Some(w.saturating_add(up));
        }
    }
    let at = parse_imf_fixdate(v)?;
    Some(at.saturating_sub(now_unix))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` as Unix seconds.
fn parse_imf_fixdate(s: &str) -> Option<u64> {
    let (_weekday, rest) = s.split_once(", ")?;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let day: u64 = num(day, 2)?;
    let month = MONTHS.iter().position(|m| m == month)? as u64 + 1;
    let year: u64 = num(year, 4)?;
    let hms: Vec<&str> = time.split(':').collect();
    let [h, m, sec] = hms.as_slice() else {
        return None;
    };
    let (h, m, sec): (u64, u64, u64) = (num(h, 2)?, num(m, 2)?, num(sec, 2)?);
    if !(1..=31).contains(&day) || year < 1970 || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + h * 3_600 + m * 60 + sec)
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn num(s: &str, len: usize) -> Option<u64> {
    (s.len() == len && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
}

/// Days since 1970-01-01 of a proleptic Gregorian date (year >= 1970, month 1..=12).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12; // March = 0
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_seconds() {
        assert_eq!(retry_after_seconds("30", 0), Some(30));
        assert_eq!(retry_after_seconds(" 0 ", 0), Some(0));
        assert_eq!(retry_after_seconds("1.5", 0), Some(2));
        assert_eq!(retry_after_seconds("2.0", 0), Some(2));
        assert_eq!(retry_after_seconds("99999999999999999999999", 0), Some(u64::MAX));
        for bad in ["", "-1", "soon", "1.", ".5", "1e3"] {
            assert_eq!(retry_after_seconds(bad, 0), None, "{bad}");
        }
    }

    #[test]
    fn http_dates() {
        assert_eq!(parse_imf_fixdate("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_imf_fixdate("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_imf_fixdate("Tue, 29 Feb 2000 12:00:00 GMT"),
            Some(951_825_600)
        );
        assert_eq!(
            retry_after_seconds("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_700),
            Some(77)
        );
        assert_eq!(
            retry_after_seconds("Sun, 06 Nov 1994 08:49:37 GMT", 784_200_000),
            Some(0)
        );
        for bad in [
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
        ] {
            assert_eq!(retry_after_seconds(bad, 0), None, "{bad}");
        }
    }
}
