//! Dates and times as a `datetime-local` input shows them (the browser's zone, without an offset) and as an answer
//! carries them (RFC 3339 with the offset of that zone at that moment).

/// `+HH:MM` (or `-HH:MM`) for an offset east of UTC in minutes.
pub fn format_offset(minutes: i32) -> String {
    let sign = if minutes < 0 { '-' } else { '+' };
    let minutes = minutes.unsigned_abs();
    format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
}

/// A `datetime-local` input's `YYYY-MM-DDTHH:MM[:SS]` as RFC 3339 with `offset` (`+01:00`).
pub fn local_to_rfc3339(local: &str, offset: &str) -> String {
    let seconds = if local.len() == 16 { ":00" } else { "" };
    format!("{local}{seconds}{offset}")
}

/// A `datetime-local` input's text for the RFC 3339 moment `text`, in the zone whose offset at that moment (in
/// minutes east of UTC) `offset_at` gives: what is sent back unchanged, with that zone's offset, is the same moment.
/// Text without an offset is the input's as it is.
pub fn local_text(text: &str, offset_at: &dyn Fn(&str) -> i32) -> String {
    match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(moment) => {
            let offset = chrono::FixedOffset::east_opt(offset_at(text) * 60).unwrap_or(*moment.offset());
            moment.with_timezone(&offset).format("%Y-%m-%dT%H:%M").to_string()
        }
        Err(_) => text.chars().take(16).collect(),
    }
}

/// How a form names the zone of a date and time it reads with `offset` (`+01:00`; empty is UTC).
pub fn zone_label(offset: &str) -> String {
    match offset {
        "" | "Z" | "+00:00" | "-00:00" => "Time zone: UTC".to_owned(),
        offset => format!("Time zone: UTC{offset}"),
    }
}

/// The browser's offset from UTC at the RFC 3339 moment `moment`, in minutes east.
pub fn browser_offset_at(moment: &str) -> i32 {
    #[cfg(feature = "hydrate")]
    {
        let minutes = -js_sys::Date::new(&wasm_bindgen::JsValue::from_str(moment)).get_timezone_offset();
        if minutes.is_finite() {
            return minutes as i32;
        }
    }
    let _ = moment;
    0
}

/// How a live form names the zone a `datetime-local` input's text is read in: the browser's, at that date and time
/// (at this time of year while the input is empty).
pub fn zone_of(local: &str) -> String {
    #[cfg(feature = "hydrate")]
    if local.is_empty() {
        let now = String::from(js_sys::Date::new_0().to_iso_string());
        return zone_label(&format_offset(browser_offset_at(&now)));
    }
    zone_label(&browser_offset(local))
}

/// The browser's offset from UTC at a local date and time (daylight saving time included).
pub fn browser_offset(local: &str) -> String {
    #[cfg(feature = "hydrate")]
    {
        let date = js_sys::Date::new(&wasm_bindgen::JsValue::from_str(local));
        let minutes = -date.get_timezone_offset();
        if minutes.is_finite() {
            return format_offset(minutes as i32);
        }
    }
    let _ = local;
    format_offset(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datetime_is_sent_with_the_offset_of_its_local_time() {
        assert_eq!(local_to_rfc3339("2026-03-01T09:30", "+01:00"), "2026-03-01T09:30:00+01:00");
        assert_eq!(format_offset(-330), "-05:30");
        assert_eq!(format_offset(60), "+01:00");
    }

    /// A default written in one zone opens in the person's own, so that sent back untouched it is the same moment.
    #[test]
    fn a_datetime_default_opens_in_the_browsers_zone() {
        let new_york = |_: &str| -300;
        assert_eq!(local_text("2026-03-01T09:30:00+01:00", &new_york), "2026-03-01T03:30");
        let sent = local_to_rfc3339(&local_text("2026-03-01T09:30:00+01:00", &new_york), "-05:00");
        assert_eq!(
            chrono::DateTime::parse_from_rfc3339(&sent).unwrap(),
            chrono::DateTime::parse_from_rfc3339("2026-03-01T09:30:00+01:00").unwrap()
        );
        assert_eq!(local_text("2026-03-01T09:30", &new_york), "2026-03-01T09:30", "no offset: as written");
    }
}
