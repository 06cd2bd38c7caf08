//! The secret values a loaded project knows of, gathered for redaction (see `redact`): what
//! its manifests name as credentials, looked up in pap's environment at every load.

use std::collections::{BTreeMap, BTreeSet};

use super::compiled::{Agent, Config, McpServerSpec, ModelSpec};
use super::compiled_notify::SinkTarget;
use crate::interpolate;
use crate::redact::{Redactor, looks_secret, percent_decode};

/// The secrets of a loaded project, looked up with `lookup` (pap's environment):
///
/// - each LLM agent's API key (`model.api_key_env`), whatever the variable's name;
/// - in `mcp_servers`, sink settings and command agents' `model.env`: the value of every
///   `${NAME}` whose NAME [looks secret](looks_secret) or is listed under `secrets:`,
///   and an `env` entry whose own name looks secret;
/// - header values that are credentials (by the header's name, or because they come from
///   the environment), and the credential after a scheme (`Bearer x`);
/// - the password of a URL (`https://user:pass@host`), and every `${NAME}` in a sink's
///   URL (a Slack webhook URL is itself the secret);
/// - the variables named in `secrets:`.
pub(crate) fn redactor_for(
    config: &Config,
    agents: &[Agent],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Redactor {
    let marked: BTreeSet<&str> = config.secrets.iter().map(String::as_str).collect();
    let mut s = Sources {
        lookup,
        marked,
        found: Vec::new(),
    };
    for name in &config.secrets {
        s.var(name);
    }
    for agent in agents {
        match &agent.model {
            ModelSpec::Anthropic(m) | ModelSpec::Openai(m) => s.var(&m.api_key_env),
            ModelSpec::Command { env, .. } => s.env(env),
        }
    }
    for (name, server) in &config.mcp_servers {
        match server {
            McpServerSpec::Stdio { env, .. } => s.env(env),
            McpServerSpec::Http { url, headers } => {
                s.url(&format!("mcp_servers.{name}"), url, false);
                s.headers(headers);
            }
        }
    }
    for sink in &config.notify.sinks {
        if let SinkTarget::Webhook {
            url,
            headers,
            topic,
            ..
        } = &sink.target
        {
            s.url(&format!("sinks.{}", sink.name), url, true);
            s.headers(headers);
            if let Some(topic) = topic {
                s.interpolated(topic, false);
            }
        }
    }
    Redactor::new(s.found)
}

/// Collects `(label, value)` pairs from a project.
struct Sources<'a> {
    lookup: &'a dyn Fn(&str) -> Option<String>,
    marked: BTreeSet<&'a str>,
    found: Vec<(String, String)>,
}

impl Sources<'_> {
    fn push(&mut self, label: &str, value: &str) {
        self.found.push((label.to_owned(), value.to_owned()));
    }

    fn var(&mut self, name: &str) {
        if let Some(value) = (self.lookup)(name) {
            self.push(name, &value);
        }
    }

    fn expanded(&self, template: &str) -> Option<String> {
        interpolate::expand(template, |n| (self.lookup)(n)).ok()
    }

    /// The `${NAME}` values of `template` that are secret (`all`: every one).
    fn interpolated(&mut self, template: &str, all: bool) {
        for name in interpolate::names(template) {
            if all || looks_secret(&name) || self.marked.contains(name.as_str()) {
                self.var(&name);
            }
        }
    }

    /// An `env` map (an MCP server's, a command agent's): secret references, and whole
    /// values of entries whose own name looks secret.
    fn env(&mut self, env: &BTreeMap<String, String>) {
        for (key, template) in env {
            self.interpolated(template, false);
            if (looks_secret(key) || self.marked.contains(key.as_str()))
                && let Some(value) = self.expanded(template)
            {
                self.push(key, &value);
            }
        }
    }

    /// Header values that carry a credential: the header's name says so (`Authorization`,
    /// `X-Api-Key`, `Cookie`), or the value comes from the environment. A literal
    /// `Accept: application/json` is not one, and is left alone everywhere.
    fn headers(&mut self, headers: &BTreeMap<String, String>) {
        for (name, template) in headers {
            self.interpolated(template, false);
            let credential = looks_secret(name)
                || name.eq_ignore_ascii_case("cookie")
                || !interpolate::names(template).is_empty();
            let Some(value) = self.expanded(template).filter(|_| credential) else {
                continue;
            };
            if let Some((_scheme, credential)) = value.trim().split_once(' ') {
                self.push(name, credential.trim());
            }
            self.push(name, &value);
        }
    }

    fn url(&mut self, label: &str, template: &str, all: bool) {
        self.interpolated(template, all);
        let Some(url) = self
            .expanded(template)
            .and_then(|u| reqwest::Url::parse(&u).ok())
        else {
            return;
        };
        if let Some(password) = url.password() {
            self.push(label, password);
            self.push(label, &percent_decode(password));
            let user = percent_decode(url.username());
            self.push(label, &format!("{user}:{}", percent_decode(password)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_s_secrets_come_from_keys_headers_urls_and_marked_names() {
        let env: BTreeMap<&str, &str> = [
            ("ANTHROPIC_API_KEY", "anthropic-key-1"),
            ("GH", "gh-value-123"),
            ("DB_PASSWORD", "db-password-9"),
            ("HOOK_PATH", "T000/B000/XXXXXXXX"),
            ("PLAIN", "not-a-secret-at-all"),
            ("MARKED", "marked-value-1"),
        ]
        .into();
        let lookup = |n: &str| env.get(n).map(|v| v.to_string());
        let mut config = Config {
            secrets: vec!["MARKED".into()],
            ..Config::default()
        };
        config.mcp_servers.insert(
            "gh".into(),
            McpServerSpec::Http {
                url: "https://bot:url-pass-77@example.com/mcp".into(),
                headers: [
                    ("Authorization".to_owned(), "Bearer ${GH}".to_owned()),
                    ("Accept".to_owned(), "application/json".to_owned()),
                ]
                .into(),
            },
        );
        config.mcp_servers.insert(
            "db".into(),
            McpServerSpec::Stdio {
                command: "db".into(),
                args: vec![],
                env: [
                    ("URL".to_owned(), "pg://u:${DB_PASSWORD}@h".to_owned()),
                    ("OTHER".to_owned(), "${PLAIN}".to_owned()),
                ]
                .into(),
            },
        );
        config
            .notify
            .sinks
            .push(crate::manifest::compiled_notify::SinkSpec {
                name: "slack".into(),
                target: SinkTarget::Webhook {
                    url: "https://hooks.slack.com/services/${HOOK_PATH}".into(),
                    headers: BTreeMap::new(),
                    format: Default::default(),
                    topic: None,
                },
                min_level: crate::domain::Level::Info,
                kinds: vec![],
                max_attempts: 1,
                backoff: std::time::Duration::ZERO,
                timeout: std::time::Duration::from_secs(1),
            });
        let r = redactor_for(&config, &[], &lookup);
        let text = r.text(
            "gh-value-123 db-password-9 T000/B000/XXXXXXXX marked-value-1 url-pass-77 not-a-secret-at-all application/json",
        );
        assert_eq!(
            text,
            "[REDACTED:Authorization] [REDACTED:DB_PASSWORD] [REDACTED:HOOK_PATH] \
             [REDACTED:MARKED] [REDACTED:mcp_servers.gh] not-a-secret-at-all application/json"
        );
    }
}
