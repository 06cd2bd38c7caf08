//! `${NAME}` interpolation in pap.yaml values that hand secrets to MCP servers on purpose.
//!
//! Only values the user wrote in pap.yaml are interpolated, never event content.

/// Why a value cannot be expanded. The value itself is never quoted: it may hold a secret
/// next to the reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("`${{` without a closing `}}`")]
    Unclosed,
    #[error("`${{{0}}}` does not name an environment variable")]
    NotAName(String),
    #[error("environment variable {0} is not set")]
    Unset(String),
    #[error("a `$` must start `${{NAME}}` or be doubled as `$$`")]
    LoneDollar,
}

/// Checks the syntax without looking anything up.
pub(crate) fn check(value: &str) -> Result<(), ExpandError> {
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
pub fn expand(value: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let end = tail.find('}').ok_or(ExpandError::Unclosed)?;
            let name = &tail[..end];
            if !valid_env_name(name) {
                return Err(ExpandError::NotAName(name.to_owned()));
            }
            out.push_str(&lookup(name).ok_or_else(|| ExpandError::Unset(name.to_owned()))?);
            rest = &tail[end + 1..];
        } else {
            return Err(ExpandError::LoneDollar);
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether `name` is a variable name pap takes (`${NAME}`, `api_key_env`): a letter or `_`,
/// then letters, digits and `_`.
pub(crate) fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names() {
        assert!(valid_env_name("OPENAI_API_KEY"));
        assert!(valid_env_name("_X1"));
        assert!(!valid_env_name("1X"));
        assert!(!valid_env_name("MY-KEY"));
        assert!(!valid_env_name(""));
    }

    #[test]
    fn expands_names_and_literal_dollars() {
        let lookup = |n: &str| (n == "TOKEN").then(|| "s3cr3t".to_string());
        assert_eq!(expand("Bearer ${TOKEN}", lookup).unwrap(), "Bearer s3cr3t");
        assert_eq!(expand("cost: $$5", lookup).unwrap(), "cost: $5");
        let unset = expand("${MISSING}", lookup).unwrap_err();
        assert_eq!(unset, ExpandError::Unset("MISSING".into()));
        assert_eq!(unset.to_string(), "environment variable MISSING is not set");
        assert_eq!(check("$TOKEN"), Err(ExpandError::LoneDollar));
        assert_eq!(check("${TOKEN"), Err(ExpandError::Unclosed));
        assert_eq!(check("${1X}"), Err(ExpandError::NotAName("1X".into())));
        assert_eq!(
            check("${1X}").unwrap_err().to_string(),
            "`${1X}` does not name an environment variable"
        );
        assert!(check("plain").is_ok());
        assert_eq!(names("${A}:$$${B}"), ["A", "B"]);
    }
}
