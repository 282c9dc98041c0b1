//! An error with its causes, as one line: below every layer, so the outbound guard and the channels may use it
//! as much as the use cases and the doors.

/// An error with its causes, for messages and logs: a library's own message often leaves out why (reqwest's says a
/// request failed, its source says the connection was refused).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
