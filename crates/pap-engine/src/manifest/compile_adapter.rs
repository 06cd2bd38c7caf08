//! pap.yaml compile step for `adapters:`, and the built-in presets through the same code.
//!
//! An entry named like a preset starts from the preset and replaces the fields it gives;
//! every field's expression is parsed here (JSONPath or template), so `pap lint` points at the
//! line of a broken one, and serve never meets an expression that does not parse.

use std::collections::HashSet;

use super::file_ctx::{FileCtx, HelpExt};
use super::raw::{
    AdapterAuthSettings, AdapterData, AdapterEventSettings, AdapterField, AdapterPer,
    AdapterSettings,
};
use super::yaml_tree::PathSeg;
use crate::adapter::{self, Adapter, AdapterAuth, Data, Expr, Field, Hmac, Identity, presets};
use crate::interpolate::valid_env_name;
use crate::path;

/// A problem in one adapter entry, at a path relative to the entry.
#[derive(Debug)]
pub struct Problem {
    pub code: &'static str,
    pub at: Vec<PathSeg>,
    pub message: String,
    pub help: Option<&'static str>,
}

/// The adapters of `pap.yaml` merged with the presets, reporting problems through `ctx`.
pub(crate) fn compile_all(raw: &[AdapterSettings], ctx: &mut FileCtx) -> Vec<Adapter> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    let mut paths = HashSet::new();
    for (i, entry) in raw.iter().enumerate() {
        let base = path!["adapters", i];
        if !names.insert(entry.name.clone()) {
            ctx.at(
                "duplicate-id",
                &path!["adapters", i, "name"],
                format!("adapter `{}` is defined twice", entry.name),
            );
            continue;
        }
        let merged = match preset(&entry.name) {
            Some(p) => overlay(p, entry),
            None => entry.clone(),
        };
        let (adapter, problems) = compile(&merged);
        for p in problems {
            let mut at = base.to_vec();
            at.extend(p.at);
            let d = ctx.at(p.code, &at, p.message);
            if let Some(help) = p.help {
                d.help(help);
            }
        }
        if let Some(a) = adapter {
            if !paths.insert(a.path.clone()) {
                ctx.at(
                    "invalid-adapter-path",
                    &path!["adapters", i, "path"],
                    format!("`{}` is the route of another adapter", a.path),
                );
                continue;
            }
            out.push(a);
        }
    }
    for p in all_presets() {
        if !names.contains(&p.name) && paths.insert(p.path.clone()) {
            out.push(p);
        }
    }
    out
}

/// The presets as they are when `pap.yaml` says nothing of them.
pub(crate) fn all_presets() -> Vec<Adapter> {
    presets::ALL
        .iter()
        .map(|p| {
            let name = p.name;
            let (adapter, problems) = compile(&preset(name).expect("a preset"));
            assert!(problems.is_empty(), "preset {name}: {problems:?}");
            adapter.expect("a preset compiles")
        })
        .collect()
}

/// The raw form of the preset `name`.
pub fn preset(name: &str) -> Option<AdapterSettings> {
    let found = presets::ALL.iter().find(|p| p.name == name)?;
    Some(serde_saphyr::from_str(found.yaml).expect("a preset parses"))
}

/// `base` with the fields `over` gives replaced.
fn overlay(mut base: AdapterSettings, over: &AdapterSettings) -> AdapterSettings {
    if over.path.is_some() {
        base.path = over.path.clone();
    }
    if over.auth.is_some() {
        base.auth = over.auth.clone();
    }
    if over.each.is_some() {
        base.each = over.each.clone();
    }
    if over.identity_annotations.is_some() {
        base.identity_annotations = over.identity_annotations.clone();
    }
    if over.refire_after.is_some() {
        base.refire_after = over.refire_after.clone();
    }
    if over.alert.is_some() {
        base.alert = over.alert;
    }
    if over.per.is_some() {
        base.per = over.per;
    }
    if let Some(e) = &over.event {
        let b = base.event.get_or_insert_with(AdapterEventSettings::default);
        let fields = [
            (&mut b.id, &e.id),
            (&mut b.kind, &e.kind),
            (&mut b.source, &e.source),
            (&mut b.time, &e.time),
        ];
        for (to, from) in fields {
            if from.is_some() {
                *to = from.clone();
            }
        }
        if e.data.is_some() {
            b.data = e.data.clone();
        }
    }
    base
}

