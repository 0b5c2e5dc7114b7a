//! Go duration strings (`10m`, `1h30m`, `1.5s`), as `spec.source.image.pollInterval` takes them:
//! the CRD admits `^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$`, so the parser only needs to be
//! strict enough to refuse what slipped past an older schema.

use std::time::Duration;

/// Parses a Go duration; `None` when it does not match the CRD pattern.
#[must_use]
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        let value: f64 = number.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * seconds;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("5"), None);
        assert_eq!(parse_go_duration("5 minutes"), None);
        assert_eq!(parse_go_duration("m"), None);
    }
}
