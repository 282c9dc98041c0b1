//! Wire types of uploaded files, and which media types a file field accepts.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A file uploaded with `POST /files`: the upload's response, and the value of a `file` field or a file question in
/// an answer (whose metadata the server replaces with what it stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct UploadedFile {
    /// What an answer references it by; `GET /files/{file_id}` downloads it.
    pub file_id: Uuid,
    /// Its name, as the uploader gave it.
    pub name: String,
    /// Its length in bytes.
    pub size: u64,
    /// Its media type, as the uploader sent it.
    pub media_type: String,
    /// The SHA-256 of its bytes, in lowercase hex.
    pub sha256: String,
}

/// Whether `media_type` (`image/png; charset=...` included) is one of `accept`'s media types or patterns
/// (`image/*`, `*/*`); compared without case and without parameters. An empty `accept` takes any.
pub fn media_type_accepted(accept: &[String], media_type: &str) -> bool {
    let essence = |text: &str| text.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let media_type = essence(media_type);
    accept.is_empty()
        || accept.iter().map(|pattern| essence(pattern)).any(|pattern| match pattern.strip_suffix("/*") {
            Some("*") => true,
            Some(kind) => media_type.split_once('/').is_some_and(|(of, _)| of == kind),
            None => pattern == media_type,
        })
}

/// A size as people read it, in the binary units the server's limits are set in: `39 bytes`, `97.6 KiB`, `10 MiB`,
/// `1.5 MiB`. A fraction past the first decimal is cut, never rounded up: "up to" a limit promises no byte more than
/// the server takes.
pub fn size_text(bytes: u64) -> String {
    const KIB: u64 = 1024;
    let (unit, name) = match bytes {
        b if b >= KIB * KIB => (KIB * KIB, "MiB"),
        b if b >= KIB => (KIB, "KiB"),
        b => return format!("{b} bytes"),
    };
    let tenths = u128::from(bytes) * 10 / u128::from(unit);
    match tenths % 10 {
        0 => format!("{} {name}", tenths / 10),
        tenth => format!("{}.{tenth} {name}", tenths / 10),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_the_units_the_limits_are_set_in() {
        assert_eq!(size_text(39), "39 bytes");
        assert_eq!(size_text(1023), "1023 bytes");
        assert_eq!(size_text(100_000), "97.6 KiB", "97.66 cut, not rounded up to a size the limit refuses");
        assert_eq!(size_text(1024), "1 KiB");
        assert_eq!(size_text(10 * 1024 * 1024), "10 MiB", "the default upload limit");
        assert_eq!(size_text(1536 * 1024), "1.5 MiB");
        assert_eq!(size_text(2 * 1024 * 1024 - 1), "1.9 MiB");
        assert_eq!(size_text(u64::MAX), "17592186044415.9 MiB");
    }

    #[test]
    fn a_file_fields_accept_list_takes_exact_types_and_wildcards_without_case_or_parameters() {
        let accept = |list: &[&str]| list.iter().map(|item| (*item).to_owned()).collect::<Vec<_>>();
        assert!(media_type_accepted(&[], "application/x-anything"));
        assert!(media_type_accepted(&accept(&["image/*"]), "image/png"));
        assert!(media_type_accepted(&accept(&["image/*"]), "IMAGE/JPEG"));
        assert!(!media_type_accepted(&accept(&["image/*"]), "text/plain"));
        assert!(!media_type_accepted(&accept(&["image/*"]), "imagefoo"));
        assert!(media_type_accepted(&accept(&["application/pdf"]), "application/pdf; name=a.pdf"));
        assert!(!media_type_accepted(&accept(&["application/pdf"]), "application/pdfx"));
        assert!(media_type_accepted(&accept(&["text/plain", "*/*"]), "video/mp4"));
    }
}
