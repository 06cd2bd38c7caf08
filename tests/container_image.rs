//! The Containerfile says one thing in all its places. Its two final stages (`runtime`, from a
//! prebuilt binary, which CI builds and smoke-runs with buildah in .ci/check-image; and
//! `image`, which builds pap from source elsewhere) both start from `base`, which holds every
//! setting, and differ only in where their files come from; the builder uses the toolchain
//! rust-toolchain.toml pins; and the user, the state volume and the port agree with
//! contrib/image/rootfs.sh and the Kubernetes manifests.

use std::path::Path;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The instructions of stage `name` (continuation lines joined, comments dropped).
fn stage(containerfile: &str, name: &str) -> Vec<String> {
    let mut joined = Vec::new();
    let mut current = String::new();
    for line in containerfile.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part.trim_end()),
            None => {
                current.push_str(line);
                joined.push(std::mem::take(&mut current));
            }
        }
    }
    let start = joined
        .iter()
        .position(|l| l.ends_with(&format!(" AS {name}")))
        .unwrap_or_else(|| panic!("no stage {name}"));
    joined[start + 1..]
        .iter()
        .take_while(|l| !l.starts_with("FROM "))
        .cloned()
        .collect()
}

#[test]
fn both_final_stages_are_the_same_image_and_the_builder_uses_the_pinned_toolchain() {
    let file = read("Containerfile");
    let runtime = stage(&file, "runtime");
    let image = stage(&file, "image");
    // Both are `base` plus their files: a setting added to one alone would differ here.
    for name in ["runtime", "image"] {
        assert!(
            file.contains(&format!("FROM base AS {name}")),
            "{name} builds on base"
        );
    }
    let settings = |s: &[String]| -> Vec<String> {
        s.iter()
            .filter(|l| !l.starts_with("COPY "))
            .cloned()
            .collect()
    };
    assert_eq!(settings(&runtime), settings(&image));
    // The same three layers, from the context in one and from the builder in the other.
    let copies = |s: &[String]| s.iter().filter(|l| l.starts_with("COPY ")).count();
    assert_eq!((copies(&runtime), copies(&image)), (3, 3));
    assert!(
        runtime.iter().all(|l| !l.contains("--from=")),
        "runtime builds on its own: {runtime:?}"
    );

    let pinned = read("rust-toolchain.toml")
        .lines()
        .find_map(|l| l.strip_prefix("channel = \""))
        .map(|v| v.trim_end_matches('"').to_owned())
        .unwrap();
    assert!(
        file.contains(&format!(
            "FROM docker.io/library/rust:{pinned}-bookworm AS builder"
        )),
        "the builder stage uses Rust {pinned}"
    );
}

#[test]
fn user_volume_and_port_agree_with_the_rootfs_and_the_kubernetes_manifests() {
    let file = read("Containerfile");
    // The settings both final stages take from `base`.
    let runtime = stage(&file, "base");
    assert!(
        runtime.contains(&"USER 10001:10001".to_owned()),
        "{runtime:?}"
    );
    assert!(
        runtime.contains(&"VOLUME [\"/data\"]".to_owned()),
        "{runtime:?}"
    );
    assert!(runtime.contains(&"EXPOSE 8080".to_owned()), "{runtime:?}");
    assert!(
        runtime.contains(
            &"CMD [\"serve\", \"--listen\", \"0.0.0.0:8080\", \"--log-format\", \"json\"]"
                .to_owned()
        ),
        "{runtime:?}"
    );
    assert!(
        runtime
            .iter()
            .any(|l| l.starts_with("ENV ") && l.contains("PAP_STATE=/data")),
        "{runtime:?}"
    );
    let rootfs = read("contrib/image/rootfs.sh");
    assert!(rootfs.contains("pap:x:10001:10001:"), "rootfs.sh's passwd");
    let statefulset = read("contrib/kubernetes/statefulset.yaml");
    assert!(statefulset.contains("runAsUser: 10001"));
    assert!(statefulset.contains("\"0.0.0.0:8080\""));
    // No credential in a label or an environment default.
    for line in &runtime {
        let lower = line.to_lowercase();
        assert!(
            !["token", "password", "api_key", "secret"]
                .iter()
                .any(|w| lower.contains(w)),
            "{line}"
        );
    }
}

#[test]
fn the_build_context_leaves_out_target_but_the_image_layers() {
    let ignore = read(".containerignore");
    let lines: Vec<&str> = ignore
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert!(lines.contains(&"target/*"), "{lines:?}");
    assert!(lines.contains(&"!target/image/"), "{lines:?}");
    assert!(lines.contains(&".git/"), "{lines:?}");
}