/// One entry (already merged with its preset).
pub fn compile(raw: &AdapterSettings) -> (Option<Adapter>, Vec<Problem>) {
    let mut problems = Vec::new();
    let valid_name = !raw.name.is_empty()
        && raw.name.len() <= 64
        && raw
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid_name {
        problems.push(Problem {
            code: "invalid-id",
            at: path!["name"].to_vec(),
            message: format!(
                "adapter name `{}` must be 1 to 64 letters, digits, `-` and `_`",
                raw.name
            ),
            help: None,
        });
    }
    let path = raw
        .path
        .clone()
        .unwrap_or_else(|| format!("{}{}", adapter::PATH_PREFIX, raw.name));
    if let Err(why) = check_path(&path) {
        problems.push(Problem {
            code: "invalid-adapter-path",
            at: path!["path"].to_vec(),
            message: format!("`{path}`: {why}"),
            help: Some("adapter routes look like /v1/ingest/github"),
        });
    }
    let auth = compile_auth(raw.auth.as_ref(), &mut problems);
    let each = raw.each.as_deref().and_then(|text| {
        adapter::parse_each(text)
            .map_err(|why| {
                problems.push(Problem {
                    code: "invalid-jsonpath",
                    at: path!["each"].to_vec(),
                    message: why,
                    help: None,
                })
            })
            .ok()
    });
    let identity = compile_identity(raw, &mut problems);
    if raw.per == Some(AdapterPer::Group) && raw.each.is_none() {
        problems.push(Problem {
            code: "missing-field",
            at: path!["per"].to_vec(),
            message: "`per: group` makes one event of the elements `each` names, and this adapter has no `each`".to_owned(),
            help: Some("add `each: $.alerts` (the array of the group's alerts)"),
        });
    }
    let event = raw.event.clone().unwrap_or_default();
    let mut field = |name: &str, f: &Option<AdapterField>| -> Option<Field> {
        let Some(f) = f else {
            problems.push(Problem {
                code: "missing-field",
                at: path!["event"].to_vec(),
                message: format!("adapter `{}` has no `event.{name}`", raw.name),
                help: Some("each of id, type, source and time is a JSONPath ($.item.x), a template ({item.x}), or a list of them"),
            });
            return None;
        };
        let texts: Vec<&String> = match f {
            AdapterField::One(t) => vec![t],
            AdapterField::Alternatives(ts) => ts.iter().collect(),
        };
        let mut exprs = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let at = match f {
                AdapterField::One(_) => path!["event", name].to_vec(),
                AdapterField::Alternatives(_) => path!["event", name, i].to_vec(),
            };
            match parse_expr(text, at, &mut problems) {
                Some(e) => exprs.push(e),
                None => return None,
            }
        }
        Some(Field(exprs))
    };
    let id = field("id", &event.id);
    let kind = field("type", &event.kind);
    let source = field("source", &event.source);
    let time = field("time", &event.time);
    let data = match &event.data {
        None => Some(Data::Whole(Expr::parse("$.item").expect("parses"))),
        Some(AdapterData::Whole(text)) => {
            parse_expr(text, path!["event", "data"].to_vec(), &mut problems).map(Data::Whole)
        }
        Some(AdapterData::Fields(fields)) => {
            let mut out = Vec::new();
            for (k, text) in fields {
                let at = path!["event", "data", k.as_str()].to_vec();
                out.push((k.clone(), parse_expr(text, at, &mut problems)));
            }
            out.iter().all(|(_, e)| e.is_some()).then(|| {
                Data::Fields(
                    out.into_iter()
                        .map(|(k, e)| (k, e.expect("checked")))
                        .collect(),
                )
            })
        }
    };
    let adapter = match (id, kind, source, time, data, auth) {
        (Some(id), Some(kind), Some(source), Some(time), Some(data), Some(auth))
            if problems.is_empty() =>
        {
            Some(Adapter {
                name: raw.name.clone(),
                path,
                auth,
                each,
                id,
                kind,
                source,
                time,
                data,
                identity,
                alert: raw.alert.unwrap_or(false),
                per_group: raw.per == Some(AdapterPer::Group),
            })
        }
        _ => None,
    };
    (adapter, problems)
}

