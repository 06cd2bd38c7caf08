//! Every command's help is complete and clean: a description and an example for each
//! subcommand (nested ones included), no internal documents named, no stray runs of spaces.

use crate::common;

use common::{code, pap, stdout};

/// Every subcommand path, from `pap help`'s own listing, recursively.
fn commands(prefix: &[String]) -> Vec<Vec<String>> {
    let mut args: Vec<String> = prefix.to_vec();
    args.push("--help".into());
    let out = pap().args(&args).output().unwrap();
    assert_eq!(code(&out), 0, "pap {args:?}");
    let text = stdout(&out);
    let mut found = Vec::new();
    let mut in_list = false;
    for line in text.lines() {
        if line.trim_end() == "Commands:" {
            in_list = true;
            continue;
        }
        if in_list {
            if line.trim().is_empty() || !line.starts_with("  ") {
                break;
            }
            // A wrapped description continues on a deeper indent.
            if line.starts_with("   ") {
                continue;
            }
            let name = line.split_whitespace().next().unwrap().to_owned();
            if name == "help" {
                continue;
            }
            let mut path = prefix.to_vec();
            path.push(name);
            found.push(path.clone());
            found.extend(commands(&path));
        }
    }
    found
}

#[test]
fn every_subcommand_has_a_description_and_an_example() {
    let all = commands(&[]);
    assert!(all.len() >= 20, "{all:?}");
    assert!(
        all.iter().any(|c| c == &["inbox", "session", "close"]),
        "{all:?}"
    );
    let mut missing = Vec::new();
    for path in &all {
        let mut args = path.clone();
        args.push("--help".into());
        let text = stdout(&pap().args(&args).output().unwrap());
        let first = text.lines().next().unwrap_or_default();
        if first.trim().is_empty() || first.starts_with("Usage:") {
            missing.push(format!("{}: no description", path.join(" ")));
        }
        if !text.contains("Example") {
            missing.push(format!("{}: no example", path.join(" ")));
        }
        for banned in ["contract section", "issue 1", "RFD 011 section"] {
            if text.contains(banned) {
                missing.push(format!(
                    "{}: names an internal document ({banned})",
                    path.join(" ")
                ));
            }
        }
        for line in text.lines() {
            let body = line.trim_start();
            if body.contains("   ") && !line.starts_with("  -") && !line.starts_with("  ") {
                missing.push(format!("{}: stray spaces in {line:?}", path.join(" ")));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// In a list of possible values, every value has a description or none has: one described
/// value among bare ones makes clap pad the bare ones into a wide gap.
#[test]
fn possible_values_are_all_described_or_none_is() {
    let mut mixed = Vec::new();
    for path in commands(&[]) {
        let mut args = path.clone();
        args.push("--help".into());
        let text = stdout(&pap().args(&args).output().unwrap());
        let mut values: Vec<bool> = Vec::new();
        let mut check = |values: &mut Vec<bool>, at: &str| {
            if values.iter().any(|d| *d) && values.iter().any(|d| !*d) {
                mixed.push(format!("{}: {at}", path.join(" ")));
            }
            values.clear();
        };
        let mut in_list = false;
        for line in text.lines() {
            let body = line.trim_start();
            if body == "Possible values:" {
                in_list = true;
                continue;
            }
            if in_list {
                if let Some(value) = body.strip_prefix("- ") {
                    values.push(value.contains(':'));
                    continue;
                }
                if !body.is_empty() && line.len() - body.len() > 10 {
                    continue; // a wrapped description
                }
                check(&mut values, "a list of possible values");
                in_list = false;
            }
        }
        check(&mut values, "the last list");
    }
    assert!(
        mixed.is_empty(),
        "described and bare values mixed:\n{}",
        mixed.join("\n")
    );
}
