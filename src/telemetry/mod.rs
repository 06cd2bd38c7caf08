//! Exporting traces: the composition root's side of `pap_engine::telemetry`. When
//! an endpoint is configured, it installs an OpenTelemetry tracer provider whose batches go
//! over OTLP HTTP/protobuf, and enables the engine's spans; otherwise it installs nothing, and
//! the engine makes no span at all.
//!
//! Configured by the standard variables, which win over `traces:` in pap.yaml:
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` (then `/v1/traces` is
//! added), `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER` and `_ARG`, `OTEL_BSP_*` (read by the SDK when pap leaves a setting
//! unset), and `OTEL_SDK_DISABLED` and `OTEL_TRACES_EXPORTER=none` (read here). Headers may
//! hold credentials: they are never logged nor shown.
//!
//! Decisions never wait on an export: spans wait in a bounded queue that a thread of the SDK
//! empties, and a span that finds the queue full is dropped and counted
//! (`pap_trace_spans_dropped_total`), as is a batch the collector did not take.

mod export;

use std::sync::atomic::{AtomicU64, Ordering};

use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::manifest::compiled::TraceConfig;

static DROPPED: AtomicU64 = AtomicU64::new(0);
static FAILED_EXPORTS: AtomicU64 = AtomicU64::new(0);

/// Spans dropped because the export queue was full.
pub fn spans_dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Batches the collector did not take (an error, a refusal, no answer).
pub fn failed_exports() -> u64 {
    FAILED_EXPORTS.load(Ordering::Relaxed)
}

/// Where traces go, as worked out from the environment and pap.yaml.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Plan {
    Off(&'static str),
    /// Export to the endpoint (`None`: the variables name it, the SDK reads them).
    Export {
        endpoint: Option<String>,
        shown: String,
    },
}

/// Whether and where to export, from `env` (the process's variables) and `config`.
pub(crate) fn plan(config: &TraceConfig, env: &dyn Fn(&str) -> Option<String>) -> Plan {
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Plan::Off("OTEL_SDK_DISABLED is true");
    }
    match env("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
        Some("none") => return Plan::Off("OTEL_TRACES_EXPORTER is none"),
        None | Some("otlp") | Some("") => {}
        Some(_) => {
            return Plan::Off(
                "OTEL_TRACES_EXPORTER names an exporter pap does not have (only otlp)",
            );
        }
    }
    let from_env = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .filter(|v| !v.trim().is_empty())
        .or_else(|| {
            env("OTEL_EXPORTER_OTLP_ENDPOINT")
                .filter(|v| !v.trim().is_empty())
                .map(|base| format!("{}/v1/traces", base.trim_end_matches('/')))
        });
    match (from_env, &config.endpoint) {
        (Some(url), _) => Plan::Export {
            endpoint: None,
            shown: shown_url(&url),
        },
        (None, Some(url)) => Plan::Export {
            endpoint: Some(url.clone()),
            shown: shown_url(url),
        },
        (None, None) => Plan::Off("no endpoint (traces.endpoint, OTEL_EXPORTER_OTLP_ENDPOINT)"),
    }
}

/// An endpoint as logged: without credentials in it (user:password@, a query).
pub(crate) fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => "(an endpoint that is not a URL)".to_owned(),
    }
}

/// The installed exporter: dropping it exports what is queued, for at most a few seconds,
/// then stops it. Drop it while the runtime it was installed on still runs (its requests run
/// there).
pub struct Installed {
    provider: SdkTracerProvider,
}

impl Drop for Installed {
    fn drop(&mut self) {
        match self
            .provider
            .shutdown_with_timeout(std::time::Duration::from_secs(5))
        {
            Ok(()) => tracing::debug!("traces: the last spans were handed to the collector"),
            Err(e) => {
                tracing::warn!(error = %e, "traces: the last spans may not have been exported")
            }
        }
    }
}

/// Installs the exporter when `config` and the environment ask for one, on the runtime
/// `rt` (its HTTP requests run there). Logs the decision once.
pub fn install(config: &TraceConfig, rt: &tokio::runtime::Handle) -> Option<Installed> {
    let env = |name: &str| std::env::var(name).ok();
    match plan(config, &env) {
        Plan::Off(why) => {
            tracing::debug!(why, "traces: off");
            None
        }
        Plan::Export { endpoint, shown } => {
            match export::provider(config, endpoint.as_deref(), rt.clone()) {
                Ok(provider) => {
                    opentelemetry::global::set_tracer_provider(provider.clone());
                    pap_engine::telemetry::enable();
                    tracing::info!(endpoint = %shown, "traces: exporting over OTLP HTTP/protobuf");
                    Some(Installed { provider })
                }
                Err(_) => {
                    // The error may quote the endpoint, credentials and all: not logged.
                    tracing::error!(endpoint = %shown, "traces: off, the exporter could not be made (is the endpoint a valid URL, with its password percent-encoded?)");
                    None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn the_variables_win_and_credentials_are_not_shown() {
        let config = TraceConfig {
            endpoint: Some("http://collector:4318/v1/traces".into()),
            ..TraceConfig::default()
        };
        assert_eq!(
            plan(&config, &env(&[])),
            Plan::Export {
                endpoint: Some("http://collector:4318/v1/traces".into()),
                shown: "http://collector:4318/v1/traces".into()
            }
        );
        assert_eq!(
            plan(
                &config,
                &env(&[(
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    "https://u:secret@otel.example/"
                )])
            ),
            Plan::Export {
                endpoint: None,
                shown: "https://otel.example/v1/traces".into()
            }
        );
        assert!(matches!(
            plan(&config, &env(&[("OTEL_SDK_DISABLED", "true")])),
            Plan::Off(_)
        ));
        assert!(matches!(
            plan(&config, &env(&[("OTEL_TRACES_EXPORTER", "none")])),
            Plan::Off(_)
        ));
        assert!(matches!(
            plan(&TraceConfig::default(), &env(&[])),
            Plan::Off(_)
        ));
    }
}
