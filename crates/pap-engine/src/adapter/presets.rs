//! The built-in adapters, written in the same form as `adapters:` entries in `pap.yaml` and
//! compiled by the same code. They answer with no configuration; an `adapters:` entry with
//! the same name changes the fields it gives (see the worked example in docs/src/how-to/webhooks.md).
//!
//! Both identify an alert occurrence by its fingerprint (a hash of its labels), its status
//! and `startsAt`: a re-send of the same firing alert (Alertmanager's `repeat_interval`, an
//! HA pair sending the same notification twice) is the same event, hence `duplicate`; its
//! resolution is a new event, and so is a re-fire after resolution (a new `startsAt`).
//! `time` is `endsAt` once resolved and `startsAt` while firing: a firing alert's `endsAt` is
//! Go's zero time, which never counts.

/// Prometheus Alertmanager, webhook format version 4.
pub(crate) const ALERTMANAGER: &str = r#"
name: alertmanager
path: /v1/ingest/alertmanager
each: $.alerts
alert: true
event:
  id: "am-{item.fingerprint}-{item.status}-{item.startsAt}"
  type: "alertmanager.alert.{item.status}"
  source: ["{body.externalURL}", "alertmanager"]
  time: ["{item.endsAt}", "{item.startsAt}"]
  data:
    status: $.item.status
    labels: $.item.labels
    annotations: $.item.annotations
    startsAt: $.item.startsAt
    endsAt: $.item.endsAt
    generatorURL: $.item.generatorURL
    fingerprint: $.item.fingerprint
    receiver: $.body.receiver
    groupKey: $.body.groupKey
    groupLabels: $.body.groupLabels
    commonLabels: $.body.commonLabels
    commonAnnotations: $.body.commonAnnotations
    externalURL: $.body.externalURL
"#;

/// Grafana unified alerting's webhook contact point (format version 1).
pub(crate) const GRAFANA: &str = r#"
name: grafana
path: /v1/ingest/grafana
each: $.alerts
alert: true
event:
  id: "grafana-{item.fingerprint}-{item.status}-{item.startsAt}"
  type: "grafana.alert.{item.status}"
  source: ["{body.externalURL}", "grafana"]
  time: ["{item.endsAt}", "{item.startsAt}"]
  data:
    status: $.item.status
    labels: $.item.labels
    annotations: $.item.annotations
    values: $.item.values
    startsAt: $.item.startsAt
    endsAt: $.item.endsAt
    generatorURL: $.item.generatorURL
    silenceURL: $.item.silenceURL
    dashboardURL: $.item.dashboardURL
    panelURL: $.item.panelURL
    fingerprint: $.item.fingerprint
    receiver: $.body.receiver
    orgId: $.body.orgId
    title: $.body.title
    groupKey: $.body.groupKey
    commonLabels: $.body.commonLabels
    externalURL: $.body.externalURL
"#;

/// A built-in adapter: its name (its route is `/v1/ingest/NAME`), who sends to it, and its
/// mapping in the form of an `adapters:` entry.
#[derive(Debug)]
pub struct Preset {
    pub name: &'static str,
    /// Who posts to it, in the words of the help and the error texts.
    pub sender: &'static str,
    pub(crate) yaml: &'static str,
}

/// Every preset: the one list `pap adapt --help`, serve's answer to an unknown route, the
/// book's table (held to it by `tests/docs.rs`) and the compiled project read. A preset is
/// one entry here, with its mapping above, a captured body of its sender under
/// `tests/fixtures/webhooks/` and a test that maps it.
pub static ALL: &[Preset] = &[
    Preset {
        name: "alertmanager",
        sender: "Prometheus Alertmanager, webhook format version 4",
        yaml: ALERTMANAGER,
    },
    Preset {
        name: "grafana",
        sender: "Grafana unified alerting, webhook contact point",
        yaml: GRAFANA,
    },
];

/// The presets' names, in order.
pub fn names() -> impl Iterator<Item = &'static str> {
    ALL.iter().map(|p| p.name)
}

/// `alertmanager (Prometheus Alertmanager, …), grafana (…)`: the presets in one line.
pub fn listed() -> String {
    ALL.iter()
        .map(|p| format!("{} ({})", p.name, p.sender))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `/v1/ingest/alertmanager, /v1/ingest/grafana`: the presets' routes.
pub fn routes() -> String {
    ALL.iter()
        .map(|p| format!("/v1/ingest/{}", p.name))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A preset's name is lowercase letters only: the tests name an unknown adapter with a
    /// digit and a dash (`x-unknown-0`), which can never become one.
    #[test]
    fn preset_names_are_lowercase_letters() {
        for p in ALL {
            assert!(p.name.bytes().all(|b| b.is_ascii_lowercase()), "{}", p.name);
        }
        assert_eq!(names().count(), ALL.len());
    }
}
