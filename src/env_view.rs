//! What one process's environment gives the project: each variable the project
//! needs (a provider's key, a listener's token, a `${NAME}` of an MCP server) set or not, and
//! each program it runs (an MCP server's command, a command agent's or sink's program) found
//! or not. `pap doctor` works it out for its own shell and asks a running serve for serve's
//! over the control socket, and shows the two side by side: a retry runs in serve.
//!
//! Only names travel, never a value: the view says "set", not what it is set to.

use std::collections::BTreeMap;
use std::ffi::OsString;

use serde::{Deserialize, Serialize};

use crate::manifest::Project;
use crate::manifest::compiled::{McpServerSpec, ModelSpec};
use crate::manifest::compiled_listen::Credential;
use crate::manifest::compiled_notify::SinkTarget;

/// A variable the project needs, and who needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Variable {
    pub name: String,
    /// What it is for: `provider key`, `listen token`, `mcp server NAME`.
    pub role: String,
    /// Who needs it: agents, principals, the server.
    pub needed_by: Vec<String>,
    pub set: bool,
}

/// A program the project runs, and where this environment finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Program {
    /// As written in the manifest.
    pub name: String,
    /// `mcp server NAME`, `agent ID`, `sink NAME`.
    pub role: String,
    /// Where it was found, or why not.
    pub found: Result<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct View {
    pub variables: Vec<Variable>,
    pub programs: Vec<Program>,
}

impl View {
    pub(crate) fn variable(&self, name: &str, role: &str) -> Option<&Variable> {
        self.variables
            .iter()
            .find(|v| v.name == name && v.role == role)
    }

    pub(crate) fn program(&self, role: &str) -> Option<&Program> {
        self.programs.iter().find(|p| p.role == role)
    }
}

/// The view of the environment `var` reads (the process's own, in serve and doctor).
pub(crate) fn view(project: &Project, var: &dyn Fn(&str) -> Option<OsString>) -> View {
    let set = |name: &str| var(name).is_some_and(|v| !v.is_empty());
    // (name, role) → who needs it.
    let mut needed: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut programs = Vec::new();
    for agent in &project.agents {
        match &agent.model {
            ModelSpec::Anthropic(m) | ModelSpec::Openai(m) => needed
                .entry((m.api_key_env.clone(), "provider key".into()))
                .or_default()
                .push(format!("agent {}", agent.id)),
            ModelSpec::Command { program, .. } => programs.push(Program {
                name: program.display().to_string(),
                role: format!("agent {}", agent.id),
                found: locate(&program.display().to_string(), project),
            }),
        }
    }
    for p in &project.config.listen.principals {
        if let Credential::TokenEnv(name) = &p.credential {
            needed
                .entry((name.clone(), "listen token".into()))
                .or_default()
                .push(format!("principal {}", p.name));
        }
    }
    for (server, spec) in &project.config.mcp_servers {
        let role = format!("mcp server {server}");
        let values: Vec<&String> = match spec {
            McpServerSpec::Stdio { command, env, .. } => {
                programs.push(Program {
                    name: command.clone(),
                    role: role.clone(),
                    found: locate(command, project),
                });
                env.values().collect()
            }
            McpServerSpec::Http { url, headers } => {
                std::iter::once(url).chain(headers.values()).collect()
            }
        };
        for name in values
            .into_iter()
            .flat_map(|v| crate::interpolate::names(v))
        {
            needed
                .entry((name, role.clone()))
                .or_default()
                .push(role.clone());
        }
    }
    for sink in &project.config.notify.sinks {
        if let SinkTarget::Command { program, .. } = &sink.target {
            programs.push(Program {
                name: program.display().to_string(),
                role: format!("sink {}", sink.name),
                found: locate(&program.display().to_string(), project),
            });
        }
    }
    View {
        variables: needed
            .into_iter()
            .map(|((name, role), mut needed_by)| {
                needed_by.dedup();
                Variable {
                    set: set(&name),
                    name,
                    role,
                    needed_by,
                }
            })
            .collect(),
        programs,
    }
}

fn locate(program: &str, project: &Project) -> Result<String, String> {
    crate::program::locate(program, &project.root)
        .map(|p| p.display().to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_names_what_is_needed_and_never_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("agents")).unwrap();
        std::fs::write(
            root.join("pap.yaml"),
            "pap_version: \"0.2\"\nlisten:\n  auth:\n    principals:\n      - name: prom\n        token: ${PROM_TOKEN}\n        scopes: [metrics]\nmcp_servers:\n  docs:\n    url: https://mcp.example.com/mcp\n    headers:\n      Authorization: \"Bearer ${DOCS_TOKEN}\"\n",
        )
        .unwrap();
        std::fs::write(
            root.join("agents/a.yaml"),
            "pap_version: \"0.2\"\nagent:\n  id: a\n  risk_level: low\n  model:\n    provider: anthropic\n    model_id: m\n",
        )
        .unwrap();
        let project = crate::manifest::loader::load(root, &[]).project.unwrap();
        let env = |name: &str| (name == "PROM_TOKEN").then(|| OsString::from("s3cret-value"));
        let v = view(&project, &env);
        let names: Vec<(&str, &str, bool)> = v
            .variables
            .iter()
            .map(|x| (x.name.as_str(), x.role.as_str(), x.set))
            .collect();
        assert_eq!(
            names,
            [
                ("ANTHROPIC_API_KEY", "provider key", false),
                ("DOCS_TOKEN", "mcp server docs", false),
                ("PROM_TOKEN", "listen token", true)
            ]
        );
        assert!(!serde_json::to_string(&v).unwrap().contains("s3cret"));
    }
}
