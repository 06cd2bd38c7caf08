//! HTML for the console: every text from outside (event data, agent output, transcripts,
//! names) goes through [`esc`]; the layout loads only the console's own stylesheet and
//! script, so the Content-Security-Policy can forbid everything inline.

use std::fmt::Write as _;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// No inline script or style, nothing from elsewhere, no framing, forms only to here.
pub(super) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `text` safe inside HTML text and quoted attribute values.
pub(super) fn esc(text: &str) -> String {
    crate::text::markup(text)
}

/// A query-string value (percent-encoded).
pub(super) fn url_part(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Who is looking, for the header.
pub(super) struct Header<'a> {
    pub who: Option<&'a str>,
    /// The session's CSRF token, when logged in (for the logout form).
    pub csrf: Option<&'a str>,
}

/// A whole page: the navigation, `title`, and `body` (already HTML).
pub(super) fn page(title: &str, header: &Header<'_>, body: &str) -> Response {
    let mut o = String::with_capacity(body.len() + 2048);
    let _ = write!(
        o,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · pap</title><link rel=\"stylesheet\" href=\"/static/console.css\">\
         <script src=\"/static/console.js\" defer></script></head><body>\
         <header><nav><a class=\"brand\" href=\"/\">pap</a> \
         <a href=\"/\">Inbox</a> <a href=\"/approvals\">Approvals</a> \
         <a href=\"/invocations\">Invocations</a> <a href=\"/audit\">Audit</a> \
         <a href=\"/manifests\">Manifests</a></nav><div class=\"who\">",
        esc(title)
    );
    match (header.who, header.csrf) {
        (Some(who), Some(csrf)) => {
            let _ = write!(
                o,
                "{} <form method=\"post\" action=\"/logout\" class=\"inline\">\
                 <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
                 <button type=\"submit\">Log out</button></form>",
                esc(who),
                esc(csrf)
            );
        }
        (Some(who), None) => {
            let _ = write!(o, "{}", esc(who));
        }
        (None, _) => o.push_str("<a href=\"/login\">Log in</a>"),
    }
    let _ = writeln!(
        o,
        "</div></header><main><h1>{}</h1>{body}</main></body></html>",
        esc(title)
    );
    with_headers(StatusCode::OK, o)
}

/// An HTML answer with the console's security headers.
pub(super) fn with_headers(status: StatusCode, html: String) -> Response {
    let mut r = (status, html).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    r
}

/// Pretty JSON, escaped, in a `<pre>`.
pub(super) fn json_block(value: &serde_json::Value) -> String {
    format!(
        "<pre class=\"json\">{}</pre>",
        esc(&serde_json::to_string_pretty(value).unwrap_or_default())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&apos;x&apos;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        assert_eq!(esc("a\u{1b}[31m"), "a\u{FFFD}[31m");
    }
}