/// `identity_annotations` and `refire_after`.
fn compile_identity(raw: &AdapterSettings, problems: &mut Vec<Problem>) -> Identity {
    let mut identity = Identity::default();
    for (i, name) in raw.identity_annotations.iter().flatten().enumerate() {
        if name.is_empty() || name.chars().any(char::is_control) {
            problems.push(Problem {
                code: "invalid-annotation",
                at: path!["identity_annotations", i].to_vec(),
                message: if name.is_empty() {
                    "an annotation name is empty".to_owned()
                } else {
                    format!("{name:?} is not an annotation name (it has control characters)")
                },
                help: Some("name annotations as the alert carries them, e.g. [summary]"),
            });
        } else {
            identity.annotations.push(name.clone());
        }
    }
    if let Some(text) = &raw.refire_after {
        match crate::manifest::duration::parse(text) {
            Ok(d) if d.as_secs() >= 60 => {
                identity.refire_after_ms = Some(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            }
            Ok(_) => problems.push(Problem {
                code: "invalid-duration",
                at: path!["refire_after"].to_vec(),
                message: format!("refire_after `{text}` is shorter than a minute"),
                help: Some("a firing alert is looked at again after hours, e.g. `4h`"),
            }),
            Err(why) => problems.push(Problem {
                code: "invalid-duration",
                at: path!["refire_after"].to_vec(),
                message: format!("refire_after `{text}`: {}", why.reason()),
                help: Some("a duration such as `30m`, `4h` or `1d`"),
            }),
        }
    }
    identity
}

fn parse_expr(text: &str, at: Vec<PathSeg>, problems: &mut Vec<Problem>) -> Option<Expr> {
    match Expr::parse(text) {
        Ok(e) => Some(e),
        Err(why) => {
            let code = if text.starts_with('$') {
                "invalid-jsonpath"
            } else {
                "invalid-template"
            };
            problems.push(Problem {
                code,
                at,
                message: format!("`{text}`: {why}"),
                help: Some("a JSONPath over {\"item\": ELEMENT, \"body\": BODY} ($.item.labels), or a template ({item.fingerprint}-{body.receiver})"),
            });
            None
        }
    }
}

fn compile_auth(
    raw: Option<&AdapterAuthSettings>,
    problems: &mut Vec<Problem>,
) -> Option<AdapterAuth> {
    let Some(raw) = raw else {
        return Some(AdapterAuth::default());
    };
    let mut ok = true;
    let mut env_ref = |text: &str, at: Vec<PathSeg>, problems: &mut Vec<Problem>| {
        let name = text
            .strip_prefix("${")
            .and_then(|t| t.strip_suffix('}'))
            .filter(|n| valid_env_name(n));
        if name.is_none() {
            ok = false;
            problems.push(Problem {
                code: "plain-secret",
                at,
                message: "a secret is never written into a file; give the environment variable that holds it".into(),
                help: Some("write ${NAME} and set NAME in serve's environment"),
            });
        }
        name.map(str::to_owned)
    };
    let bearer_env = raw
        .bearer
        .as_deref()
        .and_then(|t| env_ref(t, path!["auth", "bearer"].to_vec(), problems));
    let hmac = raw.hmac.as_ref().and_then(|h| {
        let secret_env = env_ref(
            &h.secret,
            path!["auth", "hmac", "secret"].to_vec(),
            problems,
        )?;
        Some(Hmac {
            header: h.header.to_ascii_lowercase(),
            secret_env,
            prefix: h.prefix.clone().unwrap_or_else(|| "sha256=".into()),
        })
    });
    ok.then_some(AdapterAuth { bearer_env, hmac })
}

fn check_path(path: &str) -> Result<(), String> {
    let rest = path
        .strip_prefix(adapter::PATH_PREFIX)
        .ok_or_else(|| format!("adapter routes are under {}", adapter::PATH_PREFIX))?;
    let ok = !rest.is_empty()
        && rest.split('/').all(|seg| {
            !seg.is_empty()
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        });
    if ok {
        Ok(())
    } else {
        Err("segments are letters, digits, `-`, `_` and `.`, not empty".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_presets_compile_and_answer_under_v1_ingest() {
        let all = all_presets();
        let paths: Vec<&str> = all.iter().map(|a| a.path.as_str()).collect();
        assert_eq!(paths, ["/v1/ingest/alertmanager", "/v1/ingest/grafana"]);
    }

    #[test]
    fn an_entry_named_like_a_preset_replaces_only_what_it_gives() {
        let over: AdapterSettings = serde_saphyr::from_str(
            "name: alertmanager\nevent:\n  type: \"ops.alert.{item.status}\"\n",
        )
        .unwrap();
        let merged = overlay(preset("alertmanager").unwrap(), &over);
        let (a, problems) = compile(&merged);
        assert!(problems.is_empty(), "{problems:?}");
        let a = a.unwrap();
        assert_eq!(a.path, "/v1/ingest/alertmanager");
        assert_eq!(a.each.as_deref(), Some(&["alerts".to_owned()][..]));
        let body = serde_json::json!({"alerts": [{"status": "firing", "fingerprint": "f",
            "startsAt": "2026-01-01T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z"}]});
        let limits = crate::adapter::Limits {
            event_bytes: 1 << 20,
            total_bytes: 1 << 24,
        };
        let got = a.map(body, limits, 0).unwrap();
        assert_eq!(got[0].event.as_ref().unwrap()["type"], "ops.alert.firing");
    }
}
