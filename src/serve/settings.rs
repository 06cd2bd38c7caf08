//! Serve's settings from `serve:` in pap.yaml and the command line, which wins over them. A
//! reload takes the new `serve:` values (but those the command line gave): the worker's
//! concurrency, the grace period, the rescan, settle and retention intervals.

use std::time::Duration;

use super::log::LogFormat;
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
    pub invocation_retention: Duration,
    pub notification_retention: Duration,
    pub inbox_retention: Duration,
    pub audit_retention: Duration,
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
            invocation_retention: Duration::ZERO,
            notification_retention: Duration::ZERO,
            inbox_retention: Duration::ZERO,
            audit_retention: Duration::ZERO,
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
        set(
            "serve.invocation_retention",
            &mut self.invocation_retention,
            serve.invocation_retention,
        );
        // An approval request can be answered until its invocation expires, and is found
        // through its notification.
        set(
            "serve.notification_retention",
            &mut self.notification_retention,
            serve
                .notification_retention
                .max(config.approval_timeout * 2),
        );
        set(
            "serve.inbox_retention",
            &mut self.inbox_retention,
            serve.inbox_retention,
        );
        set(
            "serve.audit_retention",
            &mut self.audit_retention,
            serve.audit_retention,
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

    /// pap.yaml's values that the command line overrules, as `setting: --option VALUE wins
    /// over pap.yaml's VALUE` (a reload logs them, so that such a change is not silently
    /// without effect).
    pub fn overruled(&self, config: &Config) -> Vec<String> {
        let mut out = Vec::new();
        let serve = &config.serve;
        if let Some(n) = self.overrides.max_concurrent
            && n != serve.max_concurrent
        {
            out.push(format!(
                "serve.max_concurrent: --max-concurrent {n} wins over pap.yaml's {}",
                serve.max_concurrent
            ));
        }
        if let Some(g) = self.overrides.grace
            && g != serve.grace_period
        {
            out.push(format!(
                "serve.grace_period: --grace {} wins over pap.yaml's {}",
                shown(g),
                shown(serve.grace_period)
            ));
        }
        if let (Some(l), Some(a)) = (&self.overrides.listen, &config.listen.address)
            && l != a
        {
            out.push(format!(
                "listen.address: --listen {l} wins over pap.yaml's {a}"
            ));
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_takes_the_new_values_but_those_the_command_line_gave() {
        let mut config = Config::default();
        let overrides = Overrides {
            grace: Some(Duration::from_secs(3)),
            ..Overrides::default()
        };
        let mut s = Settings::new(&config, overrides, false, LogFormat::Human);
        assert_eq!((s.max_concurrent, s.grace), (4, Duration::from_secs(3)));
        config.serve.max_concurrent = 9;
        config.serve.grace_period = Duration::from_secs(60);
        config.serve.spool_settle = Duration::from_millis(250);
        let changed = s.reconfigure(&config);
        assert_eq!(
            changed,
            [
                "serve.spool_settle 1s → 250ms",
                "serve.max_concurrent 4 → 9"
            ]
        );
        assert_eq!(s.grace, Duration::from_secs(3), "--grace wins");
        assert_eq!(
            s.overruled(&config),
            ["serve.grace_period: --grace 3s wins over pap.yaml's 1m"]
        );
        assert!(s.reconfigure(&config).is_empty());
        // The ledger keeps rows at least twice the idempotency TTL.
        config.idempotency_ttl = Duration::from_secs(40 * 24 * 3600);
        s.reconfigure(&config);
        assert_eq!(s.ledger_retention, Duration::from_secs(80 * 24 * 3600));
    }
}
