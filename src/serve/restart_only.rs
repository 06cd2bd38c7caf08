//! The settings of pap.yaml serve takes at start only: where its state, store and spool are
//! (held open, locked and claimed into for its whole life), the listener's address, whether
//! it speaks TLS, its connection bound, and where its traces go (the exporter is made once). A reload that changes one of them applies
//! everything else and names these: a warning each, and the `restart_needed` condition
//! (`pap status`, `/metrics`) until serve restarts or the change is reverted. A setting the
//! command line (or `PAP_DATABASE_URL`) gives is not pap.yaml's, so its change is no change.

use crate::manifest::compiled::Config;

use super::settings::Overrides;

/// A start-only setting that differs from the value in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    pub setting: &'static str,
    pub running: String,
    pub configured: String,
}

impl std::fmt::Display for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({} → {})",
            self.setting, self.running, self.configured
        )
    }
}

/// The start-only settings of one configuration, as shown in messages (no password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fixed(Vec<(&'static str, String)>);

impl Fixed {
    /// `config`'s start-only settings, but those `overrides` or `database_url` (the
    /// `PAP_DATABASE_URL` serve started with) give; the listener's only while `listening`.
    pub(super) fn of(
        config: &Config,
        overrides: &Overrides,
        database_url: bool,
        listening: bool,
    ) -> Fixed {
        let or_default = |v: Option<String>| v.unwrap_or_else(|| "(default)".into());
        let mut entries = Vec::new();
        if !overrides.state_dir {
            entries.push(("state_dir", config.state_dir.display().to_string()));
        }
        if !database_url {
            entries.push((
                "store",
                config.store.as_deref().map_or_else(
                    || "(redb in the state dir)".into(),
                    crate::database_url::redact,
                ),
            ));
        }
        entries.push((
            "spool_dir",
            or_default(config.spool_dir.as_ref().map(|d| d.display().to_string())),
        ));
        if overrides.listen.is_none() {
            entries.push((
                "listen.address",
                config
                    .listen
                    .address
                    .clone()
                    .unwrap_or_else(|| "(none: no HTTP)".into()),
            ));
        }
        if listening {
            let tls = if config.listen.tls.is_some() {
                "on"
            } else {
                "off"
            };
            entries.push(("listen.tls", tls.into()));
            entries.push((
                "listen.max_connections",
                config.listen.max_connections.to_string(),
            ));
        }
        let t = &config.traces;
        entries.push((
            "traces",
            format!(
                "endpoint {}, service {}, queue {}",
                t.endpoint
                    .as_deref()
                    .map_or("(none)".into(), crate::telemetry::shown_url),
                t.service_name,
                t.max_queue
            ),
        ));
        Fixed(entries)
    }

    /// The settings `configured` changes from these (those in force since start).
    pub(super) fn pending(&self, configured: &Fixed) -> Vec<Pending> {
        self.0
            .iter()
            .filter_map(|(setting, running)| {
                let (_, now) = configured.0.iter().find(|(s, _)| s == setting)?;
                (now != running).then(|| Pending {
                    setting,
                    running: running.clone(),
                    configured: now.clone(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_pending_until_reverted_and_the_command_line_wins() {
        let start = Config::default();
        let mut next = Config::default();
        next.listen.address = Some("127.0.0.1:9000".into());
        next.listen.max_connections = 8;
        next.store = Some("postgres://pap:hunter2@db/pap".into());
        let none = Overrides::default();
        let fixed = Fixed::of(&start, &none, false, true);
        let pending = fixed.pending(&Fixed::of(&next, &none, false, true));
        let shown: Vec<String> = pending.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "store ((redb in the state dir) → postgres://pap:***@db/pap)",
                "listen.address ((none: no HTTP) → 127.0.0.1:9000)",
                "listen.max_connections (1024 → 8)",
            ]
        );
        assert!(
            fixed
                .pending(&Fixed::of(&start, &none, false, true))
                .is_empty()
        );
        // --listen and PAP_DATABASE_URL win: pap.yaml's address and store change nothing.
        let given = Overrides {
            listen: Some("127.0.0.1:0".into()),
            ..Overrides::default()
        };
        let fixed = Fixed::of(&start, &given, true, true);
        let pending = fixed.pending(&Fixed::of(&next, &given, true, true));
        assert_eq!(pending.len(), 1, "{pending:?}");
        assert_eq!(pending[0].setting, "listen.max_connections");
    }
}
