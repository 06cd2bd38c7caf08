//! A reload (a manifest changed, or SIGHUP): every setting serve can change while it runs is
//! applied, and those it cannot are named. It is refused as a whole, the running set kept,
//! when the manifests have errors or the listener cannot have what they ask (a principal's
//! variable unset or its credential file unreadable, an adapter's secret missing, a TLS
//! file broken, a non-loopback listener left without principals): an error line, and the
//! `reload_refused` condition until a reload succeeds. Otherwise the listener's principals
//! go in force first, then the project, serve's settings, and a warning for each start-only
//! setting that differs from the one in force (`restart_needed`). `manifests reloaded` is
//! logged last, once all of it is in force.

use std::sync::Arc;

use super::Server;
use super::conditions::Condition;
use super::restart_only::Fixed;
use crate::diagnostics::{self, HumanStyle};
use crate::manifest;

impl Server {
    /// Recompiles the manifests and applies them, or refuses them as a whole.
    pub(super) fn reload(&mut self) {
        let loaded = manifest::load(&self.root, &[]);
        let errors = loaded.errors();
        let project = match loaded.project {
            Some(project) if errors.is_empty() => project,
            _ => {
                let text = diagnostics::render_human(
                    &errors,
                    |f| loaded.sources.get(f).map(String::as_str),
                    HumanStyle { color: false },
                );
                for d in &errors {
                    tracing::error!(
                        file = %d.file,
                        line = d.pos.line,
                        column = d.pos.column,
                        code = d.code,
                        "{}",
                        d.message
                    );
                }
                tracing::error!(
                    errors = errors.len(),
                    "the changed manifests have errors; the previous set keeps running\n{text}"
                );
                let first = errors
                    .first()
                    .map(|d| format!(" (first: {}:{}: {})", d.file, d.pos.line, d.message))
                    .unwrap_or_default();
                self.refuse(format!(
                    "the manifests have {} error(s){first}",
                    errors.len()
                ));
                return;
            }
        };
        let env = |name: &str| std::env::var(name).ok();
        let prepared = match self.listening.as_ref().map(|l| l.prepare(&project, env)) {
            None => None,
            Some(Ok(p)) => Some(p),
            Some(Err(why)) => {
                tracing::error!(error = %why, "reload refused: nothing of it applies, the previous set keeps running");
                self.refuse(why.to_string());
                return;
            }
        };

        // Nothing below can fail: the listener first, so a revoked token dies first.
        let applied = match (&self.listening, prepared) {
            (Some(l), Some(p)) => l.commit(p),
            _ => Default::default(),
        };
        for (principal, n) in &applied.console_sessions {
            tracing::info!(principal = %principal, sessions = n, "console sessions ended: the principal is gone or its credential changed");
        }
        if applied.mcp_sessions > 0 {
            tracing::info!(
                sessions = applied.mcp_sessions,
                "MCP sessions ended: their principal is gone, changed its credential or lost its scopes"
            );
        }
        self.runtime.project = Arc::new(project);
        super::relimit_waiting(&self.runtime);
        self.worker.set_runtime(self.runtime.clone());
        if let Some(shared) = &self.shared_project {
            *shared.write().unwrap_or_else(|p| p.into_inner()) = self.runtime.project.clone();
        }
        let config = &self.runtime.project.config;
        let before = self.settings.max_concurrent;
        let changed = self.settings.reconfigure(config);
        if self.settings.max_concurrent != before {
            self.worker.set_max(self.settings.max_concurrent);
        }
        if !changed.is_empty() {
            tracing::info!(changed = %changed.join(", "), "serve settings changed");
        }
        let overruled = self.settings.overruled(config);
        if !overruled.is_empty() {
            tracing::info!(settings = %overruled.join("; "), "the command line wins over pap.yaml");
        }
        let configured = Fixed::of(
            config,
            &self.settings.overrides,
            self.database_url,
            self.listening.is_some(),
        );
        let pending = self.fixed.pending(&configured);
        for p in &pending {
            tracing::warn!(
                setting = p.setting,
                running = %p.running,
                configured = %p.configured,
                "needs a restart to apply: serve keeps the value it started with"
            );
        }
        let now = self.now_text();
        if pending.is_empty() {
            self.conditions.clear(Condition::RestartNeeded);
        } else {
            let list: Vec<String> = pending.iter().map(ToString::to_string).collect();
            self.conditions.set(
                Condition::RestartNeeded,
                format!(
                    "pap.yaml changed settings that apply only when serve restarts: {}",
                    list.join(", ")
                ),
                &now,
            );
        }
        self.conditions.clear(Condition::ReloadRefused);
        self.loaded_at = now;
        let names = |v: &[String]| v.join(",");
        let p = &applied.principals;
        tracing::info!(
            triggers = self.runtime.project.triggers.len(),
            agents = self.runtime.project.agents.len(),
            schedules = self.runtime.project.schedules.len(),
            principals_added = %names(&p.added),
            principals_removed = %names(&p.removed),
            principals_changed = %names(&p.changed),
            anonymous_changed = p.anonymous,
            sessions_ended = applied.console_sessions.values().sum::<usize>() + applied.mcp_sessions,
            pending_restart = pending.len(),
            "manifests reloaded"
        );
        self.metrics.reloaded(true, self.runtime.clock.now_ms());
    }

    /// Records a refused reload: the set loaded before keeps running.
    fn refuse(&mut self, why: String) {
        self.metrics.reloaded(false, self.runtime.clock.now_ms());
        let now = self.now_text();
        self.conditions.set(
            Condition::ReloadRefused,
            format!(
                "the last reload was refused, the set loaded at {} keeps running: {why}",
                self.loaded_at
            ),
            &now,
        );
    }

    fn now_text(&self) -> String {
        format!("{:.0}", self.runtime.clock.now())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_server::{project, server, trigger};
    use super::Condition;

    fn trigger_ids(server: &super::Server) -> Vec<String> {
        server
            .runtime
            .project
            .triggers
            .iter()
            .map(|t| t.id.clone())
            .collect()
    }

    #[test]
    fn a_changed_manifest_is_in_force_after_a_reload() {
        let dir = project(&[("triggers/a.yaml", &trigger("a", "host.disk.full"))]);
        let mut server = server(dir.path());
        std::fs::write(
            dir.path().join("triggers/b.yaml"),
            format!("pap_version: \"0.2\"\n{}", trigger("b", "host.cpu.hot")),
        )
        .unwrap();

        server.reload();

        assert_eq!(trigger_ids(&server), ["a", "b"]);
        assert!(!server.conditions.holds(Condition::ReloadRefused));
    }

    #[test]
    fn a_manifest_with_errors_is_refused_whole_and_the_set_in_force_keeps_running() {
        let dir = project(&[("triggers/a.yaml", &trigger("a", "host.disk.full"))]);
        let mut server = server(dir.path());
        std::fs::write(
            dir.path().join("triggers/b.yaml"),
            "pap_version: \"0.2\"\ntrigger:\n  id: b\n  agent: nobody\n",
        )
        .unwrap();

        server.reload();

        assert_eq!(trigger_ids(&server), ["a"]);
        assert!(server.conditions.holds(Condition::ReloadRefused));
    }
}
