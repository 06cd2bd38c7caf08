//! `pap schema`: the JSON Schema of each manifest kind, generated from the raw types.

use anyhow::Context;

use super::Outcome;
use crate::cli::{SchemaArgs, SchemaKind};
use crate::manifest::loader;

pub(super) fn run(args: &SchemaArgs) -> anyhow::Result<Outcome> {
    let text = |kind: SchemaKind| -> String {
        let schema = match kind {
            SchemaKind::RuleTest => crate::rule_test::load::schema(),
            _ => loader::schema(kind.as_str()).expect("every kind has a schema"),
        };
        let mut s = serde_json::to_string_pretty(schema).expect("schemas serialise");
        s.push('\n');
        s
    };
    match (&args.out, args.kind) {
        (Some(dir), kinds) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            let all = [
                SchemaKind::Trigger,
                SchemaKind::Agent,
                SchemaKind::Config,
                SchemaKind::Schedule,
                SchemaKind::RuleTest,
            ];
            for kind in kinds.map(|k| vec![k]).unwrap_or(all.to_vec()) {
                let path = dir.join(format!("{}.schema.json", kind.as_str()));
                std::fs::write(&path, text(kind))
                    .with_context(|| format!("writing {}", path.display()))?;
                crate::say!("wrote {}", path.display());
            }
        }
        (None, Some(kind)) => print!("{}", text(kind)),
        (None, None) => unreachable!("clap requires a kind without --out"),
    }
    Ok(Outcome::Success)
}
