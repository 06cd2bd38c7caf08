//! The Kubernetes manifests in contrib/kubernetes/ are ones a cluster accepts and that reach a
//! working pap:
//! - each file validates, strictly (no unknown field), against the Kubernetes schemas, offline,
//!   with `kubernetes-validate` (PyPI; CI installs it and sets
//!   `PAP_TEST_REQUIRE_KUBERNETES_VALIDATE=1`, which makes its absence a failure);
//! - the probes, the container port, the Service and the project's `listen.address` name one
//!   port, and the probes ask `/healthz` and `/readyz`;
//! - the pods run as the image's non-root user with a read-only root, writing `/data` and
//!   `/tmp` only;
//! - the ConfigMap's project, laid out as the kubelet lays out the volume the workloads mount,
//!   passes `pap lint`, and every key of it is mounted somewhere.

use crate::common;
use crate::kubernetes_volume::write_volume;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The non-root user the image runs as (Containerfile).
const IMAGE_UID: u64 = 10001;

fn folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/kubernetes")
}

/// Every manifest file, with its path.
fn files() -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in [folder(), folder().join("postgres")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                found.push(path);
            }
        }
    }
    found.sort();
    assert!(found.len() >= 6, "{found:?}");
    found
}

/// Each file's resource.
fn resources() -> Vec<(PathBuf, Value)> {
    files()
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let value = serde_saphyr::from_str::<Value>(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, value)
        })
        .collect()
}

fn of_kind<'a>(all: &'a [(PathBuf, Value)], kind: &str) -> Vec<&'a (PathBuf, Value)> {
    all.iter().filter(|(_, r)| r["kind"] == kind).collect()
}

/// The StatefulSet and the Deployment.
fn workloads(all: &[(PathBuf, Value)]) -> Vec<&(PathBuf, Value)> {
    let found: Vec<_> = all
        .iter()
        .filter(|(_, r)| r["kind"] == "StatefulSet" || r["kind"] == "Deployment")
        .collect();
    assert_eq!(
        found.len(),
        2,
        "a StatefulSet (redb) and a Deployment (PostgreSQL)"
    );
    found
}

/// The port a probe or a Service's `targetPort` reaches in `container`: a number, or the name
/// of one of its ports.
fn port_of(container: &Value, port: &Value) -> u64 {
    match port {
        Value::Number(n) => n.as_u64().unwrap(),
        Value::String(name) => container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no port named {name}"))["containerPort"]
            .as_u64()
            .unwrap(),
        other => panic!("not a port: {other}"),
    }
}

/// The project's pap.yaml from the ConfigMap.
fn project_config(all: &[(PathBuf, Value)]) -> Value {
    let maps = of_kind(all, "ConfigMap");
    assert_eq!(maps.len(), 1);
    let text = maps[0].1["data"]["pap.yaml"].as_str().unwrap();
    serde_saphyr::from_str(text).unwrap()
}

