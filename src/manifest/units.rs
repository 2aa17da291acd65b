//! Byte sizes (`10485760`, `10Mi`) and durations (`3600`, `15m`) as manifests write them.

use serde_yaml::Value;

/// The forms a byte size takes, for every refusal of one.
const BYTE_FORMS: &str =
    "a size in bytes is a whole number (10485760) or one with a binary unit: Ki, Mi or Gi (10Mi), also written KiB, MiB or GiB (10MiB)";

/// The binary units, longest spelling first.
const UNITS: [(&str, u64); 6] = [
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
];

/// A positive byte count: a whole number, or a string with a `Ki`/`Mi`/`Gi` suffix (or
/// `KiB`/`MiB`/`GiB`). Decimal units (`MB`) are refused, not guessed at: whether one means
/// 1000 or 1024 depends on the reader.
pub fn bytes(v: &Value) -> Result<u64, String> {
    let n = match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("'{n}' is not a size: {BYTE_FORMS}"))?,
        Value::String(s) => {
            let s = s.trim();
            let (digits, unit) = UNITS
                .iter()
                .find_map(|(suffix, unit)| s.strip_suffix(suffix).map(|d| (d, *unit)))
                .unwrap_or((s, 1));
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("'{}' is not a size: {BYTE_FORMS}", s.escape_debug()));
            }
            whole(digits)?.checked_mul(unit).ok_or("too large")?
        }
        _ => return Err(format!("not a size: {BYTE_FORMS}")),
    };
    if n == 0 {
        return Err("must be greater than 0".into());
    }
    Ok(n)
}

/// A positive duration in seconds: a whole number, or a string with an `s`/`m`/`h`/`d` suffix.
pub fn seconds(v: &Value) -> Result<u64, String> {
    let n = match v {
        Value::Number(n) => n.as_u64().ok_or("expected a whole number of seconds")?,
        Value::String(s) => {
            let s = s.trim();
            let (digits, unit) = match s.as_bytes().last() {
                Some(b's') => (&s[..s.len() - 1], 1u64),
                Some(b'm') => (&s[..s.len() - 1], 60),
                Some(b'h') => (&s[..s.len() - 1], 3600),
                Some(b'd') => (&s[..s.len() - 1], 86_400),
                _ => (s, 1),
            };
            whole(digits)?.checked_mul(unit).ok_or("too large")?
        }
        _ => return Err("expected a duration such as 900, 15m or 1h".into()),
    };
    if n == 0 {
        return Err("must be greater than 0".into());
    }
    Ok(n)
}

fn whole(digits: &str) -> Result<u64, String> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("'{digits}' is not a whole number"));
    }
    digits.parse().map_err(|_| "too large".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::String(x.into())
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(bytes(&Value::from(5u64)), Ok(5));
        assert_eq!(bytes(&s("10Mi")), Ok(10_485_760));
        assert_eq!(bytes(&s("2Gi")), Ok(2 << 30));
        assert_eq!(bytes(&s("1MiB")), Ok(1 << 20));
        assert_eq!(bytes(&s("3KiB")), Ok(3 << 10));
        assert_eq!(bytes(&s("1GiB")), Ok(1 << 30));
        assert_eq!(bytes(&s("4096")), Ok(4096));
        for refused in ["10MB", "10 Mi", "1mi", "1M", "MiB", "1.5Mi", "-1"] {
            let why = bytes(&s(refused)).unwrap_err();
            assert!(why.starts_with(&format!("'{refused}' is not a size: ")), "{why}");
            assert!(why.contains("Ki, Mi or Gi") && why.contains("MiB"), "{why}");
        }
        assert!(bytes(&s("0Ki")).is_err());
        assert!(bytes(&s("99999999999999Gi")).is_err());
        assert_eq!(seconds(&s("15m")), Ok(900));
        assert_eq!(seconds(&s("1h")), Ok(3600));
        assert_eq!(seconds(&s("2d")), Ok(172_800));
        assert_eq!(seconds(&Value::from(30u64)), Ok(30));
        assert!(seconds(&s("15M")).is_err());
        assert!(seconds(&s("0s")).is_err());
        assert!(seconds(&s("-1")).is_err());
    }
}
