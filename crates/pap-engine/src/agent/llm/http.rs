//! One provider request: POST JSON, retried inside the attempt on HTTP 429 and 5xx (and on a
//! dropped connection), honouring `retry-after`, and never past the attempt's deadline.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::clock::Clock;

/// Retries of one request beyond the first try.
const MAX_RETRIES: u32 = 5;
/// The first pause when the server gives no `retry-after`; doubles per retry.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
/// Error bodies are quoted in the reason up to this length.
const BODY_QUOTE: usize = 300;

pub(super) struct Request<'a> {
    pub client: &'a reqwest::Client,
    pub url: String,
    pub headers: HeaderMap,
    pub body: &'a Value,
    /// The attempt's end, on the runtime clock.
    pub(crate) deadline_ms: i64,
    pub clock: &'a Clock,
}

/// Why a request failed for good (after its retries within the attempt), and whether
/// another attempt could help: one the provider refused as unauthorised, forbidden, not
/// found or malformed would be refused again (a wrong key, base URL or model).
#[derive(Debug)]
pub(super) struct Failed {
    pub why: String,
    pub(crate) permanent: bool,
}

impl From<String> for Failed {
    fn from(why: String) -> Failed {
        Failed {
            why,
            permanent: false,
        }
    }
}

/// The parsed JSON body of a 2xx answer, and how long the request took.
pub(super) async fn post(req: Request<'_>) -> Result<(Value, Duration), Failed> {
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    let mut tries = 0;
    loop {
        tries += 1;
        let sent = req
            .client
            .post(&req.url)
            .headers(req.headers.clone())
            .json(req.body)
            .send()
            .await;
        let (why, wait) = match sent {
            Ok(resp) if resp.status().is_success() => {
                let bytes = resp
                    .bytes()
                    .await
                    .map_err(|e| Failed::from(format!("reading the answer of {}: {e}", req.url)))?;
                let value = serde_json::from_slice(&bytes).map_err(|e| {
                    format!(
                        "{} answered with something that is not JSON ({e}): {}",
                        req.url,
                        quote(&bytes)
                    )
                })?;
                return Ok((value, started.elapsed()));
            }
            Ok(resp) => {
                let status = resp.status();
                let wait = retry_after(resp.headers());
                let body = resp.bytes().await.unwrap_or_default();
                let why = format!("{} answered HTTP {status}: {}", req.url, quote(&body));
                if !retryable(status) {
                    return Err(Failed {
                        why,
                        permanent: permanent(status),
                    });
                }
                (why, wait)
            }
            Err(e) if e.is_connect() || e.is_timeout() || e.is_request() => {
                (format!("{}: {}", req.url, error_chain(&e)), None)
            }
            Err(e) => return Err(format!("{}: {}", req.url, error_chain(&e)).into()),
        };
        let wait = wait.unwrap_or(pause);
        pause *= 2;
        let left = req.deadline_ms.saturating_sub(req.clock.now_ms());
        if tries > MAX_RETRIES {
            return Err(format!("{why} (gave up after {tries} tries)").into());
        }
        if wait.as_millis() as i64 >= left {
            return Err(format!(
                "{why} (a retry after {} s would pass the runtime limit)",
                wait.as_secs_f64()
            )
            .into());
        }
        req.clock.sleep(wait).await;
    }
}

/// An answer that the same request would get again.
fn permanent(status: StatusCode) -> bool {
    matches!(
        status,
        StatusCode::BAD_REQUEST
            | StatusCode::UNAUTHORIZED
            | StatusCode::FORBIDDEN
            | StatusCode::NOT_FOUND
    )
}

fn retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

/// `retry-after` as seconds or an HTTP date (RFC 9110 section 10.2.3); Anthropic and OpenAI
/// also send `retry-after-ms`, which wins when present.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text("retry-after")?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    // An HTTP date is on the provider's wall clock, which the system's follows; the injected
    // clock (fast or fake in tests) would misread it.
    #[allow(clippy::disallowed_methods)]
    let now = jiff::Timestamp::now();
    Some(Duration::try_from(when.duration_since(now)).unwrap_or(Duration::ZERO))
}

fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".into();
    }
    // Redacted later, with the rest of the attempt's failure: never cut inside a word.
    crate::text::clip_whole(text, BODY_QUOTE)
}

/// reqwest's top-level message is vague ("error sending request"); the causes say why.
use crate::http_client::error_chain;

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert("retry-after-ms", HeaderValue::from_static("1500"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(1500)));
        let mut past = HeaderMap::new();
        past.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&past), Some(Duration::ZERO));
    }

    #[test]
    fn only_429_and_5xx_are_retried() {
        assert!(retryable(StatusCode::TOO_MANY_REQUESTS));
        assert!(retryable(StatusCode::SERVICE_UNAVAILABLE));
        assert!(!retryable(StatusCode::BAD_REQUEST));
        assert!(!retryable(StatusCode::UNAUTHORIZED));
        assert!(permanent(StatusCode::UNAUTHORIZED) && permanent(StatusCode::NOT_FOUND));
        assert!(!permanent(StatusCode::CONFLICT) && !permanent(StatusCode::TOO_MANY_REQUESTS));
    }
}
