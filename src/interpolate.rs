//! `${NAME}` interpolation in pap.yaml values that hand secrets to MCP servers on purpose.
//!
//! Only values the user wrote in pap.yaml are interpolated, never event content.

/// Checks the syntax without looking anything up.
pub fn check(value: &str) -> Result<(), String> {
    expand(value, |_| Some(String::new())).map(|_| ())
}

/// The names `value` refers to with `${NAME}`, in order (none when its syntax is wrong).
pub fn names(value: &str) -> Vec<String> {
    let found = std::cell::RefCell::new(Vec::new());
    let _ = expand(value, |name| {
        found.borrow_mut().push(name.to_owned());
        Some(String::new())
    });
    found.into_inner()
}

/// Expands `${NAME}` with `lookup`; `$$` is a literal `$`. A name `lookup` does not know is an
/// error naming it (the value is never echoed, it may be a secret's neighbour).
pub fn expand(value: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let end = tail.find('}').ok_or("`${` without a closing `}`")?;
            let name = &tail[..end];
            if !crate::manifest::compile_agent::valid_env_name(name) {
                return Err(format!(
                    "`${{{name}}}` does not name an environment variable"
                ));
            }
            out.push_str(
                &lookup(name).ok_or_else(|| format!("environment variable {name} is not set"))?,
            );
            rest = &tail[end + 1..];
        } else {
            return Err("a `$` must start `${NAME}` or be doubled as `$$`".to_string());
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_names_and_literal_dollars() {
        let lookup = |n: &str| (n == "TOKEN").then(|| "s3cr3t".to_string());
        assert_eq!(expand("Bearer ${TOKEN}", lookup).unwrap(), "Bearer s3cr3t");
        assert_eq!(expand("cost: $$5", lookup).unwrap(), "cost: $5");
        assert!(
            expand("${MISSING}", lookup)
                .unwrap_err()
                .contains("MISSING")
        );
        assert!(check("$TOKEN").is_err());
        assert!(check("${TOKEN").is_err());
        assert!(check("${1X}").is_err());
        assert!(check("plain").is_ok());
        assert_eq!(names("${A}:$$${B}"), ["A", "B"]);
    }
}
