//! Serve's settings from `serve:` in pap.yaml and the command line, which wins over them. A
//! reload takes the new `serve:` values (but those the command line gave): the worker's
//! concurrency, the grace period, the rescan, settle and retention intervals.

use std::time::Duration;

use crate::cli::LogFormat;
use crate::manifest::compiled::Config;

/// What the command line gave; it wins over pap.yaml at start and at every reload.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub max_concurrent: Option<usize>,
    pub grace: Option<Duration>,
    /// `--listen`.
    pub listen: Option<String>,
    /// `--state` (or `PAP_STATE`): the state dir is not `state_dir` of pap.yaml.
    pub state_dir: bool,
}

pub struct Settings {
    pub max_concurrent: usize,
    pub grace: Duration,
    pub rescan: Duration,
    pub done_retention: Duration,
    pub ledger_retention: Duration,
    /// How long a file written in place must be closed and unchanged before it is claimed.
    pub spool_settle: Duration,
    pub once: bool,
    pub log_format: LogFormat,
    /// `HOST:PORT` for the HTTP listener (`--listen`, else `listen.address`), if any. Fixed
    /// for the life of the process.
    pub listen: Option<String>,
    pub overrides: Overrides,
}

impl Settings {
    pub fn new(
        config: &Config,
        overrides: Overrides,
        once: bool,
        log_format: LogFormat,
    ) -> Settings {
        let mut settings = Settings {
            max_concurrent: 1,
            grace: Duration::ZERO,
            rescan: Duration::ZERO,
            done_retention: Duration::ZERO,
            ledger_retention: Duration::ZERO,
            spool_settle: Duration::ZERO,
            once,
            log_format,
            listen: overrides
                .listen
                .clone()
                .or_else(|| config.listen.address.clone()),
            overrides,
        };
        settings.reconfigure(config);
        settings
    }

    /// Takes `config`'s values, but those the command line gave; returns what changed, as
    /// `setting old → new` for the log.
    pub fn reconfigure(&mut self, config: &Config) -> Vec<String> {
        let serve = &config.serve;
        let mut changed = Vec::new();
        let mut set = |name: &str, field: &mut Duration, value: Duration| {
            if *field != value {
                changed.push(format!("{name} {} → {}", shown(*field), shown(value)));
                *field = value;
            }
        };
        set(
            "serve.grace_period",
            &mut self.grace,
            self.overrides.grace.unwrap_or(serve.grace_period),
        );
        set(
            "serve.rescan_interval",
            &mut self.rescan,
            serve.rescan_interval,
        );
        set(
            "serve.done_retention",
            &mut self.done_retention,
            serve.done_retention,
        );
        set(
            "serve.spool_settle",
            &mut self.spool_settle,
            serve.spool_settle,
        );
        // A live claim's reason reads its ledger row, so rows last at least as long.
        // Twice the TTL: a claim kept longer for a colliding pair (see `Tx::extend_claim`)
        // still finds the row that names its pair.
        set(
            "serve.ledger_retention",
            &mut self.ledger_retention,
            serve.ledger_retention.max(config.idempotency_ttl * 2),
        );
        let max = self
            .overrides
            .max_concurrent
            .unwrap_or(serve.max_concurrent);
        if self.max_concurrent != max {
            changed.push(format!(
                "serve.max_concurrent {} → {max}",
                self.max_concurrent
            ));
            self.max_concurrent = max;
        }
        changed
    }
}

/// A duration as pap.yaml writes it (`7d`, `1s`), or in milliseconds below a second.
fn shown(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        crate::manifest::duration::format(d)
    } else {
        format!("{d:?}")
    }
}
