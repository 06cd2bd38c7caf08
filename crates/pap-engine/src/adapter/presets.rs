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

/// Every preset, by name.
pub(crate) const ALL: &[(&str, &str)] = &[("alertmanager", ALERTMANAGER), ("grafana", GRAFANA)];
