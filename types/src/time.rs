//! Times on the wire: RFC 3339 text, as chrono writes it (`2026-11-24T20:14:03.123456Z`).
//!
//! The browser reads them with [`parse_rfc3339`] instead of chrono's `Deserialize`, which parses through chrono's
//! general format parser (RFC 2822, month and weekday names, every numeric item): code that every page's first load
//! carried in the main wasm module for one fixed shape. The server and the CLI keep chrono's parser, which also
//! accepts the looser forms (lower-case separators, a space for the `T`) that a person or another program may send.
//! Every wire type's times are read through the functions here: `#[serde(deserialize_with = "time::required")]`,
//! and `time::optional` (with `default`) for the optional ones.
//!
//! A question's times are also written here ([`write`], [`write_optional`]), byte for byte as chrono writes them:
//! chrono formats through `core::fmt` and serde_json escapes what it writes one character at a time, and through
//! them the times of the questions a HITL cycle serialises cost about a tenth of the server's instructions per cycle
//! (counted in docs/benchmarks.md, "2026-11-26, 679ca61").

use chrono::{DateTime, Datelike, NaiveDate, NaiveTime, TimeDelta, Timelike, Utc};
use serde::{Deserializer, Serializer};

/// `time` as chrono's `Serialize` writes it (RFC 3339 in UTC with `Z`, and a fraction of 3, 6 or 9 digits when
/// the time has one), into `buffer`; `None` for a year chrono writes with a sign (before 0 or after 9999).
fn rfc3339(time: &DateTime<Utc>, buffer: &mut [u8; 30]) -> Option<usize> {
    let year = u32::try_from(time.year()).ok().filter(|year| *year <= 9999)?;
    let (mut second, mut nanos) = (time.second(), time.nanosecond());
    // A leap second is kept as the 59th second's overflow; chrono writes it as second 60.
    if nanos >= 1_000_000_000 {
        second += 1;
        nanos -= 1_000_000_000;
    }
    let mut put = |at: usize, value: u32, digits: usize| {
        let mut value = value;
        for place in (at..at + digits).rev() {
            buffer[place] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, year, 4);
    put(5, time.month(), 2);
    put(8, time.day(), 2);
    put(11, time.hour(), 2);
    put(14, time.minute(), 2);
    put(17, second, 2);
    let fraction = match nanos {
        0 => 0,
        _ if nanos % 1_000_000 == 0 => 3,
        _ if nanos % 1_000 == 0 => 6,
        _ => 9,
    };
    put(20, nanos / 10u32.pow(9 - fraction as u32), fraction);
    for (at, separator) in [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')] {
        buffer[at] = separator;
    }
    let mut end = 19;
    if fraction > 0 {
        buffer[19] = b'.';
        end = 20 + fraction;
    }
    buffer[end] = b'Z';
    Some(end + 1)
}

/// `serialize_with` for a time.
pub fn write<S: Serializer>(time: &DateTime<Utc>, serializer: S) -> Result<S::Ok, S::Error> {
    let mut buffer = [0u8; 30];
    match rfc3339(time, &mut buffer) {
        // Digits and ASCII separators only.
        Some(len) => serializer.serialize_str(std::str::from_utf8(&buffer[..len]).unwrap_or_default()),
        None => serde::Serialize::serialize(time, serializer),
    }
}

/// `serialize_with` for an optional time.
pub fn write_optional<S: Serializer>(time: &Option<DateTime<Utc>>, serializer: S) -> Result<S::Ok, S::Error> {
    struct Written<'a>(&'a DateTime<Utc>);
    impl serde::Serialize for Written<'_> {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            write(self.0, serializer)
        }
    }
    match time {
        Some(time) => serializer.serialize_some(&Written(time)),
        None => serializer.serialize_none(),
    }
}