#[test]
fn every_manifest_validates_against_the_kubernetes_schemas() {
    let Some(validate) = common::required_tool(
        "kubernetes-validate",
        "PAP_TEST_REQUIRE_KUBERNETES_VALIDATE",
        "the Kubernetes manifests are not validated against the schemas",
    ) else {
        return;
    };
    for file in files() {
        let out = Command::new(&validate)
            .args(["--strict", "--quiet"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}{}",
            file.display(),
            common::stdout(&out),
            common::stderr(&out)
        );
    }
    // The check itself refuses what a cluster would: a misspelt field.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(folder().join("statefulset.yaml")).unwrap();
    std::fs::write(
        &bad,
        text.replace("readOnlyRootFilesystem", "readOnlyRootFileSystem"),
    )
    .unwrap();
    let out = Command::new(&validate)
        .args(["--strict", "--quiet"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", common::stdout(&out));
}

#[test]
fn probes_ports_and_the_service_reach_the_listen_address() {
    let all = resources();
    let config = project_config(&all);
    let address = config["listen"]["address"].as_str().unwrap();
    let port: u64 = address.rsplit_once(':').unwrap().1.parse().unwrap();
    for (path, workload) in workloads(&all) {
        let at = path.display();
        let containers = workload["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        let pap = containers.iter().find(|c| c["name"] == "pap").unwrap();
        let args: Vec<&str> = pap["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let listen = args
            .windows(2)
            .find(|w| w[0] == "--listen")
            .map(|w| w[1])
            .unwrap_or_else(|| panic!("{at}: serve is given --listen"));
        assert_eq!(listen, address, "{at}: --listen and listen.address");
        assert_eq!(args[0], "serve", "{at}");
        for (probe, path) in [
            ("livenessProbe", "/healthz"),
            ("readinessProbe", "/readyz"),
            ("startupProbe", "/healthz"),
        ] {
            let get = &pap[probe]["httpGet"];
            assert_eq!(get["path"], path, "{at}: {probe}");
            assert_eq!(port_of(pap, &get["port"]), port, "{at}: {probe}'s port");
        }
        for service in of_kind(&all, "Service") {
            let selector = service.1["spec"]["selector"].as_object().unwrap();
            let labels = &workload["spec"]["template"]["metadata"]["labels"];
            for (key, value) in selector {
                assert_eq!(&labels[key], value, "{at}: the Service selects the pods");
            }
            for p in service.1["spec"]["ports"].as_array().unwrap() {
                assert_eq!(port_of(pap, &p["targetPort"]), port, "{at}: the Service");
            }
        }
    }
}

#[test]
fn pods_run_as_the_image_user_and_write_only_data_and_tmp() {
    let all = resources();
    for (path, workload) in workloads(&all) {
        let at = path.display();
        let pod = &workload["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{at}");
        assert_eq!(pod["securityContext"]["runAsUser"], IMAGE_UID, "{at}");
        assert_eq!(pod["securityContext"]["fsGroup"], IMAGE_UID, "{at}");
        let containers = pod["containers"].as_array().unwrap().iter();
        let init = pod["initContainers"].as_array().into_iter().flatten();
        for container in containers.chain(init) {
            let name = &container["name"];
            let context = &container["securityContext"];
            assert_eq!(context["readOnlyRootFilesystem"], true, "{at}: {name}");
            assert_eq!(context["allowPrivilegeEscalation"], false, "{at}: {name}");
            assert_eq!(context["capabilities"]["drop"][0], "ALL", "{at}: {name}");
            let mounts = container["volumeMounts"].as_array().unwrap();
            let writable: Vec<&str> = mounts
                .iter()
                .filter(|m| m["readOnly"] != true)
                .map(|m| m["mountPath"].as_str().unwrap())
                .collect();
            assert_eq!(writable, ["/data", "/tmp"], "{at}: {name}");
            let env = container["env"].as_array().unwrap();
            let state = env.iter().find(|e| e["name"] == "PAP_STATE").unwrap();
            assert_eq!(state["value"], "/data", "{at}: {name}");
        }
        // Token files must not be readable by others: pap refuses them otherwise.
        let volumes = pod["volumes"].as_array().unwrap();
        let secret = volumes.iter().find(|v| v["secret"].is_object()).unwrap();
        assert_eq!(secret["secret"]["defaultMode"], 0o440, "{at}");
    }
}

#[test]
fn the_configmap_project_as_the_kubelet_mounts_it_passes_lint() {
    let all = resources();
    let map = &of_kind(&all, "ConfigMap")[0].1;
    let data = map["data"].as_object().unwrap();
    for (path, workload) in workloads(&all) {
        let volumes = workload["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap();
        let project = volumes
            .iter()
            .find(|v| v["configMap"]["name"] == map["metadata"]["name"])
            .unwrap_or_else(|| panic!("{}: the project is mounted", path.display()));
        let items = project["configMap"]["items"].as_array().unwrap();
        let files: Vec<(String, String)> = items
            .iter()
            .map(|item| {
                let key = item["key"].as_str().unwrap();
                let text = data[key].as_str().unwrap_or_else(|| panic!("no key {key}"));
                (item["path"].as_str().unwrap().to_owned(), text.to_owned())
            })
            .collect();
        assert_eq!(
            files.len(),
            data.len(),
            "{}: every key of the ConfigMap is mounted",
            path.display()
        );
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("etc-pap");
        write_volume(&root, "2026_11_28_08_00_00.123456789", &files);
        let out = common::pap_at(&root).args(["lint"]).output().unwrap();
        assert_eq!(
            common::code(&out),
            0,
            "{}: {}{}",
            path.display(),
            common::stdout(&out),
            common::stderr(&out)
        );
        // Every file was found through the kubelet's links (none skipped as a hidden link).
        assert!(
            common::stdout(&out).contains(&format!("{} files checked, no problems", files.len())),
            "{}: {}{}",
            path.display(),
            common::stdout(&out),
            common::stderr(&out)
        );
    }
}
