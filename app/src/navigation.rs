//! What the sign-in flow and the answer form carry in URLs: where to go after signing in (`next`), and why an
//! attempt failed (`error`). Both arrive in a query string anyone can write, so `next` is only followed when it is
//! a path of this site, and `error` is a code the pages turn into a fixed sentence, never text shown as given.

/// Where a person goes after signing in when `next` is missing or not a path of this site.
pub const DEFAULT_NEXT: &str = "/inbox";

/// `next` if it is a path of this site, else [`DEFAULT_NEXT`]: the one check every `next` goes through, on the
/// server (the redirect after sign-in) and on the sign-in page (the form's hidden field).
///
/// Only a path that starts with exactly one `/` is taken. Browsers read `\` as `/` and drop tabs and line breaks
/// from URLs, so `/\evil.example` and `/<tab>/evil.example` would lead to `//evil.example`, another host; no
/// control character or whitespace is allowed anywhere (a line break in a `Location` header cannot be sent at all).
pub fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(path) if is_local_path(path) => path,
        _ => DEFAULT_NEXT,
    }
}

fn is_local_path(path: &str) -> bool {
    let mut chars = path.chars();
    chars.next() == Some('/')
        && !matches!(chars.next(), Some('/' | '\\'))
        && !path.chars().any(|c| c.is_control() || c.is_whitespace())
}

pub use crate::types::sign_in_error;

/// The value of the query parameter `name` in `search` (a URL's raw query, without its `?`), decoded once, as a
/// form's `GET` encodes it (`+` is a space). The router's query map decodes its values a second time, which would
/// turn the escapes inside a value into what they stand for: a `next` of `/inbox?q=a%26b` into `/inbox?q=a&b`.
pub fn query_param(search: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(search.as_bytes()).find(|(key, _)| key == name).map(|(_, value)| value.into_owned())
}

/// Percent-encodes a query value (everything but RFC 3986's unreserved characters).
pub fn query_value(value: &str) -> String {
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => encoded.push(byte as char),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

/// What the sign-in page offers besides a password, a token and a one-time link; the server provides it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SignInOptions {
    /// What to call the single sign-on provider ("Sign in with …"), when one is configured.
    pub single_sign_on: Option<String>,
}

/// The sentence the sign-in page shows for an error code; `retry_after` is the `?retry_after=` parameter, only
/// shown when it is a number.
pub fn sign_in_error_message(code: &str, retry_after: Option<&str>) -> String {
    use sign_in_error::*;
    match code {
        WRONG_PASSWORD => "Wrong username or password.".into(),
        WRONG_TOKEN => "That token is not valid. Check it and try again.".into(),
        LINK_SPENT => {
            "That sign-in link is not valid any more: it was used, or it expired. Restart the server for a new one."
                .into()
        }
        MISSING => "Enter your username and password, or a token.".into(),
        RATE_LIMITED => match retry_after.and_then(|seconds| seconds.parse::<u64>().ok()) {
            Some(seconds) => format!("Too many sign-in attempts. Try again in {seconds} s."),
            None => "Too many sign-in attempts. Try again later.".into(),
        },
        SSO_FAILED => "Single sign-on did not complete. Start again from this page.".into(),
        SSO_UNAVAILABLE => "The identity provider cannot be reached right now. Try again in a moment.".into(),
        SSO_UNVERIFIED => {
            "Your identity provider has not verified your email address, so it cannot sign you in here.".into()
        }
        SSO_NO_MEMBER => {
            "No account here has confirmed the email address you signed in with. Sign in another way, set the address \
             in Settings and open the link mailed to it; or ask an admin to add you."
                .into()
        }
        SSO_AMBIGUOUS => {
            "More than one account here has the email address you signed in with. Ask an admin to fix that.".into()
        }
        _ => "Sign-in failed. Try again.".into(),
    }
}

/// The sentence the question page shows for the error code `POST /ui/answer/{id}` put in `?error=` (the API's
/// error codes), about a question that is `pending` still or not: a conflict with a question still pending is a
/// claim someone else holds (or a change meanwhile), not an answer.
pub fn answer_error_message(code: &str, pending: bool) -> &'static str {
    match code {
        "invalid" => "That answer is not valid for this question. Check it and try again.",
        "conflict" if pending => {
            "Someone else holds this question's claim (see who below), or it changed meanwhile. Nothing was answered."
        }
        "conflict" => "This question was already answered or closed.",
        "forbidden" => "You may not answer this question.",
        _ => "The answer could not be saved. Try again.",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_value_is_decoded_once_and_its_own_escapes_stay() {
        // `/signin?next=` for `/inbox?project=my app&q=a&b`, as the server writes it.
        let search = "next=%2Finbox%3Fproject%3Dmy%2520app%26q%3Da%2526b&error=";
        assert_eq!(query_param(search, "next").as_deref(), Some("/inbox?project=my%20app&q=a%26b"));
        assert_eq!(safe_next(query_param(search, "next").as_deref()), "/inbox?project=my%20app&q=a%26b");
        assert_eq!(query_param("q=deploy+to+prod", "q").as_deref(), Some("deploy to prod"));
        assert_eq!(query_param(search, "error").as_deref(), Some(""));
        assert_eq!(query_param(search, "code"), None);
    }

    #[test]
    fn only_paths_of_this_site_are_followed_after_sign_in() {
        for local in ["/inbox", "/inbox?status=pending&sort=deadline", "/questions/0190", "/", "/a//b"] {
            assert_eq!(safe_next(Some(local)), local);
        }
        for foreign in [
            "//evil.example",
            "/\\evil.example",
            "/\t/evil.example/",
            "/\n/evil.example",
            "/inbox\r\nSet-Cookie: x=y",
            "/in box",
            "https://evil.example",
            "javascript:alert(1)",
            "\\\\evil.example",
            "inbox",
            "",
            " /inbox",
        ] {
            assert_eq!(safe_next(Some(foreign)), DEFAULT_NEXT, "{foreign:?} was followed");
        }
        assert_eq!(safe_next(None), DEFAULT_NEXT);
    }

    #[test]
    fn error_codes_become_fixed_sentences_and_anything_else_a_generic_one() {
        assert_eq!(sign_in_error_message(sign_in_error::WRONG_PASSWORD, None), "Wrong username or password.");
        assert_eq!(
            sign_in_error_message(sign_in_error::RATE_LIMITED, Some("12")),
            "Too many sign-in attempts. Try again in 12 s."
        );
        assert_eq!(
            sign_in_error_message(sign_in_error::RATE_LIMITED, Some("soon, at evil.example")),
            "Too many sign-in attempts. Try again later."
        );
        assert_eq!(
            sign_in_error_message("Call +1 555 0100 to unlock your account", None),
            "Sign-in failed. Try again."
        );
        assert_eq!(answer_error_message("conflict", false), "This question was already answered or closed.");
        assert!(answer_error_message("conflict", true).contains("claim"), "a pending question was not answered");
        assert_eq!(answer_error_message("Your account is locked", true), "The answer could not be saved. Try again.");
    }
}
