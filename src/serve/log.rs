//! Logging for `pap serve`: tracing to stderr, human or JSON lines. `PAP_LOG` takes an
//! env-filter directive (default `info`), e.g. `PAP_LOG=debug`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// How serve's log lines look. The CLI's `--log-format` (a clap enum in `cli`) maps onto it,
/// so that serve does not depend on the command line's types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Human,
    Json,
}

pub fn init(format: LogFormat) {
    init_at(format, "info");
}

/// As [`init`], showing `default` and up when `PAP_LOG` is not set (`pap mcp` logs only
/// warnings by default: a client shows its server's stderr to a person).
pub fn init_at(format: LogFormat, default: &str) {
    let filter = EnvFilter::try_from_env("PAP_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    let result = match format {
        LogFormat::Human => {
            let color = crate::term::colored(std::io::stderr().is_terminal());
            builder.with_ansi(color).try_init()
        }
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
    // Already set (a second call in one process) is harmless.
    let _ = result;
}