/// Reads RFC 3339 (`YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, a leap second included) without chrono's parser.
pub fn parse_rfc3339(text: &str) -> Option<DateTime<Utc>> {
    let bytes = text.as_bytes();
    let number = |at: usize, len: usize| -> Option<u32> {
        bytes.get(at..at + len)?.iter().try_fold(0u32, |n, c| c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0')))
    };
    let separators = [(4, b"-" as &[u8]), (7, b"-"), (10, b"Tt "), (13, b":"), (16, b":")];
    if !separators.iter().all(|(at, allowed)| bytes.get(*at).is_some_and(|c| allowed.contains(c))) {
        return None;
    }
    let date = NaiveDate::from_ymd_opt(i32::try_from(number(0, 4)?).ok()?, number(5, 2)?, number(8, 2)?)?;
    let (hour, minute, mut second) = (number(11, 2)?, number(14, 2)?, number(17, 2)?);
    let mut at = 19;
    let mut nanos = 0u32;
    if bytes.get(at) == Some(&b'.') {
        let start = at + 1;
        at = start;
        while let Some(digit) = bytes.get(at).filter(|c| c.is_ascii_digit()) {
            // Digits past nanoseconds are read and dropped, as chrono does.
            if at - start < 9 {
                nanos = nanos * 10 + u32::from(digit - b'0');
            }
            at += 1;
        }
        if at == start {
            return None;
        }
        nanos *= 10u32.pow(9u32.saturating_sub((at - start) as u32));
    }
    let offset_seconds = match &bytes[at..] {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (hours, minutes) = (number(at + 1, 2)?, number(at + 4, 2)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let seconds = i64::from(hours * 3600 + minutes * 60);
            if *sign == b'-' { -seconds } else { seconds }
        }
        _ => return None,
    };
    // A leap second is the 59th second's overflow, as chrono keeps it.
    if second == 60 {
        second = 59;
        nanos += 1_000_000_000;
    }
    let time = NaiveTime::from_hms_nano_opt(hour, minute, second, nanos)?;
    Some(date.and_time(time).checked_sub_signed(TimeDelta::seconds(offset_seconds))?.and_utc())
}

/// A time from the wire, or the deserializer's error.
#[cfg(feature = "browser")]
fn read<E: serde::de::Error>(text: &str) -> Result<DateTime<Utc>, E> {
    parse_rfc3339(text).ok_or_else(|| E::custom("expected an RFC 3339 time"))
}

/// `deserialize_with` for a time.
pub fn required<'de, D: Deserializer<'de>>(deserializer: D) -> Result<DateTime<Utc>, D::Error> {
    #[cfg(feature = "browser")]
    {
        read(&<String as serde::Deserialize>::deserialize(deserializer)?)
    }
    #[cfg(not(feature = "browser"))]
    {
        serde::Deserialize::deserialize(deserializer)
    }
}

/// `deserialize_with` for an optional time (with `#[serde(default)]`, so that a missing field is `None`).
pub fn optional<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    #[cfg(feature = "browser")]
    {
        <Option<String> as serde::Deserialize>::deserialize(deserializer)?.map(|text| read(&text)).transpose()
    }
    #[cfg(not(feature = "browser"))]
    {
        serde::Deserialize::deserialize(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What chrono's own parser makes of the text.
    fn chrono_reads(text: &str) -> Option<DateTime<Utc>> {
        DateTime::parse_from_rfc3339(text).ok().map(|t| t.with_timezone(&Utc))
    }

    /// `count` times spread over years 0 to 9999: whole seconds, and fractions of 3, 6, 9 and 9 digits.
    fn sample_times(count: i64) -> impl Iterator<Item = DateTime<Utc>> {
        let mut seconds: i64 = 1_795_000_000;
        (0..count).map(move |step| {
            seconds = seconds
                .wrapping_mul(6_364_136_223_846_793)
                .wrapping_add(1_442_695_040_888_963)
                .rem_euclid(253_402_300_799 + 62_135_596_800)
                - 62_135_596_800;
            let nanos = match step % 5 {
                0 => 0,
                1 => (seconds.rem_euclid(1000)) as u32 * 1_000_000,
                2 => (seconds.rem_euclid(1_000_000)) as u32 * 1000,
                3 => (seconds.rem_euclid(1_000_000_000)) as u32,
                _ => (seconds.rem_euclid(10)) as u32 * 100_000_000 + 7,
            };
            DateTime::from_timestamp(seconds, nanos).unwrap()
        })
    }

    /// A wire type's time left to chrono's `Deserialize` brings chrono's general parser back into the wasm of
    /// every page that reads the type (9 KiB gzipped, in three pages' first load). A field with a deserializer of
    /// its own chose it (the request bodies' "given or not" fields, which only the server reads).
    #[test]
    fn every_time_of_a_wire_type_is_read_through_this_module() {
        let crate_root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        // The wire types, and the server functions' bodies in the UI crate.
        let mut files = vec![crate_root.join("../app/src/server_fns.rs")];
        files.extend(std::fs::read_dir(crate_root.join("src")).unwrap().map(|entry| entry.unwrap().path()));
        let mut left_to_chrono = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (n, line) in lines.iter().enumerate() {
                let field = line.trim_start();
                if !(field.starts_with("pub ") && field.contains("DateTime<") && field.ends_with(',')) {
                    continue;
                }
                let mut attributes = lines[..n].iter().rev().take_while(|line| {
                    let line = line.trim_start();
                    line.starts_with("#[") || line.starts_with("///")
                });
                if !attributes.any(|attribute| attribute.contains("time::") || attribute.contains("deserialize_with")) {
                    left_to_chrono.push(format!("{}:{}", file.display(), n + 1));
                }
            }
        }
        assert!(left_to_chrono.is_empty(), "times read by chrono's `Deserialize`: {left_to_chrono:?}");
    }

    #[test]
    fn every_time_chrono_writes_is_read_back_to_the_same_instant() {
        for t in sample_times(5_000) {
            let written = serde_json::to_string(&t).unwrap();
            let text = written.trim_matches('"');
            assert_eq!(parse_rfc3339(text), Some(t), "{text}");
            assert_eq!(parse_rfc3339(text), chrono_reads(text), "{text}");
        }
    }

    #[derive(serde::Serialize)]
    struct Ours(#[serde(serialize_with = "write")] DateTime<Utc>);

    #[derive(serde::Serialize)]
    struct OursOptional(#[serde(serialize_with = "write_optional")] Option<DateTime<Utc>>);

    /// What chrono's `Serialize` and [`write`] each make of `t`.
    fn written_both_ways(t: DateTime<Utc>) -> (String, String) {
        let ours = serde_json::to_string(&Ours(t)).unwrap();
        assert_eq!(serde_json::to_string(&OursOptional(Some(t))).unwrap(), ours);
        (serde_json::to_string(&t).unwrap(), ours)
    }

    #[test]
    fn every_time_is_written_as_chrono_writes_it() {
        for t in sample_times(20_000) {
            let (chrono, ours) = written_both_ways(t);
            assert_eq!(ours, chrono);
        }
        let leap = NaiveDate::from_ymd_opt(2016, 12, 31).unwrap().and_hms_nano_opt(23, 59, 59, 1_500_000_000).unwrap();
        for t in [
            leap.and_utc(),
            DateTime::from_timestamp(-62_135_596_800, 0).unwrap(),
            DateTime::from_timestamp(253_402_300_799, 999_999_999).unwrap(),
            DateTime::from_timestamp(-62_135_596_801, 1_000).unwrap(),
            DateTime::from_timestamp(253_402_300_800, 0).unwrap(),
        ] {
            let (chrono, ours) = written_both_ways(t);
            assert_eq!(ours, chrono);
        }
        assert_eq!(serde_json::to_string(&OursOptional(None)).unwrap(), "null");
    }

    #[test]
    fn offsets_fractions_and_leap_seconds_read_as_chrono_reads_them() {
        for text in [
            "2026-11-24T20:14:03Z",
            "2026-11-24t20:14:03z",
            "2026-11-24 20:14:03Z",
            "2026-11-24T20:14:03.5Z",
            "2026-11-24T20:14:03.123456789Z",
            "2026-11-24T20:14:03.1234567891234Z",
            "2026-11-24T20:14:03+02:00",
            "2026-11-24T00:14:03-05:30",
            "2026-12-31T23:30:00-01:00",
            "2016-12-31T23:59:60Z",
            "2016-12-31T23:59:60.5Z",
            "2024-02-29T12:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(text), chrono_reads(text), "{text}");
            assert!(parse_rfc3339(text).is_some(), "{text}");
        }
    }

    #[test]
    fn text_that_is_not_rfc_3339_is_refused() {
        for text in [
            "",
            "2026-11-24",
            "2026-11-24T20:14Z",
            "2026-11-24T20:14:03",
            "2026-11-24T20:14:03.Z",
            "2026-11-24T20:14:03+0200",
            "2026-11-24T20:14:03+24:00",
            "2026-11-24T20:14:03Z ",
            "2026-13-24T20:14:03Z",
            "2025-02-29T20:14:03Z",
            "2026-11-24T24:00:00Z",
            "2026-11-24T20:60:00Z",
            "2026-11-24T20:14:61Z",
            "2026/11/24T20:14:03Z",
            "+2026-11-24T20:14:03Z",
            "2026-11-24T20:14:03Zé",
            "２026-11-24T20:14:03Z",
        ] {
            assert_eq!(parse_rfc3339(text), None, "{text:?}");
        }
    }
}
