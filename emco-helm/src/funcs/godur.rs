//! Sprig's `durationRound`; Go's `time.Duration` text itself is emco-go's `time`.

use emco_go::time::SECOND;

/// Sprig's `durationRound`: the whole count of the largest unit the duration exceeds.
pub(super) fn round(ns: i64) -> String {
    const UNITS: [(u64, &str); 6] = [
        (365 * 24 * 3600 * SECOND, "y"),
        (30 * 24 * 3600 * SECOND, "mo"),
        (24 * 3600 * SECOND, "d"),
        (3600 * SECOND, "h"),
        (60 * SECOND, "m"),
        (SECOND, "s"),
    ];
    let u = ns.unsigned_abs();
    UNITS.iter().find(|(size, _)| u > *size).map_or_else(
        || "0s".to_owned(),
        |(size, name)| format!("{}{name}", u / size),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_to_the_largest_unit() {
        for (ns, want) in [
            (0, "0s"),
            (500_000_000, "0s"),
            (SECOND as i64, "0s"),
            (1_500_000_000, "1s"),
            (3_600 * SECOND as i64, "60m"),
            (-7_800 * SECOND as i64, "2h"),
            (8_760 * 3_600 * SECOND as i64, "12mo"),
            (9_000 * 3_600 * SECOND as i64, "1y"),
            (i64::MIN, "292y"),
        ] {
            assert_eq!(round(ns), want, "{ns}");
        }
    }
}
