//! `/metrics` in the format the scraper asks for. pap's metrics are kept by
//! prometheus-client, which writes OpenMetrics 1.0; Prometheus asks for that, and gets it.
//! Many other readers speak only the Prometheus text format 0.0.4 (`promtool check metrics`,
//! the Prometheus Python client's `text_string_to_metric_families`, many agents): read as
//! text, OpenMetrics' `info` type is unknown and a counter's family (`pap_events_received`,
//! whose samples are `pap_events_received_total`) has no samples of its own name, so the
//! samples come out untyped. So the answer is negotiated on `Accept` (the highest `q` wins;
//! OpenMetrics only when asked for, text 0.0.4 otherwise), and the text format is written
//! from the OpenMetrics text, family by family: a counter's `TYPE` and `HELP` name its
//! `_total` samples, an `info` is a gauge of its `_info` sample, `UNIT` lines, exemplars and
//! `# EOF` are dropped.

/// The two formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    OpenMetrics,
    Text,
}

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// What an `Accept` header asks for: OpenMetrics when it is acceptable and rated at
    /// least as high as the text format (Prometheus sends both, OpenMetrics first), the
    /// text format otherwise (no header, `*/*`, `text/plain`).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let (mut open, mut text) = (None::<f32>, None::<f32>);
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            let slot = match media.as_str() {
                "application/openmetrics-text" => &mut open,
                "text/plain" | "text/*" | "*/*" => &mut text,
                _ => continue,
            };
            *slot = Some(slot.map_or(q, |old| old.max(q)));
        }
        match open {
            Some(o) if o > 0.0 && o >= text.unwrap_or(0.0) => Format::OpenMetrics,
            _ => Format::Text,
        }
    }
}

/// The Prometheus text format 0.0.4 of an OpenMetrics text.
pub fn to_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // prometheus-client writes a family's HELP before its TYPE: the HELP waits for the TYPE
    // that says what the family is called in the text format.
    let mut help: Option<(&str, String)> = None;
    let flush = |help: &mut Option<(&str, String)>, out: &mut String| {
        if let Some((name, text)) = help.take() {
            out.push_str(&format!("# HELP {name} {text}\n"));
        }
    };
    for line in openmetrics.lines() {
        let Some(meta) = line.strip_prefix("# ") else {
            flush(&mut help, &mut out);
            if line.is_empty() {
                continue;
            }
            // A sample: an exemplar (` # {…} value`) is dropped; the rest reads the same.
            out.push_str(without_exemplar(line));
            out.push('\n');
            continue;
        };
        let mut words = meta.splitn(3, ' ');
        let (kind, name, rest) = (
            words.next().unwrap_or(""),
            words.next().unwrap_or(""),
            words.next().unwrap_or(""),
        );
        match kind {
            "HELP" => {
                flush(&mut help, &mut out);
                // OpenMetrics escapes `"` in HELP; the text format does not.
                help = Some((name, rest.replace("\\\"", "\"")));
            }
            "TYPE" => {
                let (to, kind) = match rest {
                    "counter" => (format!("{name}_total"), "counter"),
                    "info" => (format!("{name}_info"), "gauge"),
                    "gauge" | "histogram" | "summary" => (name.to_owned(), rest),
                    // stateset, gaugehistogram, unknown: no such type in 0.0.4.
                    _ => (name.to_owned(), "untyped"),
                };
                if let Some((of, text)) = help.take() {
                    let named = if of == name { to.as_str() } else { of };
                    out.push_str(&format!("# HELP {named} {text}\n"));
                }
                out.push_str(&format!("# TYPE {to} {kind}\n"));
            }
            // UNIT, EOF and anything else OpenMetrics adds.
            _ => flush(&mut help, &mut out),
        }
    }
    flush(&mut help, &mut out);
    out
}

/// A sample line without its exemplar: what comes before ` # ` outside a quoted label value.
fn without_exemplar(line: &str) -> &str {
    let bytes = line.as_bytes();
    let (mut quoted, mut escaped) = (false, false);
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b'#' if !quoted && i > 0 && bytes[i - 1] == b' ' => return line[..i - 1].trim_end(),
            _ => {}
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_name_their_total_and_info_is_a_gauge() {
        let open = "# HELP pap_events_received Events received, by route.\n# TYPE pap_events_received counter\npap_events_received_total{route=\"/v1/events\"} 3\n# HELP pap_build The pap build serving: its \\\"version\\\".\n# TYPE pap_build info\npap_build_info{version=\"0.1.0\"} 1\n# HELP pap_commit_seconds Commits.\n# TYPE pap_commit_seconds histogram\n# UNIT pap_commit_seconds seconds\npap_commit_seconds_bucket{le=\"+Inf\"} 2 # {trace_id=\"ab\"} 0.5\npap_commit_seconds_sum 0.25\npap_commit_seconds_count 2\n# EOF\n";
        let text = to_text(open);
        assert_eq!(
            text,
            "# HELP pap_events_received_total Events received, by route.\n# TYPE pap_events_received_total counter\npap_events_received_total{route=\"/v1/events\"} 3\n# HELP pap_build_info The pap build serving: its \"version\".\n# TYPE pap_build_info gauge\npap_build_info{version=\"0.1.0\"} 1\n# HELP pap_commit_seconds Commits.\n# TYPE pap_commit_seconds histogram\npap_commit_seconds_bucket{le=\"+Inf\"} 2\npap_commit_seconds_sum 0.25\npap_commit_seconds_count 2\n"
        );
    }

    #[test]
    fn an_exemplar_goes_and_a_hash_inside_a_label_value_stays() {
        assert_eq!(
            without_exemplar("a_total{x=\"1 # 2\\\"\"} 3 # {t=\"u\"} 1"),
            "a_total{x=\"1 # 2\\\"\"} 3"
        );
        assert_eq!(without_exemplar("a_total 3"), "a_total 3");
    }

    #[test]
    fn prometheus_gets_openmetrics_and_everyone_else_the_text_format() {
        let prometheus = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        assert_eq!(Format::negotiate(Some("text/plain")), Format::Text);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text")),
            Format::OpenMetrics
        );
        // Rated lower than the text format, or refused: text.
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0.1, text/plain")),
            Format::Text
        );
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text;q=0")),
            Format::Text
        );
    }
}
