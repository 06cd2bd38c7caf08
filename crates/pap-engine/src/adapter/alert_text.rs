//! What an on-call person reads first about an alert: an adapter with
//! `alert: true` (both presets) adds to each event's `data` a `summary`, the alert's name,
//! severity, instance and summary (or description) annotation in one line, and `links`, the
//! places to go next (the alert's source, its runbook, its dashboard, a silence for it).
//!
//! Every part comes from the webhook body, so it is untrusted: a link is kept only when it is
//! an `http` or `https` URL of sensible length (no `javascript:` link reaches the console),
//! and the summary is one line, clipped. Terminals and pages escape both as any event text.

use serde_json::{Value, json};

/// The longest summary kept, in characters.
const SUMMARY_CHARS: usize = 300;
/// The longest link kept, in bytes.
const LINK_BYTES: usize = 2048;

/// `Resolved: ` when resolved, then `NAME (SEVERITY) on INSTANCE: TEXT`, each part there only
/// when the alert has it; `None` for an element without labels (not an alert).
pub(crate) fn summary(item: &Value) -> Option<String> {
    let labels = item.get("labels")?.as_object()?;
    let label = |name: &str| {
        labels
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let annotation = |name: &str| {
        item.get("annotations")
            .and_then(|a| a.get(name))
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
    };
    let mut out = String::new();
    if item.get("status").and_then(Value::as_str) == Some("resolved") {
        out.push_str("Resolved: ");
    }
    out.push_str(label("alertname").unwrap_or("alert"));
    if let Some(severity) = label("severity") {
        out.push_str(&format!(" ({severity})"));
    }
    if let Some(instance) = label("instance") {
        out.push_str(&format!(" on {instance}"));
    }
    if let Some(text) = annotation("summary").or_else(|| annotation("description")) {
        out.push_str(": ");
        out.push_str(text);
    }
    // One line: a templated annotation often spans several.
    let line: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(crate::text::clip_whole(&line, SUMMARY_CHARS))
}

/// `[{"title", "url"}]`: the alert's source (`generatorURL`), runbook (`runbook_url`
/// annotation), dashboard and panel (Grafana's URLs, or a `dashboard` annotation), and a
/// silence (Grafana's `silenceURL`, else one on Alertmanager's `externalURL` matching the
/// alert's labels). Only `http(s)` URLs.
pub(crate) fn links(item: &Value, body: &Value) -> Vec<Value> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let annotation = |name: &str| text(item.get("annotations").and_then(|a| a.get(name)));
    let silence = text(item.get("silenceURL")).or_else(|| alertmanager_silence(item, body));
    let candidates = [
        ("source", text(item.get("generatorURL"))),
        (
            "runbook",
            annotation("runbook_url").or_else(|| annotation("runbook")),
        ),
        (
            "dashboard",
            text(item.get("dashboardURL")).or_else(|| annotation("dashboard")),
        ),
        ("panel", text(item.get("panelURL"))),
        ("silence", silence),
    ];
    candidates
        .into_iter()
        .filter_map(|(title, url)| {
            let url = url?;
            web_url(&url).then(|| json!({"title": title, "url": url}))
        })
        .collect()
}

/// What an alert adapter put first in the event's data (see `adapter::alert_text`): its
/// one-line summary, and the links to go to (only web URLs).
pub fn lead(event: &Value) -> Option<(&str, Vec<(&str, &str)>)> {
    let data = event.get("data")?;
    let summary = data.get("summary")?.as_str()?;
    let links = data
        .get("links")?
        .as_array()?
        .iter()
        .filter_map(|l| {
            let url = l.get("url")?.as_str().filter(|u| web_url(u))?;
            Some((l.get("title")?.as_str()?, url))
        })
        .collect();
    Some((summary, links))
}

/// Whether `url` is one a person may be sent to: `http` or `https`, one line, not too long.
pub fn web_url(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://"))
        && url.len() <= LINK_BYTES
        && !url.chars().any(|c| c.is_control() || c.is_whitespace())
}

/// A new silence in Alertmanager's UI, prefilled with the alert's labels.
fn alertmanager_silence(item: &Value, body: &Value) -> Option<String> {
    let base = body.get("externalURL")?.as_str()?.trim_end_matches('/');
    let labels = item.get("labels")?.as_object()?;
    let mut matchers: Vec<String> = labels
        .iter()
        .filter_map(|(k, v)| Some(format!("{k}=\"{}\"", v.as_str()?.replace('"', "\\\""))))
        .collect();
    matchers.sort();
    let filter = format!("{{{}}}", matchers.join(","));
    Some(format!("{base}/#/silences/new?filter={}", percent(&filter)))
}

/// Percent-encodes all but the URL-unreserved characters.
fn percent(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert() -> Value {
        json!({
            "status": "firing",
            "labels": {"alertname": "HighLatency", "severity": "page", "instance": "api:8000"},
            "annotations": {"summary": "p99 above\n 2s", "runbook_url": "https://runbooks/lat"},
            "generatorURL": "http://prom:9090/graph?g0.expr=x",
        })
    }

    #[test]
    fn the_summary_leads_with_name_severity_instance_and_the_annotation() {
        assert_eq!(
            summary(&alert()).unwrap(),
            "HighLatency (page) on api:8000: p99 above 2s"
        );
        let mut resolved = alert();
        resolved["status"] = json!("resolved");
        resolved["labels"] = json!({"alertname": "DiskFull"});
        resolved["annotations"] = json!({"description": "sda1 at 99%"});
        assert_eq!(
            summary(&resolved).unwrap(),
            "Resolved: DiskFull: sda1 at 99%"
        );
        assert_eq!(summary(&json!({"labels": {}})).unwrap(), "alert");
        assert_eq!(summary(&json!({"x": 1})), None);
    }

    #[test]
    fn links_are_web_urls_only_and_a_silence_matches_the_labels() {
        let body = json!({"externalURL": "http://am:9093/"});
        let got = links(&alert(), &body);
        let titles: Vec<&str> = got.iter().map(|l| l["title"].as_str().unwrap()).collect();
        assert_eq!(titles, ["source", "runbook", "silence"]);
        let silence = got[2]["url"].as_str().unwrap();
        assert!(
            silence.starts_with(
                "http://am:9093/#/silences/new?filter=%7Balertname%3D%22HighLatency%22%2Cinstance"
            ),
            "{silence}"
        );
        let mut hostile = alert();
        hostile["annotations"]["runbook_url"] = json!("javascript:alert(1)");
        hostile["generatorURL"] = json!("http://x/\nSet-Cookie: a");
        let got = links(&hostile, &json!({}));
        assert!(got.is_empty(), "{got:?}");
    }
}
